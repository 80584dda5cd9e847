"""Lake.publish, the one write every table goes through, on small Arrow tables and small
catalogs of the tests' own."""

import os
import shutil
import time
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from streaming.lake import tables
from streaming.lake.files import write_file
from streaming.lake.sql import in_time_range, key_ranges
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import Table, Write

KEYS = ("topic", "partition", "offset")
RECORDS = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("value", pa.string())])
BRONZE_LIKE = Table("bronze", RECORDS, KEYS, Write.FIRST_COPY_WINS)
SILVER_LIKE = Table("silver", pa.schema([("trade_id", pa.string()), ("event_time", pa.timestamp("us", tz="UTC")),
                                         ("value", pa.string())]),
                    ("trade_id",), Write.FIRST_COPY_WINS, narrow_on=("event_time",))
LEDGER_SCHEMA = pa.schema([("query_id", pa.string()), ("batch_id", pa.int64()), ("partition", pa.int32())])
LEDGER_LIKE = Table("ledger", LEDGER_SCHEMA, ("query_id", "batch_id", "partition"), Write.APPEND_ONCE_PER_BATCH)


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
        "t.\"at\" >= arrow_cast('2026-03-02T09:00:00.000001Z', 'Timestamp(Microsecond, Some(\"UTC\"))') "
        "AND t.\"at\" <= arrow_cast('2026-03-02T09:30:00.000000Z', 'Timestamp(Microsecond, Some(\"UTC\"))')"]


def trades(ids, minutes, value: str) -> pa.Table:
    start = datetime(2026, 3, 2, 9, tzinfo=timezone.utc)
    times = [start + timedelta(minutes=m, microseconds=1) for m in minutes]
    return pa.table({"trade_id": ids, "event_time": pa.array(times, pa.timestamp("us", tz="UTC")),
                     "value": [value] * len(ids)})


def test_a_redelivery_is_matched_on_its_id_and_time_among_the_files_of_its_time_only(tmp_path):
    lake, path = Lake(tmp_path), str(tmp_path / "silver")
    for version in range(4):  # four files, ten minutes of trades each
        minutes = list(range(version * 10, version * 10 + 10))
        lake.publish(SILVER_LIKE, trades([f"id{m}" for m in minutes], minutes, "first"), Batch("app", version))
    # Redeliveries at both ends of the source's time range, and one new trade.
    lake.publish(SILVER_LIKE, trades(["id0", "id39", "new"], [0, 39, 20], "again"), Batch("app", 4))
    rows = DeltaTable(path).to_pandas()
    assert len(rows) == 41 and rows["trade_id"].is_unique
    assert set(rows[rows["value"] == "again"]["trade_id"]) == {"new"}  # the first copies won
    # The same id at another time is not a redelivery but a conflicting record: it is kept too.
    lake.publish(SILVER_LIKE, trades(["id5"], [25], "conflict"), Batch("app", 5))
    assert DeltaTable(path).to_pandas()["trade_id"].tolist().count("id5") == 2


def test_overlapping_batches_keep_one_row_per_key_across_many_files(tmp_path):
    lake = Lake(tmp_path)
    for version, start in enumerate(range(0, 50, 10)):  # five files: offsets 0-9, 10-19, ...
        assert lake.publish(BRONZE_LIKE, records(list(range(start, start + 10)), "first"), Batch("app", version))
    lake.publish(BRONZE_LIKE, records(list(range(45, 60)), "second"), Batch("app", 5))
    # an upsert across old and new files
    lake.publish(BRONZE_LIKE, records([0, 25, 59], "updated"), Batch("app", 6), write=Write.UPSERT)
    rows = DeltaTable(str(tmp_path / "bronze")).to_pandas().sort_values("offset")
    assert rows["offset"].tolist() == list(range(60))
    values = dict(zip(rows["offset"], rows["value"]))
    assert (values[0], values[25], values[59]) == ("updated", "updated", "updated")
    assert (values[45], values[49], values[50]) == ("first", "first", "second")


def test_a_batch_already_committed_is_skipped(tmp_path):
    lake = Lake(tmp_path)
    assert lake.publish(BRONZE_LIKE, records([1, 2], "a"), Batch("app", 0))
    assert lake.publish(BRONZE_LIKE, records([3], "b"), Batch("app", 1), write=Write.UPSERT)
    assert not lake.publish(BRONZE_LIKE, records([1, 2, 3, 4], "again"), Batch("app", 1), write=Write.UPSERT)
    assert sorted(DeltaTable(str(tmp_path / "bronze")).to_pandas()["offset"]) == [1, 2, 3]


