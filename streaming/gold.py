"""Gold: valid trades -> the windowed trade summary (a pure DataFrame -> DataFrame function).

One stateful chain, in update mode:
    withWatermark(event_time) -> dropDuplicatesWithinWatermark(trade_id) -> window aggregate

The dedup step drops a trade whose event time is at or behind the watermark that Spark
applies to late input (the previous micro-batch's, see lateness.py); so "too late" means
exactly `event_time <= watermark`, whatever window the trade falls in. A trade delivered twice within
the watermark is counted once.
"""

from __future__ import annotations

from datetime import timedelta

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streaming.settings import format_duration

GOLD_TABLE = "gold/trade_summary"
GOLD_KEYS = ("window_start",)
# Columns of gold/trade_summary; revision counts the updates a window has had.
GOLD_SCHEMA = pa.schema([
    ("window_start", pa.timestamp("us", tz="UTC")),
    ("window_end", pa.timestamp("us", tz="UTC")),
    ("buy_amount", pa.float64()),
    ("sell_amount", pa.float64()),
    ("settlement_amount", pa.float64()),
    ("trade_count", pa.int64()),
    ("revision", pa.int64()),
    ("updated_at", pa.timestamp("us", tz="UTC")),
    ("batch_id", pa.int64()),
])


def trade_summary(trades: DataFrame, window: timedelta, watermark: timedelta) -> DataFrame:
    """Per tumbling window [start, start + window): buy, sell, settlement and trade count."""
    amount_of = lambda side: F.sum(F.when(F.col("side") == side, F.col("amount")).otherwise(F.lit(0.0)))  # noqa: E731
    watermarked = trades.withWatermark("event_time", format_duration(watermark))
    # The same function recomputes a batch of trades (e.g. from silver), where Spark only
    # offers a plain dropDuplicates.
    unique = (watermarked.dropDuplicatesWithinWatermark(["trade_id"]) if trades.isStreaming
              else watermarked.dropDuplicates(["trade_id"]))
    return (
        unique
        .groupBy(F.window("event_time", format_duration(window)).alias("window"))
        .agg(
            amount_of("BUY").alias("buy_amount"),
            amount_of("SELL").alias("sell_amount"),
            F.count(F.lit(1)).alias("trade_count"),
        )
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "buy_amount",
            "sell_amount",
            (F.col("buy_amount") - F.col("sell_amount")).alias("settlement_amount"),
            "trade_count",
        )
    )
