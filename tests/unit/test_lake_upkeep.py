"""Checkpoints, the log's cleanup and compactions done behind the batch (upkeep.py) leave the
tables as the writer's own would: checkpointed, compacted under the table's lock, and readable
through every copy opened before the cleanup."""

import dataclasses
import threading
import time
from pathlib import Path

from deltalake import DeltaTable

from streaming.lake import upkeep
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import BATCH_WATERMARKS
from tests.unit.test_lake_log_commit import ledger_rows


def checkpoints(lake: Lake, table) -> list[int]:
    log_dir = Path(lake.location(table)) / "_delta_log"
    return sorted(int(p.name.split(".")[0]) for p in log_dir.glob("*.checkpoint.parquet"))


def test_a_checkpoint_due_is_written_behind_the_commit_and_delta_rs_reads_the_table_from_it(tmp_path):
    lake = Lake(tmp_path, upkeep_in_background=True)
    lake.ensure(BATCH_WATERMARKS)
    for batch_id in range(25):
        assert lake.publish(BATCH_WATERMARKS, ledger_rows("q", batch_id), Batch("q", batch_id))
    assert upkeep.settle(30)
    assert checkpoints(lake, BATCH_WATERMARKS)[-1] >= 20
    opened = DeltaTable(lake.location(BATCH_WATERMARKS))
    assert sorted(opened.to_pyarrow_table()["batch_id"].to_pylist()) == list(range(25))
    assert opened.transaction_version(Batch("q", 0).app_id(BATCH_WATERMARKS)) == 24


def test_a_compaction_behind_the_batch_folds_the_small_files_and_the_appends_go_on(tmp_path):
    lake = Lake(tmp_path, upkeep_in_background=True)
    lake.ensure(BATCH_WATERMARKS)
    for batch_id in range(20):  # version 20 makes a compaction due
        lake.publish(BATCH_WATERMARKS, ledger_rows("q", batch_id), Batch("q", batch_id))
    assert upkeep.settle(30)
    for batch_id in range(20, 24):
        assert lake.publish(BATCH_WATERMARKS, ledger_rows("q", batch_id), Batch("q", batch_id))
    opened = DeltaTable(lake.location(BATCH_WATERMARKS))
    assert len(opened.file_uris()) == 5  # the compacted file, and the four since
    assert sorted(opened.to_pyarrow_table()["batch_id"].to_pylist()) == list(range(24))
    assert not lake.publish(BATCH_WATERMARKS, ledger_rows("q", 23), Batch("q", 23))  # recorded: skipped


def test_a_compaction_waits_for_the_writer_that_holds_the_table(tmp_path):
    lake = Lake(tmp_path, upkeep_in_background=True)
    lake.ensure(BATCH_WATERMARKS)
    for batch_id in range(19):
        lake.publish(BATCH_WATERMARKS, ledger_rows("q", batch_id), Batch("q", batch_id))
    assert upkeep.settle(30)
    with lake.writing(BATCH_WATERMARKS):
        lake.publish(BATCH_WATERMARKS, ledger_rows("q", 19), Batch("q", 19))  # version 20: a compaction due
        assert not upkeep.settle(1.0)  # it waits for the lock this writer holds
        files_meanwhile = len(DeltaTable(lake.location(BATCH_WATERMARKS)).file_uris())
    assert upkeep.settle(30)
    assert files_meanwhile == 20
    assert len(DeltaTable(lake.location(BATCH_WATERMARKS)).file_uris()) == 1


def test_copies_opened_before_a_cleanup_read_and_write_the_table_after_it(tmp_path):
    brief = dataclasses.replace(BATCH_WATERMARKS, history="interval 1 seconds", compact_every=None)
    lake = Lake(tmp_path, upkeep_in_background=True)
    lake.ensure(brief)
    lake.publish(brief, ledger_rows("q", 0), Batch("q", 0))
    reader = lake.open(brief)  # this thread's copy, opened at the start of the log
    assert reader is not None
    for batch_id in range(1, 45):  # the cleanups after the checkpoints remove what is over a second old
        lake.publish(brief, ledger_rows("q", batch_id), Batch("q", batch_id))
        if batch_id % 5 == 0:
            assert upkeep.settle(30)
            time.sleep(0.6)
    assert upkeep.settle(30)
    assert not (Path(lake.location(brief)) / "_delta_log" / f"{10:020d}.checkpoint.parquet").exists()
    assert len(lake.read(brief, columns=["batch_id"])) == 45  # through this thread's copy, opened afresh
    assert not lake.published(brief, Batch("another", 0))  # an app id the writer has not seen: asked of the log
    assert lake.publish(brief, ledger_rows("another", 0), Batch("another", 0))
    assert len(DeltaTable(lake.location(brief)).to_pyarrow_table()) == 46


def test_a_table_asked_for_again_before_its_turn_is_kept_once(tmp_path, monkeypatch):
    kept: list[str] = []
    gate = threading.Event()

    def keep(location, due):
        gate.wait(30)
        kept.append((location, due.checkpoint, due.compaction))

    monkeypatch.setattr(upkeep, "_keep", keep)
    lake = Lake(tmp_path, upkeep_in_background=True)
    worker = upkeep._Worker()
    first, second = lake.location(BATCH_WATERMARKS), "elsewhere"
    for location, checkpoint in ((first, True), (second, True), (second, False), (second, True)):
        worker.ask(location, upkeep._Due(BATCH_WATERMARKS, threading.RLock(), checkpoint, not checkpoint, False))
    gate.set()
    assert worker.settle(30)
    assert kept == [(first, True, False), (second, True, True)]
