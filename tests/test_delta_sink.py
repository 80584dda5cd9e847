"""delta_sink.publish, the one upsert every table goes through, on small Arrow tables."""

import shutil
from datetime import datetime, timedelta, timezone

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from streaming.delta_sink import key_ranges, open_table, publish

KEYS = ("topic", "partition", "offset")


def records(offsets, value: str) -> pa.Table:
    return pa.table({"topic": ["t"] * len(offsets), "partition": pa.array([0] * len(offsets), pa.int32()),
                     "offset": pa.array(offsets, pa.int64()), "value": [value] * len(offsets)})


def test_the_merge_reads_only_the_source_range_of_integer_keys():
    assert key_ranges(records([7, 3, 9], "a"), KEYS) == [
        't."partition" >= 0 AND t."partition" <= 0', 't."offset" >= 3 AND t."offset" <= 9']


def test_the_merge_reads_only_the_source_range_of_time_keys():
    times = pa.array([datetime(2026, 3, 2, 10, 0, 0, 1, tzinfo=timezone(timedelta(hours=1))),
                      datetime(2026, 3, 2, 9, 30, tzinfo=timezone.utc)], pa.timestamp("us", tz="UTC"))
    assert key_ranges(pa.table({"at": times}), ["at"]) == [
        "t.\"at\" >= '2026-03-02T09:00:00.000001Z'::timestamp AND t.\"at\" <= '2026-03-02T09:30:00.000000Z'::timestamp"]


def trades(ids, minutes, value: str) -> pa.Table:
    start = datetime(2026, 3, 2, 9, tzinfo=timezone.utc)
    times = [start + timedelta(minutes=m, microseconds=1) for m in minutes]
    return pa.table({"trade_id": ids, "event_time": pa.array(times, pa.timestamp("us", tz="UTC")),
                     "value": [value] * len(ids)})


def test_a_redelivery_is_matched_on_its_id_and_time_among_the_files_of_its_time_only(tmp_path):
    path = tmp_path / "silver"
    for version in range(4):  # four files, ten minutes of trades each
        minutes = list(range(version * 10, version * 10 + 10))
        publish(path, trades([f"id{m}" for m in minutes], minutes, "first"), ("trade_id",), "app", version,
                insert_only=True, match_also=("event_time",))
    # Redeliveries at both ends of the source's time range, and one new trade.
    publish(path, trades(["id0", "id39", "new"], [0, 39, 20], "again"), ("trade_id",), "app", 4,
            insert_only=True, match_also=("event_time",))
    rows = DeltaTable(str(path)).to_pandas()
    assert len(rows) == 41 and rows["trade_id"].is_unique
    assert set(rows[rows["value"] == "again"]["trade_id"]) == {"new"}  # the first copies won
    # The same id at another time is not a redelivery but a conflicting record: it is kept too.
    publish(path, trades(["id5"], [25], "conflict"), ("trade_id",), "app", 5, insert_only=True,
            match_also=("event_time",))
    assert DeltaTable(str(path)).to_pandas()["trade_id"].tolist().count("id5") == 2


def test_overlapping_batches_keep_one_row_per_key_across_many_files(tmp_path):
    path = tmp_path / "bronze"
    for version, start in enumerate(range(0, 50, 10)):  # five files: offsets 0-9, 10-19, ...
        assert publish(path, records(list(range(start, start + 10)), "first"), KEYS, "app", version, insert_only=True)
    publish(path, records(list(range(45, 60)), "second"), KEYS, "app", 5, insert_only=True)
    publish(path, records([0, 25, 59], "updated"), KEYS, "app", 6)  # an upsert across old and new files
    rows = DeltaTable(str(path)).to_pandas().sort_values("offset")
    assert rows["offset"].tolist() == list(range(60))
    values = dict(zip(rows["offset"], rows["value"]))
    assert (values[0], values[25], values[59]) == ("updated", "updated", "updated")
    assert (values[45], values[49], values[50]) == ("first", "first", "second")


def test_a_batch_already_committed_is_skipped(tmp_path):
    path = tmp_path / "bronze"
    assert publish(path, records([1, 2], "a"), KEYS, "app", 0, insert_only=True)
    assert publish(path, records([3], "b"), KEYS, "app", 1)
    assert not publish(path, records([1, 2, 3, 4], "again"), KEYS, "app", 1)
    assert sorted(DeltaTable(str(path)).to_pandas()["offset"]) == [1, 2, 3]


def batch_rows(batch_id: int, partitions) -> pa.Table:
    return pa.table({"query_id": ["q"] * len(partitions), "batch_id": pa.array([batch_id] * len(partitions), pa.int64()),
                     "partition": pa.array(partitions, pa.int32())})


def test_rows_keyed_by_their_own_batch_are_appended_once(tmp_path):
    path, keys = tmp_path / "ledger", ("query_id", "batch_id", "partition")
    assert publish(path, batch_rows(0, [0, 1]), keys, "ledger@q", 0, insert_only=True, batch_keyed=True)
    assert publish(path, batch_rows(1, [0, 0, 2]), keys, "ledger@q", 1, insert_only=True, batch_keyed=True)
    assert not publish(path, batch_rows(1, [0, 2]), keys, "ledger@q", 1, insert_only=True, batch_keyed=True)
    rows = DeltaTable(str(path)).to_pandas().sort_values(["batch_id", "partition"])
    assert list(zip(rows["batch_id"], rows["partition"])) == [(0, 0), (0, 1), (1, 0), (1, 2)]


def test_open_table_follows_commits_made_elsewhere_and_a_table_made_anew(tmp_path):
    path = tmp_path / "bronze"
    assert open_table(path) is None
    publish(path, records([1], "a"), KEYS, "app", 0, insert_only=True)
    assert open_table(path).version() == 0
    write_deltalake(str(path), records([2], "b"), mode="append")  # another writer, not through our handle
    assert sorted(open_table(path).to_pandas()["offset"]) == [1, 2]
    shutil.rmtree(path)
    assert open_table(path) is None
    publish(path, records([3], "c"), KEYS, "app", 0, insert_only=True)
    assert open_table(path).to_pandas()["offset"].tolist() == [3]


def test_a_table_written_a_batch_at_a_time_is_compacted_every_so_many_versions(tmp_path):
    path, keys = tmp_path / "ledger", ("query_id", "batch_id", "partition")
    for batch_id in range(25):
        publish(path, batch_rows(batch_id, [0, 1]), keys, "ledger@q", batch_id, insert_only=True, batch_keyed=True,
                compact_every=10)
    table = DeltaTable(str(path))
    assert len(table.file_uris()) <= 10  # one per batch since the last compaction, and the compacted file
    rows = table.to_pandas()
    assert len(rows) == 50 and not rows.duplicated(list(keys)).any()
    assert table.transaction_version("ledger@q") == 24  # a replayed batch is still recognised
    assert not publish(path, batch_rows(24, [0, 1]), keys, "ledger@q", 24, insert_only=True, batch_keyed=True,
                       compact_every=10)
