"""A local table's appends written as its log's next JSON commit (log_commit.py) are the table
delta-rs reads, record their batches as delta-rs's commits do, checkpoint when delta-rs would,
and give way to delta-rs for whatever they do not write."""

import collections
import dataclasses
import json
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from streaming.lake import log_commit, open_tables
from streaming.lake.log_commit import ENGINE, ConcurrentRewrite, LogWriter, writable
from streaming.lake.log_tail import commit_file
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import BATCH_WATERMARKS, GOLD, SUMMARY_HISTORY, UTC_TIME, Table, Write
from streaming.sink.gold_step import gold_rows

START = datetime(2026, 3, 2, 9, tzinfo=timezone.utc)
WINDOW = timedelta(minutes=15)


def ledger_rows(writer: str, batch_id: int) -> pa.Table:
    at = START + timedelta(seconds=batch_id)
    return pa.Table.from_pylist([{"query_id": writer, "batch_id": batch_id, "topic": "trades", "partition": 0,
                                  "start_offset": batch_id, "end_offset": batch_id + 1, "watermark": at,
                                  "records_lost": 0, "front": at, "closed_to": None}],
                                schema=BATCH_WATERMARKS.schema)


def engine_of(lake: Lake, table: Table, version: int) -> str | None:
    """Who wrote the version's commit, as its commitInfo says."""
    for line in commit_file(lake.location(table), version).read_text().splitlines():
        action = json.loads(line)
        if "commitInfo" in action:
            return action["commitInfo"].get("engineInfo")
    return None


def latest(lake: Lake, table: Table) -> DeltaTable:
    return DeltaTable(lake.location(table))


def test_appends_written_to_the_log_are_the_rows_and_batches_delta_rs_reads(tmp_path):
    lake = Lake(tmp_path)
    lake.ensure(BATCH_WATERMARKS)
    for batch_id in range(5):
        assert lake.publish(BATCH_WATERMARKS, ledger_rows("q", batch_id), Batch("q", batch_id))
    opened = latest(lake, BATCH_WATERMARKS)
    assert opened.version() == 5
    assert [engine_of(lake, BATCH_WATERMARKS, v) for v in range(1, 6)] == [ENGINE] * 5
    assert sorted(opened.to_pyarrow_table()["batch_id"].to_pylist()) == [0, 1, 2, 3, 4]
    assert opened.transaction_version(Batch("q", 0).app_id(BATCH_WATERMARKS)) == 4
    assert not lake.publish(BATCH_WATERMARKS, ledger_rows("q", 3), Batch("q", 3))  # recorded: skipped
    assert latest(lake, BATCH_WATERMARKS).version() == 5


def history_rows(batch_id: int, starts: list[datetime]) -> pa.Table:
    return pa.Table.from_pylist([{"window_start": start, "window_end": start + timedelta(minutes=15),
                                  "buy_amount": 1.0, "sell_amount": 0.0, "settlement_amount": 1.0, "trade_count": 1,
                                  "changed_at": START, "cause": "trades", "batch_id": batch_id, "query_id": "q"}
                                 for start in starts], schema=SUMMARY_HISTORY.schema)


def test_a_partitioned_tables_rows_land_in_their_days_files(tmp_path):
    lake = Lake(tmp_path)
    lake.ensure(SUMMARY_HISTORY)
    days = [START - timedelta(days=1), START]
    assert lake.publish(SUMMARY_HISTORY, history_rows(0, days), Batch("q", 0))
    assert engine_of(lake, SUMMARY_HISTORY, 1) == ENGINE
    opened = latest(lake, SUMMARY_HISTORY)
    assert sorted(opened.to_pyarrow_table()["window_start"].to_pylist()) == days
    assert sorted(uri.rsplit("/", 2)[-2] for uri in opened.file_uris()) == ["day=2026-03-01", "day=2026-03-02"]
    one_day = opened.to_pyarrow_table(partitions=[("day", "=", "2026-03-02")])
    assert one_day["window_start"].to_pylist() == [START]


def test_a_checkpoint_is_made_at_the_versions_delta_rs_would_make_one(tmp_path):
    lake = Lake(tmp_path)
    lake.ensure(BATCH_WATERMARKS)
    for batch_id in range(12):
        lake.publish(BATCH_WATERMARKS, ledger_rows("q", batch_id), Batch("q", batch_id))
    last = json.loads((tmp_path / BATCH_WATERMARKS.name / "_delta_log" / "_last_checkpoint").read_text())
    assert last["version"] == 10
    # Read from the checkpoint on: what it holds and the commits after it are the table.
    opened = latest(lake, BATCH_WATERMARKS)
    assert opened.to_pyarrow_table().num_rows == 12
    assert opened.transaction_version(Batch("q", 0).app_id(BATCH_WATERMARKS)) == 11


