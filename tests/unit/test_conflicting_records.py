"""A trade_id's first copy wins for good: a later record with the same id and another event time
is a conflict (quarantined with its reason), a redelivery or the same record read again is not;
and the driver's index of silver's trade ids finds known ids without reading silver."""

from datetime import datetime, timedelta, timezone

import numpy as np
import pyarrow as pa

from streaming.lake.store import Batch, Lake
from streaming.lake.tables import SILVER, UTC_TIME
from streaming.medallion.silver.guard import conflict_reasons, split_conflicts
from streaming.sink.seen_ids import TradeIds, _in_sorted, _SortedRuns, event_days, trade_id_hashes

T0 = datetime(2026, 3, 2, 9, 1, tzinfo=timezone.utc)


def records(*rows) -> pa.Table:
    """(trade_id, minutes after 09:01, partition, offset) per record."""
    return pa.table({
        "trade_id": [r[0] for r in rows],
        "event_time": pa.array([T0 + timedelta(minutes=r[1]) for r in rows], UTC_TIME),
        "topic": ["trades"] * len(rows), "partition": pa.array([r[2] for r in rows], pa.int32()),
        "offset": pa.array([r[3] for r in rows], pa.int64()),
    })


def test_another_event_time_from_another_record_conflicts_and_says_with_what():
    first = records(("c1", 0, 0, 5))
    reasons = conflict_reasons(records(("c1", 1, 1, 9), ("c1", 0, 2, 3), ("c1", 7, 0, 5), ("c2", 3, 0, 6)), first)
    assert [r is not None for r in reasons.to_pylist()] == [True, False, False, False]
    assert reasons[0].as_py() == ("trade_id c1 is already a trade with event_time 2026-03-02T09:01:00Z (trades/0 "
                                  "offset 5); this record says 2026-03-02T09:02:00Z: the first copy wins")


def test_split_conflicts_keeps_the_rest_in_order():
    kept, conflicting, reasons = split_conflicts(records(("a", 0, 0, 1), ("c1", 1, 1, 9), ("b", 2, 0, 2)),
                                                 records(("c1", 0, 0, 5)))
    assert kept["trade_id"].to_pylist() == ["a", "b"] and conflicting["trade_id"].to_pylist() == ["c1"]
    assert len(reasons) == 1


def hashes(*names) -> np.ndarray:
    return trade_id_hashes(pa.chunked_array([pa.array(names)])).to_numpy()


def days(*numbers) -> np.ndarray:
    return np.array(numbers, np.int32)


DAY0 = (T0 - datetime(1970, 1, 1, tzinfo=timezone.utc)).days


def silver_with(lake, batch: int, names: list[str], event_time: datetime) -> None:
    rows = pa.table({f.name: pa.nulls(len(names), f.type) for f in SILVER.schema}, schema=SILVER.schema)
    rows = rows.set_column(rows.schema.get_field_index("trade_id"), "trade_id", pa.array(names))
    rows = rows.set_column(rows.schema.get_field_index("event_time"), "event_time",
                           pa.array([event_time] * len(names), UTC_TIME))
    lake.publish(SILVER, rows, Batch("test", batch))


def test_an_event_day_is_the_utc_day_of_the_event_time():
    times = pa.array([T0.replace(hour=0, minute=0), T0.replace(hour=23, minute=59, second=59),
                      datetime(1969, 12, 31, 23, tzinfo=timezone.utc)], UTC_TIME)
    assert event_days(times).to_pylist() == [DAY0, DAY0, -1]


def test_the_id_index_knows_what_silver_held_and_what_was_added_since(tmp_path):
    ids = TradeIds(Lake(tmp_path))  # no silver yet: nothing known
    assert not ids.known(hashes("a"), days(DAY0)).any()
    ids.add(hashes("a", "b"), days(DAY0, DAY0))
    assert ids.known(hashes("a", "x", "b"), days(DAY0, DAY0, DAY0)).tolist() == [True, False, True]
    _SortedRuns.MERGE_AT, merge_at = 3, _SortedRuns.MERGE_AT
    try:
        ids.add(hashes("c"), days(DAY0))  # merged into the day's main run
    finally:
        _SortedRuns.MERGE_AT = merge_at
    assert ids.known(hashes("c", "a", "y"), days(DAY0, DAY0, DAY0)).tolist() == [True, True, False]


def test_the_id_index_reads_a_day_from_silver_only_when_a_trade_of_that_day_comes(tmp_path):
    lake = Lake(tmp_path)
    silver_with(lake, 0, ["a", "b"], T0)
    silver_with(lake, 1, ["old"], T0 - timedelta(days=20))
    ids = TradeIds(lake)
    assert ids.known(hashes("c", "a", "b"), days(DAY0, DAY0, DAY0)).tolist() == [False, True, True]
    assert (ids.days_read, ids.ids_held) == (1, 2)  # today's ids only: not the lake's
    assert ids.known(hashes("old"), days(DAY0 - 20)).tolist() == [True]  # a duplicate carries its day
    assert (ids.days_read, ids.ids_held) == (2, 3)


def test_the_id_index_holds_the_days_in_play_and_reads_an_old_one_again_when_needed(tmp_path):
    lake = Lake(tmp_path)
    for back in range(6):
        silver_with(lake, back, [f"t{back}"], T0 - timedelta(days=back))
    ids = TradeIds(lake, days_held=3)
    for back in range(6):
        assert ids.known(hashes(f"t{back}"), days(DAY0 - back)).tolist() == [True]
    assert ids.ids_held == 3 and ids.days_read == 6  # memory: three days' ids, whatever the lake's age
    assert ids.known(hashes("t0"), days(DAY0)).tolist() == [True]  # let go, then read again
    assert ids.days_read == 7


def test_a_known_id_with_another_days_event_time_is_found_while_that_day_is_held(tmp_path):
    lake = Lake(tmp_path)
    silver_with(lake, 0, ["c1"], T0)
    ids = TradeIds(lake)
    ids.known(hashes("x"), days(DAY0))  # today is in play
    assert ids.found_on(hashes("c1"), days(DAY0 + 1)).tolist() == [DAY0]  # a conflict, found on its first day


def test_membership_in_a_sorted_run_at_its_edges():
    run = np.array([2, 5, 9], np.uint64)
    assert _in_sorted(run, np.array([1, 2, 9, 10, 5], np.uint64)).tolist() == [False, True, True, False, True]
    assert _in_sorted(run[:0], np.array([1], np.uint64)).tolist() == [False]


def test_the_id_index_reads_each_side_of_midnight_as_its_own_day_also_after_a_compaction(tmp_path):
    lake = Lake(tmp_path)
    midnight = T0.replace(hour=0, minute=0) + timedelta(days=1)
    silver_with(lake, 0, ["eve"], midnight - timedelta(microseconds=1))
    silver_with(lake, 1, ["morn"], midnight)
    lake.open(SILVER).optimize.compact()  # one file holding both days
    ids = TradeIds(lake)
    assert ids.known(hashes("eve", "morn"), days(DAY0, DAY0 + 1)).tolist() == [True, True]
    # Each was read with its own day's ids: asked with the other day, found on its own.
    assert ids.found_on(hashes("eve", "morn"), days(DAY0 + 1, DAY0)).tolist() == [DAY0, DAY0 + 1]
    assert ids.days_read == 2 and ids.ids_held == 2
