"""A crash between a batch's writes and Spark's commit: on restart Spark runs the batch again on
the same offsets, and every table must already hold it once (the lake's per-batch transactions)."""

from pathlib import Path

import pandas as pd
import pytest

from dashboard.data import exactly_once_evidence
from streaming.jobs.pipeline import MEDALLION_QUERY
from streaming.lake.store import Lake
from streaming.lake.tables import (
    BATCH_WATERMARKS,
    BRONZE,
    CORRECTIONS,
    GOLD,
    LATE_TRADES,
    QUARANTINE,
    SILVER,
    SUMMARY_HISTORY,
)
from streaming.sink.gold_step import GoldStep
from tests.support.corpus import DAY, trade

TABLES = (BRONZE, SILVER, QUARANTINE, GOLD, BATCH_WATERMARKS, CORRECTIONS, LATE_TRADES)


def test_a_batch_replayed_after_a_crash_adds_nothing_twice(stream):
    # First batch: three windows; event time reaches 09:40, so the watermark becomes 09:10.
    stream.add(trade("t1", "BUY", 2, 50.0, DAY + "09:01:00Z"), trade("t2", "SELL", 1, 30.0, DAY + "09:16:00Z"),
               trade("t3", "BUY", 1, 10.0, DAY + "09:40:00Z"), b"{not json")
    stream.process()
    # The last batch writes to every table: a late trade that corrects the past 09:15 window, a
    # too-late one, a redelivery and a bad record.
    stream.add(trade("t4", "SELL", 3, 5.0, DAY + "09:20:00Z"), trade("t5", "BUY", 1, 1.0, DAY + "09:05:00Z"),
               trade("t1", "BUY", 2, 50.0, DAY + "09:01:00Z"), b"[1, 2]")
    stream.process()
    expected = {"09:00": (100.0, 0.0, 1), "09:15": (0.0, 45.0, 2), "09:30": (10.0, 0.0, 1)}
    stream.check_gold(expected)
    stream.check_table(BRONZE, rows=8)
    stream.check_table(SILVER, trade_id=["t1", "t2", "t3", "t4", "t5"])
    stream.check_table(LATE_TRADES, trade_id=["t5"])
    before = {table: sorted_by_keys(stream.check_table(table), table) for table in TABLES}

    forgotten = stream.restart(forget_last_commit=True)
    stream.process()

    # Spark did run the forgotten batch again, with its input...
    assert set(forgotten) == {MEDALLION_QUERY}
    (query,) = stream.pipeline.queries
    assert any(p["batchId"] == forgotten[query.name] and p["numInputRows"] > 0 for p in query.recentProgress)
    # ...the batch it ran again is the one that wrote the correction and a ledger row...
    assert list(before[CORRECTIONS]["batch_id"]) == [forgotten[MEDALLION_QUERY]]
    assert forgotten[MEDALLION_QUERY] in set(before[BATCH_WATERMARKS]["batch_id"])
    # ...and no table changed: nothing added twice, no window revised again.
    stream.check_gold(expected)
    for table, rows in before.items():
        pd.testing.assert_frame_equal(sorted_by_keys(stream.check_table(table, rows=len(rows)), table), rows,
                                      obj=table.name)


def test_a_crash_after_silver_before_gold_is_completed_on_restart_and_counts_nothing_twice(stream, monkeypatch):
    stream.add(trade("t1", "BUY", 2, 50.0, DAY + "09:01:00Z"), trade("t2", "SELL", 1, 30.0, DAY + "09:16:00Z"),
               trade("t3", "BUY", 1, 10.0, DAY + "09:40:00Z"))
    stream.process()
    # The next batch dies once bronze, silver and quarantine hold it, before gold is touched.
    monkeypatch.setattr(GoldStep, "update_gold", killed_between_silver_and_gold)
    stream.add(trade("t4", "SELL", 3, 5.0, DAY + "09:20:00Z"), trade("t5", "BUY", 1, 1.0, DAY + "09:05:00Z"),
               trade("t1", "BUY", 2, 50.0, DAY + "09:01:00Z"), b"[1, 2]")
    with pytest.raises(Exception, match="killed between silver and gold"):
        stream.process()
    stream.check_table(SILVER, trade_id=["t1", "t2", "t3", "t4", "t5"])
    stream.check_gold({"09:00": (100.0, 0.0, 1), "09:15": (0.0, 30.0, 1), "09:30": (10.0, 0.0, 1)})

    monkeypatch.undo()
    stream.restart()
    stream.process()
    # Spark ran the batch again; its trades were in silver already, so their windows were
    # recounted from silver rather than added to: each counted once, the too-late one left out.
    stream.check_gold({"09:00": (100.0, 0.0, 1), "09:15": (0.0, 45.0, 2), "09:30": (10.0, 0.0, 1)})
    stream.check_table(LATE_TRADES, trade_id=["t5"])
    corrected = stream.check_table(CORRECTIONS, rows=1).iloc[0]
    assert (corrected.sell_amount_before, corrected.sell_amount_after, corrected.late_trades) == (30.0, 45.0, 1)
    stream.check_table(BRONZE, rows=7)
    # The page's exactly-once panel sees the same: no offset twice, gold = silver's on-time trades.
    evidence = exactly_once_evidence(Lake(stream.settings.data_dir), {})
    assert sum(p["bronze"] for p in evidence["partitions"]) == 7
    assert all(p["bronze_doubled"] == 0 for p in evidence["partitions"])
    assert sum(p["redeliveries"] for p in evidence["partitions"]) == 1  # t1 again
    assert (evidence["gold_trades"], evidence["silver_on_time"], evidence["silver_doubled"]) == (4, 4, 0)


