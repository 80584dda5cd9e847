"""A trade_id's first copy wins for good: a later record with the same id and another event time
is a conflict (quarantined with its reason), a redelivery or the same record read again is not;
and the driver's index of silver's trade ids finds known ids without reading silver."""

from datetime import datetime, timedelta, timezone

import numpy as np
import pyarrow as pa

from streaming.lake.tables import UTC_TIME
from streaming.medallion.silver.guard import conflict_reasons, split_conflicts
from streaming.sink.seen_ids import TradeIds, _in_sorted

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


def test_the_id_index_knows_what_silver_held_and_what_was_added_since(tmp_path):
    from streaming.lake.store import Lake
    from streaming.sink.seen_ids import trade_id_hashes

    ids = TradeIds(Lake(tmp_path))  # no silver yet: nothing known
    hashes = lambda *names: trade_id_hashes(pa.chunked_array([pa.array(names)])).to_numpy()  # noqa: E731
    assert not ids.known(hashes("a")).any()
    ids.add(hashes("a", "b"))
    assert ids.known(hashes("a", "x", "b")).tolist() == [True, False, True]
    ids.MERGE_AT = 3
    ids.add(hashes("c"))  # merged into the main run
    assert ids.known(hashes("c", "a", "y")).tolist() == [True, True, False]


def test_the_id_index_starts_from_every_trade_id_silver_holds(tmp_path):
    from streaming.lake.store import Batch, Lake
    from streaming.lake.tables import SILVER
    from streaming.sink.seen_ids import trade_id_hashes

    lake = Lake(tmp_path)
    for batch, names in enumerate((["a", "b"], ["c"])):
        rows = pa.table({f.name: pa.nulls(len(names), f.type) for f in SILVER.schema}, schema=SILVER.schema)
        rows = rows.set_column(rows.schema.get_field_index("trade_id"), "trade_id", pa.array(names))
        rows = rows.set_column(rows.schema.get_field_index("event_time"), "event_time",
                               pa.array([T0] * len(names), UTC_TIME))
        lake.publish(SILVER, rows, Batch("test", batch))
    hashes = trade_id_hashes(pa.chunked_array([pa.array(["c", "z", "a", "b"])])).to_numpy()
    assert TradeIds(lake).known(hashes).tolist() == [True, False, True, True]


def test_membership_in_a_sorted_run_at_its_edges():
    run = np.array([2, 5, 9], np.uint64)
    assert _in_sorted(run, np.array([1, 2, 9, 10, 5], np.uint64)).tolist() == [False, True, True, False, True]
    assert _in_sorted(run[:0], np.array([1], np.uint64)).tolist() == [False]