def batch_rows(batch_id: int, partitions) -> pa.Table:
    return pa.table({"query_id": ["q"] * len(partitions), "batch_id": [batch_id] * len(partitions),
                     "partition": partitions}, schema=LEDGER_SCHEMA)


def test_rows_keyed_by_their_own_batch_are_appended_once(tmp_path):
    lake = Lake(tmp_path)
    assert lake.publish(LEDGER_LIKE, batch_rows(0, [0, 1]), Batch("q", 0))
    assert lake.publish(LEDGER_LIKE, batch_rows(1, [0, 0, 2]), Batch("q", 1))
    assert not lake.publish(LEDGER_LIKE, batch_rows(1, [0, 2]), Batch("q", 1))
    rows = DeltaTable(str(tmp_path / "ledger")).to_pandas().sort_values(["batch_id", "partition"])
    assert list(zip(rows["batch_id"], rows["partition"])) == [(0, 0), (0, 1), (1, 0), (1, 2)]


def test_an_open_table_follows_commits_made_elsewhere_and_a_table_made_anew(tmp_path):
    lake, path = Lake(tmp_path), tmp_path / "bronze"
    assert lake.open(BRONZE_LIKE) is None
    lake.publish(BRONZE_LIKE, records([1], "a"), Batch("app", 0))
    assert lake.open(BRONZE_LIKE).version() == 0
    write_deltalake(str(path), records([2], "b"), mode="append")  # another writer, not through our handle
    assert sorted(lake.read(BRONZE_LIKE)["offset"].to_pylist()) == [1, 2]
    shutil.rmtree(path)
    assert lake.open(BRONZE_LIKE) is None
    lake.publish(BRONZE_LIKE, records([3], "c"), Batch("app", 0))
    assert lake.read(BRONZE_LIKE)["offset"].to_pylist() == [3]


def test_a_table_written_a_batch_at_a_time_is_compacted_every_so_many_versions(tmp_path):
    lake, ledger = Lake(tmp_path), Table("ledger", LEDGER_SCHEMA, LEDGER_LIKE.keys, LEDGER_LIKE.write, compact_every=10)
    for batch_id in range(25):
        lake.publish(ledger, batch_rows(batch_id, [0, 1]), Batch("q", batch_id))
    table = DeltaTable(str(tmp_path / "ledger"))
    assert len(table.file_uris()) <= 10  # one per batch since the last compaction, and the compacted file
    rows = table.to_pandas()
    assert len(rows) == 50 and not rows.duplicated(list(ledger.keys)).any()
    assert table.transaction_version("ledger@q") == 24  # a replayed batch is still recognised
    assert not lake.publish(ledger, batch_rows(24, [0, 1]), Batch("q", 24))


def test_a_table_gaining_a_file_per_batch_is_compacted_into_files_of_about_its_target_size(tmp_path):
    lake = Lake(tmp_path)
    silver = Table("silver", SILVER_LIKE.schema, SILVER_LIKE.keys, SILVER_LIKE.write, narrow_on=("event_time",),
                   compact_every=10, compact_to=64 * 1024)
    lake.ensure(silver)
    start = datetime(2026, 3, 2, 9, tzinfo=timezone.utc)
    for batch_id in range(60):  # as the executors write them: a file each, committed by the driver
        times = [start + timedelta(seconds=batch_id, microseconds=999_000 + i) for i in range(200)]
        rows = pa.table({"trade_id": [f"t{batch_id}-{i}" for i in range(200)], "event_time": times,
                         "value": [f"{batch_id:x}{i:x}" * 8 for i in range(200)]}, schema=silver.schema)
        lake.commit_files(silver, [write_file(lake.location(silver), rows)], Batch("q", batch_id))
    table = DeltaTable(lake.location(silver))
    sizes = sorted(table.get_add_actions(flatten=True).column("size_bytes").to_pylist())
    assert len(sizes) < 20 and sizes[-1] < 2 * 64 * 1024, sizes
    rows = lake.read(silver)
    assert rows.num_rows == 60 * 200 and len(set(rows["trade_id"].to_pylist())) == 60 * 200
    # A compacted file's statistics keep times to the millisecond; a read by range still finds
    # the trades in its last millisecond.
    last = start + timedelta(seconds=59, microseconds=999_199)
    found = lake.read(silver, ["trade_id"], in_time_range("event_time", last, last))
    assert found["trade_id"].to_pylist() == ["t59-199"]
    assert table.transaction_version("silver@q") == 59


