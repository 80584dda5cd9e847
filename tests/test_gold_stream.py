"""The gold query end to end: real broker, real Spark, real Delta, in the seeds' iteration style.

Each iteration produces trades, waits until the query has processed everything, then checks
gold/trade_summary exactly. Window 15 minutes, watermark 30 minutes.
"""

import pytest
from deltalake import DeltaTable

from streaming.config import Settings
from streaming.lake.tables import BATCH_WATERMARKS, CORRECTIONS, GOLD, LATE_TRADES, SILVER
from streaming.lateness import too_late_trades
from streaming.pipeline import Pipeline
from tests.conftest import process, trade

DAY = "2026-03-02T"


def table(settings, name):
    return DeltaTable(str((settings.data_dir / name))).to_pandas()


def gold_rows(settings):
    frame = DeltaTable(str((settings.data_dir / GOLD.name))).to_pandas()
    return {row.window_start.strftime("%H:%M"): (round(row.buy_amount, 2), round(row.sell_amount, 2),
                                                 round(row.settlement_amount, 2), row.trade_count)
            for row in frame.itertuples()}


@pytest.fixture
def pipeline_settings(broker, topic, tmp_path):
    return Settings(data_dir=tmp_path / "data", bootstrap_servers=broker.bootstrap_servers, topic=topic)


def start(spark, settings):
    pipeline = Pipeline(spark, settings)
    pipeline.start()
    return pipeline