def test_another_writers_commits_are_read_before_the_next_append(tmp_path):
    lake = Lake(tmp_path)
    lake.ensure(BATCH_WATERMARKS)
    lake.publish(BATCH_WATERMARKS, ledger_rows("q", 0), Batch("q", 0))
    location = lake.location(BATCH_WATERMARKS)
    # Another process records batch 1 of "q", and a batch of its own, through delta-rs.
    from deltalake import CommitProperties, Transaction
    for writer, batch_id in (("q", 1), ("other", 7)):
        write_deltalake(location, ledger_rows(writer, batch_id), mode="append", commit_properties=CommitProperties(
            app_transactions=[Transaction(app_id=Batch(writer, batch_id).app_id(BATCH_WATERMARKS), version=batch_id)]))
    assert not lake.publish(BATCH_WATERMARKS, ledger_rows("q", 1), Batch("q", 1))
    assert lake.publish(BATCH_WATERMARKS, ledger_rows("q", 2), Batch("q", 2))
    opened = latest(lake, BATCH_WATERMARKS)
    assert opened.version() == 4 and engine_of(lake, BATCH_WATERMARKS, 4) == ENGINE
    assert sorted(opened.to_pyarrow_table()["batch_id"].to_pylist()) == [0, 1, 2, 7]


def test_a_writer_that_loses_the_race_for_a_version_takes_the_next_unless_its_batch_is_in(tmp_path):
    lake = Lake(tmp_path)
    lake.ensure(BATCH_WATERMARKS)
    location = lake.location(BATCH_WATERMARKS)
    first = LogWriter(BATCH_WATERMARKS, location, latest(lake, BATCH_WATERMARKS))
    second = LogWriter(BATCH_WATERMARKS, location, latest(lake, BATCH_WATERMARKS))
    looks = []

    def stale_once() -> bool:  # the second looks before the first commits, links after
        looks.append(1)
        return True if len(looks) == 1 else LogWriter.caught_up(second)

    second.caught_up = stale_once  # type: ignore[method-assign]
    app_id = Batch("q", 0).app_id(BATCH_WATERMARKS)
    assert first.commit(lake.write_files(BATCH_WATERMARKS, ledger_rows("q", 0)), app_id, 0)
    assert second.commit(lake.write_files(BATCH_WATERMARKS, ledger_rows("q", 1)), app_id, 1)
    assert (first.version, second.version) == (1, 2)
    looks.clear()
    assert first.commit(lake.write_files(BATCH_WATERMARKS, ledger_rows("q", 2)), app_id, 2)
    assert second.commit(lake.write_files(BATCH_WATERMARKS, ledger_rows("q", 2)), app_id, 2) is False
    opened = latest(lake, BATCH_WATERMARKS)
    assert opened.version() == 3
    assert sorted(opened.to_pyarrow_table()["batch_id"].to_pylist()) == [0, 1, 2]
    assert not list((tmp_path / BATCH_WATERMARKS.name / "_delta_log").glob("_commit_*"))  # no leftovers


def test_a_metadata_change_by_another_writer_hands_the_table_back_to_delta_rs_then_the_log_again(tmp_path):
    lake = Lake(tmp_path)
    lake.ensure(BATCH_WATERMARKS)
    lake.publish(BATCH_WATERMARKS, ledger_rows("q", 0), Batch("q", 0))
    latest(lake, BATCH_WATERMARKS).alter.set_table_properties({"delta.checkpointInterval": "5"})
    lake.publish(BATCH_WATERMARKS, ledger_rows("q", 1), Batch("q", 1))
    lake.publish(BATCH_WATERMARKS, ledger_rows("q", 2), Batch("q", 2))
    lake.publish(BATCH_WATERMARKS, ledger_rows("q", 3), Batch("q", 3))
    assert [engine_of(lake, BATCH_WATERMARKS, v) for v in (3, 4, 5)] == [ENGINE] * 3
    last = json.loads((tmp_path / BATCH_WATERMARKS.name / "_delta_log" / "_last_checkpoint").read_text())
    assert last["version"] == 5  # the new interval
    assert latest(lake, BATCH_WATERMARKS).to_pyarrow_table().num_rows == 4


def test_a_table_with_features_the_writer_does_not_know_is_written_by_delta_rs(tmp_path):
    location = str(tmp_path / "cdf")
    DeltaTable.create(location, BATCH_WATERMARKS.schema, configuration={"delta.enableChangeDataFeed": "true"})
    assert not writable(DeltaTable(location))
    assert LogWriter.of(BATCH_WATERMARKS, location, DeltaTable(location)) is None
    plain = str(tmp_path / "plain")
    DeltaTable.create(plain, BATCH_WATERMARKS.schema)
    assert writable(DeltaTable(plain))


