"""Replay from a Kafka time with fresh checkpoints: results are corrected, never partial or doubled."""

import time
from datetime import datetime, timezone

import pandas as pd
import pyarrow as pa
from deltalake import DeltaTable

from streaming.config import Settings
from streaming.lake.tables import BRONZE, GOLD, SILVER
from streaming.pipeline import Pipeline
from streaming.replay import baseline_from_silver
from tests.conftest import process, run_once, trade

DAY = "2026-03-02T"


def gold_rows(settings):
    frame = DeltaTable(str((settings.data_dir / GOLD.name))).to_pandas()
    return {r.window_start.strftime("%H:%M"): (round(r.buy_amount, 2), round(r.sell_amount, 2), r.trade_count)
            for r in frame.itertuples()}


def count(settings, table):
    return len(DeltaTable(str((settings.data_dir / table))).to_pandas())


def test_baseline_sums_each_trade_before_the_replay_time_once():
    silver = pd.DataFrame({
        "trade_id": ["a", "b", "a", "c"], "side": ["BUY", "SELL", "BUY", "BUY"], "amount": [10.0, 4.0, 10.0, 1.0],
        "event_time": pd.to_datetime(["2026-03-02 09:14:59", "2026-03-02 09:15:00", "2026-03-02 09:14:59",
                                      "2026-03-02 09:01:00"], utc=True),
        "kafka_timestamp": pd.to_datetime(["2026-03-02 10:00", "2026-03-02 10:00", "2026-03-02 10:00",
                                           "2026-03-02 12:00"], utc=True),
    })
    base = baseline_from_silver(pa.Table.from_pandas(silver), datetime(2026, 3, 2, 11, tzinfo=timezone.utc),
                                pd.Timedelta("15min"))
    assert sorted(base.skip_trade_ids) == ["a", "b"]
    assert base.windows == {pd.Timestamp("2026-03-02 09:00", tz="UTC"): (10.0, 0.0, 1),
                            pd.Timestamp("2026-03-02 09:15", tz="UTC"): (0.0, 4.0, 1)}


def test_replay_from_a_time_rebuilds_gold_without_partial_or_double_counts(spark, writer, broker, topic, tmp_path):
    settings = Settings(data_dir=tmp_path / "data", bootstrap_servers=broker.bootstrap_servers, topic=topic)
    pipeline = Pipeline(spark, settings)
    pipeline.start()
    try:
        a1 = trade("a1", "BUY", 10, 10.0, DAY + "09:01:00Z")
        writer.send(a1, trade("a2", "SELL", 1, 50.0, DAY + "09:20:00Z"),
                    trade("a3", "BUY", 1, 1.0, DAY + "10:30:00Z"), trade("a5", "BUY", 2, 1.0, DAY + "10:31:00Z"))
        process(pipeline)
        writer.send(trade("a4", "SELL", 100, 100.0, DAY + "09:02:00Z"))  # too late (watermark 10:01)
        process(pipeline)
        time.sleep(0.2)
        replay_time = datetime.now(timezone.utc)
        time.sleep(0.2)
        writer.send(trade("b1", "BUY", 1, 7.0, DAY + "10:05:00Z"),
                    trade("b2", "SELL", 5, 5.0, DAY + "09:30:00Z"),  # too late as well
                    trade("b3", "BUY", 3, 1.0, DAY + "10:40:00Z"),  # 10:30 straddles the replay time
                    a1, b"{not json")
        process(pipeline)
    finally:
        pipeline.stop()
    expected = {"09:00": (100.0, 0.0, 1), "09:15": (0.0, 50.0, 1), "10:00": (7.0, 0.0, 1), "10:30": (6.0, 0.0, 3)}
    assert gold_rows(settings) == expected

    replay = settings.replace(replay_from=replay_time)
    run_once(spark, replay)
    assert gold_rows(settings) == expected
    assert count(settings, BRONZE.name) == 10 and count(settings, SILVER.name) == 8
    assert list((settings.data_dir / "checkpoints.replaced").iterdir()), "old checkpoints are kept aside"

    # Stopped and restarted half way: the replay's checkpoints resume with the same baseline.
    writer.send(trade("b4", "BUY", 1, 1.0, DAY + "10:32:00Z"))
    run_once(spark, settings)
    assert gold_rows(settings)["10:30"] == (7.0, 0.0, 4)
