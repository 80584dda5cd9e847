"""gold.trade_summary on static batches: window edges, settlement sign, dedup."""

from datetime import datetime, timedelta

import pytest

from streaming.medallion import gold

WINDOW, WATERMARK = timedelta(minutes=15), timedelta(minutes=30)


def summary(spark, *trades):
    rows = [(tid, side, amount, datetime.fromisoformat(at)) for tid, side, amount, at in trades]
    df = spark.createDataFrame(rows, "trade_id string, side string, amount double, event_time timestamp")
    result = gold.trade_summary(df, WINDOW).collect()
    return {r.window_start.strftime("%H:%M"): r for r in result}


def test_a_trade_at_exactly_the_window_start_belongs_to_that_window(spark):
    out = summary(spark, ("a", "BUY", 10.0, "2026-03-02 09:14:59.999"), ("b", "BUY", 5.0, "2026-03-02 09:15:00"))
    assert out["09:00"].buy_amount == 10.0 and out["09:15"].buy_amount == 5.0
    assert out["09:15"].window_start == datetime(2026, 3, 2, 9, 15)
    assert out["09:15"].window_end == datetime(2026, 3, 2, 9, 30)


def test_settlement_is_buy_minus_sell_and_can_be_negative(spark):
    out = summary(spark, ("a", "BUY", 100.0, "2026-03-02 09:01"), ("b", "SELL", 250.0, "2026-03-02 09:02"),
                  ("c", "SELL", 1.0, "2026-03-02 09:20"))
    assert (out["09:00"].buy_amount, out["09:00"].sell_amount) == (100.0, 250.0)
    assert out["09:00"].settlement_amount == pytest.approx(-150.0)
    assert out["09:00"].trade_count == 2
    assert (out["09:15"].buy_amount, out["09:15"].settlement_amount) == (0.0, -1.0)


def test_the_same_trade_id_counts_once(spark):
    out = summary(spark, ("a", "BUY", 10.0, "2026-03-02 09:01"), ("a", "BUY", 10.0, "2026-03-02 09:01"))
    assert out["09:00"].buy_amount == 10.0 and out["09:00"].trade_count == 1