def gold_sums(batch_id: int, windows: dict[int, float]) -> pa.Table:
    starts = [START + n * WINDOW for n in windows]
    return gold_rows(pa.table({"window_start": pa.array(starts, UTC_TIME),
                               "window_end": pa.array([start + WINDOW for start in starts], UTC_TIME),
                               "buy_amount": list(windows.values()), "sell_amount": [0.0] * len(windows),
                               "settlement_amount": list(windows.values()), "trade_count": [1] * len(windows)}),
                     batch_id, START)


def test_gold_rewritten_through_the_log_replaces_its_files_and_holds_the_sums(tmp_path):
    lake = Lake(tmp_path)
    for batch_id, windows in enumerate([{0: 1.0}, {0: 2.0, 1: 5.0}, {1: 1.0, 2: 3.0}]):
        lake.publish(GOLD, gold_sums(batch_id, windows), Batch("q", batch_id), write=Write.ADD)
    opened = latest(lake, GOLD)
    assert [engine_of(lake, GOLD, v) for v in (1, 2)] == [ENGINE] * 2  # the first made the table
    assert len(opened.file_uris()) == 1  # each rewrite replaced the file it read
    rows = opened.to_pyarrow_table().sort_by("window_start")
    assert rows["buy_amount"].to_pylist() == [3.0, 6.0, 3.0]
    assert rows["revision"].to_pylist() == [2, 2, 1]
    assert lake.key_range(GOLD, START, START + 2 * WINDOW)["buy_amount"].to_pylist() == [3.0, 6.0, 3.0]


def test_a_rewrite_whose_table_changed_since_it_read_it_fails_and_commits_nothing(tmp_path):
    lake = Lake(tmp_path)
    lake.publish(GOLD, gold_sums(0, {0: 1.0}), Batch("q", 0), write=Write.ADD)
    location = lake.location(GOLD)
    writer = LogWriter.of(GOLD, location, latest(lake, GOLD), track="window_start")
    assert writer is not None and writer.files is not None
    read_at, replaced = writer.version, list(writer.files.values())
    lake.publish(GOLD, gold_sums(1, {0: 1.0}), Batch("q", 1), write=Write.ADD)  # another writer, meanwhile
    written = lake.write_files(GOLD, gold_sums(2, {0: 9.0}))
    with pytest.raises(ConcurrentRewrite):
        writer.commit(written, Batch("q", 2).app_id(GOLD), 2, replaced, read_at)
    assert latest(lake, GOLD).to_pyarrow_table()["buy_amount"].to_pylist() == [2.0]


def test_a_compaction_long_after_the_writers_opened_the_table_reads_no_log_file_the_cleanup_removed(tmp_path,
                                                                                                monkeypatch):
    brief = dataclasses.replace(BATCH_WATERMARKS, history="interval 1 seconds", compact_every=20)
    lake = Lake(tmp_path)
    lake.ensure(brief)
    for batch_id in range(12):
        lake.publish(brief, ledger_rows("q", batch_id), Batch("q", batch_id))
    monkeypatch.setattr(log_commit, "_writers", {})  # a new process: it opens the table at checkpoint 10
    monkeypatch.setattr(open_tables, "_writers_tables", collections.OrderedDict())
    for batch_id in range(12, 45):  # the checkpoints at 20, 30 and 40 remove what is over a second old
        lake.publish(brief, ledger_rows("q", batch_id), Batch("q", batch_id))
        if batch_id % 5 == 0:
            time.sleep(0.6)
    assert not (Path(lake.location(brief)) / "_delta_log" / f"{10:020d}.checkpoint.parquet").exists()
    assert len(latest(lake, brief).to_pyarrow_table()) == 45


def test_a_file_system_without_hard_links_is_committed_to_by_delta_rs(tmp_path, monkeypatch):
    lake = Lake(tmp_path)
    lake.ensure(BATCH_WATERMARKS)

    def refuse(source, target):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(log_commit.os, "link", refuse)
    monkeypatch.setattr(log_commit, "_without_links", set())
    for batch_id in range(3):
        assert lake.publish(BATCH_WATERMARKS, ledger_rows("q", batch_id), Batch("q", batch_id))
    assert all(engine_of(lake, BATCH_WATERMARKS, v) != ENGINE for v in (1, 2, 3))  # delta-rs's
    assert sorted(latest(lake, BATCH_WATERMARKS).to_pyarrow_table()["batch_id"].to_pylist()) == [0, 1, 2]
    assert not list((Path(lake.location(BATCH_WATERMARKS)) / "_delta_log").glob("_commit_*"))
