"""A MERGE by rewrite (merges.py) against delta-rs's own MERGE: the same batches into two real
Delta tables, one of each kind, leave the same rows, recorded once per batch."""

import dataclasses
import random
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from streaming.lake import files, log_commit, merges
from streaming.lake.log_commit import plain_table
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import GOLD, Write
from streaming.sink.gold_step import gold_rows

START = datetime(2026, 3, 2, 9, tzinfo=timezone.utc)
WINDOW = timedelta(minutes=15)
BY_ENGINE = dataclasses.replace(GOLD, merge_by_rewrite=False)


def sums(windows: dict[int, tuple[float, int]]) -> pa.Table:
    starts = [START + w * WINDOW for w in windows]
    return pa.table({
        "window_start": pa.array(starts, pa.timestamp("us", tz="UTC")),
        "window_end": pa.array([s + WINDOW for s in starts], pa.timestamp("us", tz="UTC")),
        "buy_amount": [amount for amount, _ in windows.values()],
        "sell_amount": [amount / 2 for amount, _ in windows.values()],
        "settlement_amount": [amount * 3 for amount, _ in windows.values()],
        "trade_count": pa.array([count for _, count in windows.values()], pa.int64()),
    })


def gold_of(lake: Lake) -> list[dict]:
    return lake.read(GOLD).sort_by("window_start").to_pylist()


def test_a_gold_table_is_merged_by_rewrite_and_others_by_the_engine():
    assert merges.can_rewrite(GOLD)
    assert not merges.can_rewrite(BY_ENGINE)


def test_adds_and_upserts_by_rewrite_leave_the_rows_the_engines_merge_leaves(tmp_path):
    rng = random.Random(5)
    rewritten, merged = Lake(tmp_path / "rewrite"), Lake(tmp_path / "engine")
    now = datetime(2026, 3, 3, tzinfo=timezone.utc)
    for batch_id in range(60):  # past gold's compaction (every 20 versions), so old and new files mix
        front = batch_id // 4
        windows = {w: (round(rng.uniform(1, 100), 2), rng.randint(1, 9))
                   for w in {front, front + 1, rng.randint(0, front + 1)}}  # and a late window now and then
        write = Write.UPSERT if batch_id % 9 == 8 else Write.ADD
        rows = gold_rows(sums(windows), batch_id, now)
        assert rewritten.publish(GOLD, rows, Batch("app", batch_id), write=write)
        assert merged.publish(BY_ENGINE, rows, Batch("app", batch_id), write=write)
        assert gold_of(rewritten) == gold_of(merged), f"batch {batch_id}"
    rows = gold_of(rewritten)
    assert [r["window_start"] for r in rows] == [START + w * WINDOW for w in range(len(rows))]
    assert max(r["revision"] for r in rows) > 2  # windows were updated again and again


def test_a_batch_merged_by_rewrite_is_recorded_once(tmp_path):
    lake = Lake(tmp_path)
    now = datetime(2026, 3, 3, tzinfo=timezone.utc)
    lake.publish(GOLD, gold_rows(sums({0: (10.0, 1), 1: (5.0, 1)}), 0, now), Batch("app", 0), write=Write.ADD)
    lake.publish(GOLD, gold_rows(sums({1: (2.5, 2), 2: (1.0, 1)}), 1, now), Batch("app", 1), write=Write.ADD)
    assert not lake.publish(GOLD, gold_rows(sums({1: (2.5, 2)}), 1, now), Batch("app", 1), write=Write.ADD)
    assert [(r["buy_amount"], r["trade_count"], r["revision"], r["batch_id"]) for r in gold_of(lake)] == [
        (10.0, 1, 1, 0), (7.5, 3, 2, 1), (1.0, 1, 1, 1)]
    # One live file: each rewrite replaced the file it read, in a commit of its own kind.
    assert len(DeltaTable(lake.location(GOLD)).file_uris()) == 1
    assert DeltaTable(lake.location(GOLD)).history(1)[0]["operation"] != "MERGE"


