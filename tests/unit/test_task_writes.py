"""The task side of a micro-batch (pure parts): file statistics, the first-copy check against
silver, partial window sums merged on the driver."""

import json
from datetime import datetime, timedelta, timezone

import pyarrow as pa

from streaming.lake.files import file_stats
from streaming.medallion.gold import merge_window_sums, window_sums
from streaming.medallion.silver.guard import new_to_silver
from streaming.sink.seen_ids import trade_id_hashes
from streaming.sink.task_writes import TaskResults, to_ipc

UTC = pa.timestamp("us", tz="UTC")
AT = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


def test_file_statistics_bound_times_to_the_millisecond_outwards_and_skip_long_strings_and_bytes():
    rows = pa.table({"offset": pa.array([7, 3], pa.int64()),
                     "event_time": pa.array([AT + timedelta(microseconds=1500), AT + timedelta(microseconds=2)], UTC),
                     "topic": ["trades", None], "trade_id": ["x" * 33, "y"], "value": [b"1", b"2"]})
    stats = json.loads(file_stats(rows))
    assert stats["numRecords"] == 2
    assert stats["minValues"] == {"offset": 3, "event_time": "2026-03-02T09:00:00.000Z", "topic": "trades"}
    assert stats["maxValues"] == {"offset": 7, "event_time": "2026-03-02T09:00:00.002Z", "topic": "trades"}
    assert stats["nullCount"]["topic"] == 1 and stats["nullCount"]["value"] == 0


def trades(*rows):
    return pa.table({"trade_id": [r[0] for r in rows], "event_time": pa.array([AT + timedelta(minutes=r[1])
                                                                             for r in rows], UTC)})


def test_a_trade_is_new_to_silver_unless_silver_has_its_id_at_its_event_time():
    new = new_to_silver(trades(("a", 1), ("b", 2), ("c", 3)), trades(("a", 1), ("b", 9)))
    assert new["trade_id"].to_pylist() == ["b", "c"]  # b at another time is a conflicting record: new
    assert new_to_silver(trades(("a", 1)), trades())["trade_id"].to_pylist() == ["a"]


def test_partial_window_sums_of_disjoint_trades_merge_into_the_sums_of_all():
    def sums(*rows):
        return window_sums(pa.table({"trade_id": [r[0] for r in rows], "side": [r[1] for r in rows],
                                     "amount": [r[2] for r in rows],
                                     "event_time": pa.array([AT + timedelta(minutes=r[3]) for r in rows], UTC)}),
                           timedelta(minutes=15))
    everything = [("a", "BUY", 10.0, 1), ("b", "SELL", 4.0, 14), ("c", "BUY", 1.0, 16), ("d", "SELL", 2.0, 31)]
    merged = merge_window_sums([sums(*everything[:2]), sums(*everything[2:3]), sums(), sums(*everything[3:])])
    assert merged.to_pylist() == sums(*everything).to_pylist()


def test_the_driver_sees_when_two_tasks_kept_the_same_trade():
    def result(ids):
        return {"kind": "new_ids", "table": "", "path": None, "size": None, "num_rows": None, "stats": None,
                "payload": to_ipc(pa.table({"hash": trade_id_hashes(pa.chunked_array([pa.array(ids, pa.string())])),
                                            "day": pa.array([20_514] * len(ids), pa.int32())}))}
    assert TaskResults(pa.Table.from_pylist([result(["a", "b"]), result(["c"])])).same_trade_kept_twice() is False
    assert TaskResults(pa.Table.from_pylist([result(["a", "b"]), result(["b"])])).same_trade_kept_twice() is True