def test_a_crash_after_gold_before_its_corrections_and_history_records_them_on_restart(stream, monkeypatch):
    stream.add(trade("t1", "BUY", 2, 50.0, DAY + "09:01:00Z"), trade("t2", "SELL", 1, 30.0, DAY + "09:16:00Z"),
               trade("t3", "BUY", 1, 10.0, DAY + "09:40:00Z"))
    stream.process()
    # The next batch's gold commit lands; its correction and history, committed beside it, do not.
    published = Lake.publish

    def killed_beside_gold(lake, table, rows, batch, **kwargs):
        if table in (CORRECTIONS, SUMMARY_HISTORY):
            raise RuntimeError("killed beside gold")
        return published(lake, table, rows, batch, **kwargs)

    monkeypatch.setattr(Lake, "publish", killed_beside_gold)
    stream.add(trade("t4", "SELL", 3, 5.0, DAY + "09:20:00Z"))
    with pytest.raises(Exception, match="killed beside gold"):
        stream.process()
    expected = {"09:00": (100.0, 0.0, 1), "09:15": (0.0, 45.0, 2), "09:30": (10.0, 0.0, 1)}
    stream.check_gold(expected)
    stream.check_table(CORRECTIONS, rows=0)
    stream.check_table(SUMMARY_HISTORY, rows=3)  # the first batch's windows only

    monkeypatch.undo()
    stream.restart()
    stream.process()
    # The batch ran again and found itself in gold: its correction and change are made from gold
    # as it stood before it, not from gold as it is (which would show no change at all).
    stream.check_gold(expected)
    corrected = stream.check_table(CORRECTIONS, rows=1).iloc[0]
    assert (corrected.sell_amount_before, corrected.sell_amount_after, corrected.late_trades) == (30.0, 45.0, 1)
    changes = stream.check_table(SUMMARY_HISTORY, rows=4)
    assert sorted(changes[changes["window_start"] == pd.Timestamp(DAY + "09:15:00Z")]["sell_amount"]) == [30.0, 45.0]


@pytest.mark.parametrize("lost", [(BRONZE, SILVER, QUARANTINE), (SILVER,)], ids=["no_files", "bronze_only"])
def test_a_crash_after_gold_before_silver_and_history_records_everything_once_on_restart(stream, monkeypatch, lost):
    stream.add(trade("t1", "BUY", 2, 50.0, DAY + "09:01:00Z"), trade("t2", "SELL", 1, 30.0, DAY + "09:16:00Z"),
               trade("t3", "BUY", 1, 10.0, DAY + "09:40:00Z"))
    stream.process()
    ledger_rows = len(stream.check_table(BATCH_WATERMARKS))
    # The next batch's gold and its correction land; `lost` files and gold's history, committed
    # beside them, do not, nor the ledger, which waits for the files, nor the too-late trade,
    # which waits for silver.
    committed, published = Lake.commit_files, Lake.publish

    def killed_at_the_files(lake, table, files, batch):
        if table in lost:
            raise RuntimeError("killed beside gold")
        return committed(lake, table, files, batch)

    def killed_at_the_history(lake, table, rows, batch, **kwargs):
        if table is SUMMARY_HISTORY:
            raise RuntimeError("killed beside gold")
        return published(lake, table, rows, batch, **kwargs)

    monkeypatch.setattr(Lake, "commit_files", killed_at_the_files)
    monkeypatch.setattr(Lake, "publish", killed_at_the_history)
    stream.add(trade("t4", "SELL", 3, 5.0, DAY + "09:20:00Z"), trade("t5", "BUY", 1, 1.0, DAY + "09:05:00Z"),
               b"[1, 2]")
    with pytest.raises(Exception, match="killed beside gold"):
        stream.process()
    expected = {"09:00": (100.0, 0.0, 1), "09:15": (0.0, 45.0, 2), "09:30": (10.0, 0.0, 1)}
    stream.check_gold(expected)
    stream.check_table(CORRECTIONS, rows=1)
    stream.check_table(SILVER, trade_id=["t1", "t2", "t3"])
    stream.check_table(LATE_TRADES, rows=0)  # the too-late trade waits for silver
    stream.check_table(SUMMARY_HISTORY, rows=3)
    stream.check_table(BATCH_WATERMARKS, rows=ledger_rows)

    monkeypatch.undo()
    stream.restart()
    stream.process()
    # The batch ran again and found itself in gold: nothing is added twice, and its change is
    # made from gold as it stood before it, not from gold as it is (no change at all).
    stream.check_gold(expected)
    stream.check_table(SILVER, trade_id=["t1", "t2", "t3", "t4", "t5"])
    stream.check_table(LATE_TRADES, trade_id=["t5"])
    stream.check_table(BRONZE, rows=6)
    stream.check_table(QUARANTINE, rows=1)
    corrected = stream.check_table(CORRECTIONS, rows=1).iloc[0]
    assert (corrected.sell_amount_before, corrected.sell_amount_after, corrected.late_trades) == (30.0, 45.0, 1)
    changes = stream.check_table(SUMMARY_HISTORY, rows=4)
    assert sorted(changes[changes["window_start"] == pd.Timestamp(DAY + "09:15:00Z")]["sell_amount"]) == [30.0, 45.0]
    assert len(stream.check_table(BATCH_WATERMARKS)) > ledger_rows