def test_a_key_range_reads_the_rows_sql_reads(tmp_path):
    lake = Lake(tmp_path)
    now = datetime(2026, 3, 3, tzinfo=timezone.utc)
    for batch_id in range(30):
        lake.publish(GOLD, gold_rows(sums({batch_id: (1.0, 1), batch_id // 2: (2.0, 1)}), batch_id, now),
                     Batch("app", batch_id), write=Write.ADD)
    for low, high in [(3, 7), (0, 0), (29, 29), (31, 40)]:
        expected = lake.read(GOLD, where=f"window_start >= '{(START + low * WINDOW).isoformat()}' AND "
                                         f"window_start <= '{(START + high * WINDOW).isoformat()}'")
        got = lake.key_range(GOLD, START + low * WINDOW, START + high * WINDOW)
        assert got.schema == GOLD.schema
        assert got.sort_by("window_start").equals(expected.sort_by("window_start"))


def test_a_table_whose_files_cannot_be_read_as_plain_parquet_is_merged_by_the_engine(tmp_path, monkeypatch):
    lake = Lake(tmp_path)
    now = datetime(2026, 3, 3, tzinfo=timezone.utc)
    lake.publish(GOLD, gold_rows(sums({0: (10.0, 1)}), 0, now), Batch("app", 0), write=Write.ADD)
    for module in (merges, log_commit):  # as with deletion vectors, in a process that opens gold afresh
        monkeypatch.setattr(module, "live_files", lambda opened, column=None: None)
    monkeypatch.setattr(log_commit, "_writers", {})
    lake.publish(GOLD, gold_rows(sums({0: (1.0, 1), 1: (1.0, 1)}), 1, now), Batch("app", 1), write=Write.ADD)
    assert [(r["buy_amount"], r["revision"]) for r in gold_of(lake)] == [(11.0, 2), (1.0, 1)]
    assert DeltaTable(lake.location(GOLD)).history(1)[0]["operation"] == "MERGE"
    assert lake.key_range(GOLD, START, START + WINDOW).num_rows == 2


@pytest.mark.parametrize("setting", [{"delta.enableChangeDataFeed": "true"}, {"delta.appendOnly": "true"}])
def test_a_gold_table_altered_to_a_feature_a_plain_rewrite_would_miss_is_merged_by_the_engine(tmp_path, setting):
    lake = Lake(tmp_path)
    now = datetime(2026, 3, 3, tzinfo=timezone.utc)
    lake.publish(GOLD, gold_rows(sums({0: (10.0, 1)}), 0, now), Batch("app", 0), write=Write.ADD)
    DeltaTable(lake.location(GOLD)).alter.set_table_properties(setting)
    assert not plain_table(DeltaTable(lake.location(GOLD)), GOLD)
    if "delta.appendOnly" in setting:
        return  # the engine refuses to change a row too: nothing to compare
    lake.publish(GOLD, gold_rows(sums({0: (1.0, 1), 1: (1.0, 1)}), 1, now), Batch("app", 1), write=Write.ADD)
    assert [(r["buy_amount"], r["revision"]) for r in gold_of(lake)] == [(11.0, 2), (1.0, 1)]
    assert DeltaTable(lake.location(GOLD)).history(1)[0]["operation"] == "MERGE"


def test_a_table_outside_the_catalog_takes_the_locks_in_the_order_of_the_catalog_table_at_its_location():
    from streaming.lake import store
    assert store._CATALOG_ORDER[BY_ENGINE.name] == store._CATALOG_ORDER[GOLD.name]


@pytest.mark.parametrize("write", [Write.ADD, Write.UPSERT])
def test_merged_keeps_the_targets_other_rows_and_inserts_new_keys(write):
    now = datetime(2026, 3, 3, tzinfo=timezone.utc)
    target = gold_rows(sums({0: (10.0, 1), 1: (5.0, 2)}), 0, now)
    source = gold_rows(sums({1: (1.0, 1), 2: (7.0, 1)}), 1, now)
    rows = merges.merged(target, source, GOLD, write).to_pylist()
    assert [(r["buy_amount"], r["trade_count"], r["revision"], r["batch_id"]) for r in rows] == [
        (10.0, 1, 1, 0), (6.0 if write is Write.ADD else 1.0, 3 if write is Write.ADD else 1, 2, 1), (7.0, 1, 1, 1)]


def test_the_statistics_slack_lets_a_file_whose_maximum_was_cut_down_be_touched():
    file = files.LiveFile("f", START, START + WINDOW - files.STATS_SLACK)
    assert merges._touched([file], START + WINDOW, START + 2 * WINDOW) == [file]
    assert merges._touched([file], START + 2 * WINDOW, START + 3 * WINDOW) == []