def test_gold_is_exact_through_late_trades_too_late_trades_and_a_restart(spark, writer, pipeline_settings):
    settings = pipeline_settings
    pipeline = start(spark, settings)
    try:
        # Iteration 1: trades over several windows, edges included; one delivered twice.
        writer.send(
            trade("t1", "BUY", 10, 100.0, DAY + "09:00:00Z"),
            trade("t2", "SELL", 5, 100.0, DAY + "09:14:59Z"),
            trade("t3", "BUY", 1, 50.0, DAY + "09:15:00Z"),
            trade("t4", "SELL", 2, 10.0, DAY + "09:31:00Z"),
            trade("t4", "SELL", 2, 10.0, DAY + "09:31:00Z"),
            b"not a trade",  # ignored, never stops the query
        )
        process(pipeline)
        assert gold_rows(settings) == {
            "09:00": (1000.0, 500.0, 500.0, 2),
            "09:15": (50.0, 0.0, 50.0, 1),
            "09:30": (0.0, 20.0, -20.0, 1),
        }

        assert table(settings, CORRECTIONS.name).empty  # first reports are not corrections

        # Iteration 2: a late trade inside the watermark (max 09:31 -> watermark 09:01) corrects 09:15.
        writer.send(trade("t5", "BUY", 3, 10.0, DAY + "09:20:00Z"))
        process(pipeline)
        assert gold_rows(settings)["09:15"] == (80.0, 0.0, 80.0, 2)
        corrections = table(settings, CORRECTIONS.name)
        assert len(corrections) == 1
        c = corrections.iloc[0]
        assert c.window_start.strftime("%H:%M") == "09:15"
        assert (c.buy_amount_before, c.buy_amount_after) == (50.0, 80.0)
        assert (c.sell_amount_before, c.sell_amount_after) == (0.0, 0.0)
        assert (c.settlement_amount_before, c.settlement_amount_after) == (50.0, 80.0)
        assert (c.trade_count_before, c.trade_count_after, c.late_trades) == (1, 2, 1)

        # Iteration 3: event time moves to 10:30 (watermark 10:00); then 09:05 is too late, 10:10 is not.
        # t1 is delivered again: behind the watermark, but its first copy was counted, so not too late.
        writer.send(trade("t6", "BUY", 1, 1.0, DAY + "10:30:00Z"))
        process(pipeline)
        writer.send(trade("t7", "SELL", 100, 100.0, DAY + "09:05:00Z"),
                    trade("t8", "SELL", 1, 7.0, DAY + "10:10:00Z"),
                    trade("t1", "BUY", 10, 100.0, DAY + "09:00:00Z"))
        process(pipeline)
        assert gold_rows(settings) == {
            "09:00": (1000.0, 500.0, 500.0, 2),
            "09:15": (80.0, 0.0, 80.0, 2),
            "09:30": (0.0, 20.0, -20.0, 1),
            "10:00": (0.0, 7.0, -7.0, 1),
            "10:30": (1.0, 0.0, 1.0, 1),
        }
        # 10:00 was past (event time had reached 10:30) when t8 arrived: a correction from 0.
        corrections = table(settings, CORRECTIONS.name).sort_values("window_start")
        assert [w.strftime("%H:%M") for w in corrections["window_start"]] == ["09:15", "10:00"]
        assert tuple(corrections.iloc[1][["sell_amount_before", "sell_amount_after", "late_trades"]]) == (0.0, 7.0, 1)
        # The too-late trade is listed, with its window and the watermark it missed, and is nowhere in gold.
        late_trades = table(settings, LATE_TRADES.name)
        assert list(late_trades["trade_id"]) == ["t7"]
        lt = late_trades.iloc[0]
        assert lt.window_start.strftime("%H:%M") == "09:00" and lt.late_by_seconds == 55 * 60
        assert lt.watermark.isoformat() == "2026-03-02T10:00:00+00:00"
        # Exactly the trade left out is derivable as too late, with the watermark it missed.
        silver = DeltaTable(str((settings.data_dir / SILVER.name))).to_pandas()
        ledger = DeltaTable(str((settings.data_dir / BATCH_WATERMARKS.name))).to_pandas()
        late = too_late_trades(silver, ledger)
        assert list(late["trade_id"]) == ["t7"]
        assert late["watermark"].iloc[0].isoformat() == "2026-03-02T10:00:00+00:00"
        assert late["late_by"].iloc[0].total_seconds() == 55 * 60
    finally:
        pipeline.stop()

    # Iteration 4: restart on the same checkpoint; a new trade adds to the restored 10:30 totals.
    # Forget the last commit too, so Spark replays that batch: it must not write anything twice.
    commits = settings.checkpoint_dir / "gold_trade_summary" / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    for name in (str(last), f".{last}.crc"):
        (commits / name).unlink(missing_ok=True)
    corrections_before = len(table(settings, CORRECTIONS.name))
    pipeline = start(spark, settings)
    try:
        writer.send(trade("t9", "BUY", 2, 1.0, DAY + "10:31:00Z"),
                    trade("t6", "BUY", 1, 1.0, DAY + "10:30:00Z"))  # redelivered after restart
        process(pipeline)
        rows = gold_rows(settings)
        assert rows["10:30"] == (3.0, 0.0, 3.0, 2)
        assert len(table(settings, CORRECTIONS.name)) == corrections_before
        assert list(table(settings, LATE_TRADES.name)["trade_id"]) == ["t7"]
        assert rows["09:00"] == (1000.0, 500.0, 500.0, 2)
        revisions = DeltaTable(str((settings.data_dir / GOLD.name))).to_pandas().set_index("window_start")
        assert revisions["revision"].min() >= 1
    finally:
        pipeline.stop()


def test_a_batch_judges_late_trades_by_the_previous_batch_watermark(spark, writer, pipeline_settings):
    # One record per micro-batch, back to back (no idle batch in between to move the watermark):
    # batch 1 sees 10:30 (its own watermark is 08:30); batch 2's watermark becomes 10:00, but it
    # judges its input by batch 1's 08:30, so 09:05 still counts; batch 3 judges 09:10 by 10:00.
    settings = pipeline_settings.replace(max_offsets_per_trigger=1)
    writer.send(trade("t1", "BUY", 1, 100.0, DAY + "09:00:00Z"),
                trade("t6", "BUY", 1, 1.0, DAY + "10:30:00Z"),
                trade("t7", "BUY", 1, 10.0, DAY + "09:05:00Z"),
                trade("t8", "BUY", 1, 1000.0, DAY + "09:10:00Z"))
    pipeline = start(spark, settings)
    try:
        process(pipeline)
    finally:
        pipeline.stop()
    assert gold_rows(settings)["09:00"] == (110.0, 0.0, 110.0, 2)
    late = table(settings, LATE_TRADES.name)
    assert list(late["trade_id"]) == ["t8"]
    assert late["watermark"].iloc[0].isoformat() == "2026-03-02T10:00:00+00:00"