def test_a_crash_after_silver_before_the_too_late_trades_records_them_once_on_restart(stream, monkeypatch):
    stream.add(trade("t1", "BUY", 2, 50.0, DAY + "09:01:00Z"), trade("t2", "SELL", 1, 30.0, DAY + "09:16:00Z"),
               trade("t3", "BUY", 1, 10.0, DAY + "09:40:00Z"))
    stream.process()
    # The too-late trades are appended once silver holds them; this time their commit dies.
    committed = Lake.commit_files

    def killed_at_the_late_trades(lake, table, files, batch):
        if table is LATE_TRADES:
            raise RuntimeError("killed at the too-late trades")
        return committed(lake, table, files, batch)

    monkeypatch.setattr(Lake, "commit_files", killed_at_the_late_trades)
    stream.add(trade("t4", "SELL", 3, 5.0, DAY + "09:20:00Z"), trade("t5", "BUY", 1, 1.0, DAY + "09:05:00Z"))
    with pytest.raises(Exception, match="killed at the too-late trades"):
        stream.process()
    stream.check_table(SILVER, trade_id=["t1", "t2", "t3", "t4", "t5"])
    stream.check_table(LATE_TRADES, rows=0)

    monkeypatch.undo()
    stream.restart()
    stream.process()
    stream.add(trade("t6", "SELL", 1, 2.0, DAY + "09:04:00Z"))  # too late as well, in a batch of its own
    stream.process()
    stream.check_table(LATE_TRADES, trade_id=["t5", "t6"])
    stream.check_gold({"09:00": (100.0, 0.0, 1), "09:15": (0.0, 45.0, 2), "09:30": (10.0, 0.0, 1)})


def test_a_crash_between_the_file_writes_and_the_commit_shows_no_row_and_loses_nothing(stream, monkeypatch):
    stream.add(trade("t1", "BUY", 2, 50.0, DAY + "09:01:00Z"), trade("t2", "SELL", 1, 30.0, DAY + "09:16:00Z"),
               trade("t3", "BUY", 1, 10.0, DAY + "09:40:00Z"))
    stream.process()
    bronze_dir = Path(Lake(stream.settings.data_dir).location(BRONZE))
    committed = Lake.commit_files
    files_before = set(bronze_dir.glob("day=*/*.parquet"))  # in its days' directories
    # The tasks write the next batch's files; the driver dies before it commits any of them.
    monkeypatch.setattr(Lake, "commit_files", killed_before_the_commit)
    stream.add(trade("t4", "SELL", 3, 5.0, DAY + "09:20:00Z"), trade("t5", "BUY", 1, 1.0, DAY + "09:05:00Z"),
               trade("t6", "BUY", 1, 10.0, DAY + "09:31:00Z"), b"[1, 2]")
    with pytest.raises(Exception, match="killed before the commit"):
        stream.process()
    assert set(bronze_dir.glob("day=*/*.parquet")) > files_before  # written, but not part of the table
    stream.check_table(BRONZE, rows=3)
    stream.check_table(SILVER, trade_id=["t1", "t2", "t3"])
    stream.check_table(QUARANTINE, rows=0)

    monkeypatch.setattr(Lake, "commit_files", committed)
    stream.restart()
    stream.process()
    stream.check_gold({"09:00": (100.0, 0.0, 1), "09:15": (0.0, 45.0, 2), "09:30": (20.0, 0.0, 2)})
    stream.check_table(BRONZE, rows=7)
    stream.check_table(SILVER, trade_id=["t1", "t2", "t3", "t4", "t5", "t6"])
    stream.check_table(QUARANTINE, rows=1)
    stream.check_table(LATE_TRADES, trade_id=["t5"])


def killed_before_the_commit(*args, **kwargs):
    raise RuntimeError("killed before the commit")


def killed_between_silver_and_gold(*args, **kwargs):
    raise RuntimeError("killed between silver and gold")


def sorted_by_keys(frame: pd.DataFrame, table) -> pd.DataFrame:
    return frame.sort_values(list(table.keys)).reset_index(drop=True)