def test_the_tables_that_gain_a_file_all_day_are_compacted_into_bounded_files():
    for table in tables.ALL:
        assert table.compact_every, table.name
    assert tables.BRONZE.compact_to and tables.SILVER.compact_to


def test_a_table_made_without_its_properties_gains_them_and_keeps_its_rows(tmp_path):
    lake = Lake(tmp_path)
    plain = Table("bronze", RECORDS, KEYS, Write.FIRST_COPY_WINS)
    write_deltalake(str(tmp_path / "bronze"), records([1, 2], "a"))  # as an older version made it
    lake.ensure(plain)
    configuration = DeltaTable(str(tmp_path / "bronze")).metadata().configuration
    assert configuration == {**configuration, "delta.checkpointInterval": "10",
                             "delta.logRetentionDuration": "interval 30 seconds",
                             "delta.deletedFileRetentionDuration": "interval 15 minutes"}
    assert sorted(lake.read(plain)["offset"].to_pylist()) == [1, 2]


def test_the_log_keeps_only_the_tables_history_and_every_batch_is_still_recognised(tmp_path):
    lake = Lake(tmp_path)
    brief = Table("ledger", LEDGER_SCHEMA, LEDGER_LIKE.keys, LEDGER_LIKE.write, history="interval 1 seconds")
    lake.ensure(brief)
    log = tmp_path / "ledger" / "_delta_log"
    for batch_id in range(12):
        lake.publish(brief, batch_rows(batch_id, [0]), Batch("q", batch_id))
    time.sleep(1.5)
    for batch_id in range(12, 24):  # the checkpoint at version 20 clears what is older than a second
        lake.publish(brief, batch_rows(batch_id, [0]), Batch("q", batch_id))
    assert not (log / f"{0:020d}.json").exists()
    assert len(list(log.glob("*.json"))) < 20
    assert len(lake.read(brief)) == 24
    assert not lake.publish(brief, batch_rows(0, [0]), Batch("q", 0))  # the first batch is still known


def test_files_no_version_uses_are_deleted_once_older_than_the_history_and_newer_ones_kept(tmp_path):
    lake = Lake(tmp_path)
    brief = Table("ledger", LEDGER_SCHEMA, LEDGER_LIKE.keys, LEDGER_LIKE.write, compact_every=5,
                  replaced_files_kept="interval 1 seconds")
    lake.ensure(brief)
    location = tmp_path / "ledger"
    crashed = location / "part-00000-written-by-an-attempt-that-crashed.parquet"
    pq.write_table(batch_rows(999, [0]), crashed)
    an_hour_ago = time.time() - 3600
    os.utime(crashed, (an_hour_ago, an_hour_ago))
    batch_id = 0
    while lake.open(brief).version() < 49:
        lake.publish(brief, batch_rows(batch_id, [0]), Batch("q", batch_id))
        batch_id += 1
        if batch_id == 30:
            time.sleep(1.5)  # what the compactions replaced so far leaves the history
    in_flight = location / "part-00000-written-by-a-task-for-the-next-batch.parquet"
    pq.write_table(batch_rows(998, [0]), in_flight)
    while lake.open(brief).version() < 52:  # the compaction at version 50 vacuums
        lake.publish(brief, batch_rows(batch_id, [0]), Batch("q", batch_id))
        batch_id += 1
    on_disk = {p.name for p in location.glob("*.parquet")}
    live = {uri.rsplit("/", 1)[-1] for uri in DeltaTable(str(location)).file_uris()}
    assert live < on_disk and len(on_disk - live) < 25, (len(on_disk), len(live))  # about 30 removed
    assert crashed.name not in on_disk and in_flight.name in on_disk
    assert sorted(lake.read(brief)["batch_id"].to_pylist()) == list(range(batch_id))


def test_rows_keyed_by_another_batch_are_merged_first_copy_wins(tmp_path):
    """A backfill's corrections are keyed by the window's revision, not the backfill's batch."""
    lake = Lake(tmp_path)
    lake.publish(LEDGER_LIKE, batch_rows(3, [0]), Batch("backfill", 100))
    assert lake.publish(LEDGER_LIKE, batch_rows(3, [0, 1]), Batch("backfill", 101))  # a retry, and one more
    rows = DeltaTable(str(tmp_path / "ledger")).to_pandas().sort_values("partition")
    assert rows["partition"].tolist() == [0, 1]


def test_a_read_is_typed_by_the_catalog_and_empty_before_the_table_exists(tmp_path):
    lake = Lake(tmp_path)
    assert lake.read(SILVER_LIKE).schema == SILVER_LIKE.schema and lake.read(SILVER_LIKE).num_rows == 0
    lake.publish(SILVER_LIKE, trades(["a", "b"], [0, 20], "x"), Batch("app", 0))
    found = lake.read(SILVER_LIKE, ["trade_id"], "\"event_time\" > '2026-03-02T09:10:00Z'::timestamp")
    assert found.schema == pa.schema([("trade_id", pa.string())]) and found["trade_id"].to_pylist() == ["b"]


def test_a_scan_gives_every_row_a_batch_at_a_time_typed_by_the_catalog(tmp_path):
    lake = Lake(tmp_path)
    assert list(lake.scan(SILVER_LIKE, ["trade_id"])) == []  # no table yet
    lake.publish(SILVER_LIKE, trades(["a", "b"], [0, 20], "x"), Batch("app", 0))
    lake.publish(SILVER_LIKE, trades(["c"], [40], "y"), Batch("app", 1))
    batches = list(lake.scan(SILVER_LIKE, ["trade_id", "event_time"]))
    assert all(b.schema == pa.schema([SILVER_LIKE.schema.field("trade_id"), SILVER_LIKE.schema.field("event_time")])
               for b in batches)
    assert sorted(pa.Table.from_batches(batches)["trade_id"].to_pylist()) == ["a", "b", "c"]


def test_an_earlier_version_reads_as_it_stood_and_the_history_lists_the_commits(tmp_path):
    lake = Lake(tmp_path)
    lake.publish(BRONZE_LIKE, records([1], "a"), Batch("app", 0))
    lake.publish(BRONZE_LIKE, records([1], "b"), Batch("app", 1), write=Write.UPSERT)
    assert lake.read(BRONZE_LIKE, ["value"], version=0)["value"].to_pylist() == ["a"]
    assert lake.read(BRONZE_LIKE, ["value"])["value"].to_pylist() == ["b"]
    assert [commit["version"] for commit in lake.history(BRONZE_LIKE)] == [1, 0]
    assert lake.read(BRONZE_LIKE, version=7).num_rows == 0 and lake.open_version(BRONZE_LIKE, 7) is None


TOTALS_LIKE = Table("totals", pa.schema([("window", pa.int64()), ("amount", pa.float64()), ("count", pa.int64()),
                                         ("revision", pa.int64()), ("batch", pa.int64())]),
                    ("window",), Write.UPSERT, bump=("revision",), sums=("amount", "count"))


def totals(batch: int, **windows) -> pa.Table:
    return pa.table({"window": pa.array([int(w[1:]) for w in windows], pa.int64()),
                     "amount": pa.array([a for a, _ in windows.values()], pa.float64()),
                     "count": pa.array([c for _, c in windows.values()], pa.int64()),
                     "revision": pa.array([1] * len(windows), pa.int64()), "batch": [batch] * len(windows)})


def test_an_add_sums_into_running_totals_once_per_batch_and_an_upsert_sets_them(tmp_path):
    lake = Lake(tmp_path)
    lake.publish(TOTALS_LIKE, totals(0, w1=(10.0, 1), w2=(5.0, 1)), Batch("app", 0), write=Write.ADD)
    lake.publish(TOTALS_LIKE, totals(1, w2=(2.5, 2), w3=(1.0, 1)), Batch("app", 1), write=Write.ADD)
    assert not lake.publish(TOTALS_LIKE, totals(1, w2=(2.5, 2)), Batch("app", 1), write=Write.ADD)  # run again
    rows = {r["window"]: r for r in DeltaTable(str(tmp_path / "totals")).to_pyarrow_table().to_pylist()}
    assert {w: (r["amount"], r["count"], r["revision"], r["batch"]) for w, r in rows.items()} == {
        1: (10.0, 1, 1, 0), 2: (7.5, 3, 2, 1), 3: (1.0, 1, 1, 1)}
    lake.publish(TOTALS_LIKE, totals(2, w2=(4.0, 1)), Batch("app", 2))  # the table's own policy: set
    rows = {r["window"]: r for r in DeltaTable(str(tmp_path / "totals")).to_pyarrow_table().to_pylist()}
    assert (rows[2]["amount"], rows[2]["count"], rows[2]["revision"]) == (4.0, 1, 3)
