"""Gold: valid trades -> the windowed trade summary, twice: in Arrow (`window_sums`, what the
stream adds to gold per micro-batch, and what a recount or a drill-down computes from silver)
and in Spark (`trade_summary`, the reconciliation's independent recompute). Both are pure;
tests/integration/test_window_sums_agree.py checks they agree.

The stream has no Spark state: gold itself is the state, and the sink judges each batch's
trades against the batch's watermark (lateness.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streaming.config import format_duration
from streaming.lake.tables import UTC_TIME
from streaming.rows import one_per_key

MEASURES = ("buy_amount", "sell_amount", "settlement_amount", "trade_count")
WINDOW_SUMS_SCHEMA = pa.schema([
    ("window_start", UTC_TIME), ("window_end", UTC_TIME), ("buy_amount", pa.float64()),
    ("sell_amount", pa.float64()), ("settlement_amount", pa.float64()), ("trade_count", pa.int64()),
])


def trade_summary(trades: DataFrame, window: timedelta) -> DataFrame:
    """Per tumbling window [start, start + window) of a batch of trades, each trade_id once:
    buy, sell, settlement and trade count."""
    amount_of = lambda side: F.sum(F.when(F.col("side") == side, F.col("amount")).otherwise(F.lit(0.0)))  # noqa: E731
    return (
        trades.dropDuplicates(["trade_id"])
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


def window_starts(event_times: pa.ChunkedArray | pa.Array, window: timedelta) -> pa.Array:
    """Spark's tumbling window start: the event time floored to the window, from the epoch."""
    return pc.floor_temporal(event_times, multiple=round(window.total_seconds() * 1000), unit="millisecond")


def window_sums(trades: pa.Table, window: timedelta) -> pa.Table:
    """`trade_summary` on a batch of trades in Arrow (trade_id, side, amount, event_time):
    each trade_id once (its first row), one row per window with a trade, oldest first."""
    trades = one_per_key(trades.select(["trade_id", "side", "amount", "event_time"]), ["trade_id"], keep="first")
    if trades.num_rows == 0:
        return WINDOW_SUMS_SCHEMA.empty_table()
    zero = pa.scalar(0.0, pa.float64())
    amount = trades["amount"].cast(pa.float64())
    sums = pa.table({
        "window_start": window_starts(trades["event_time"].cast(UTC_TIME), window),
        "buy": pc.if_else(pc.equal(trades["side"], "BUY"), amount, zero),
        "sell": pc.if_else(pc.equal(trades["side"], "SELL"), amount, zero),
    }).group_by("window_start", use_threads=False).aggregate([("buy", "sum"), ("sell", "sum"), ("buy", "count")])
    sums = sums.sort_by("window_start")
    starts = sums["window_start"]
    return pa.table({
        "window_start": starts,
        "window_end": pc.add(starts, pa.scalar(window, pa.duration("us"))),
        "buy_amount": sums["buy_sum"],
        "sell_amount": sums["sell_sum"],
        "settlement_amount": pc.subtract(sums["buy_sum"], sums["sell_sum"]),
        "trade_count": sums["buy_count"],
    }).cast(WINDOW_SUMS_SCHEMA)


def merge_window_sums(parts: list[pa.Table]) -> pa.Table:
    """Several window_sums() of disjoint sets of trades -> the window_sums() of them all."""
    parts = [p for p in parts if p.num_rows]
    if not parts:
        return WINDOW_SUMS_SCHEMA.empty_table()
    if len(parts) == 1:
        return parts[0].cast(WINDOW_SUMS_SCHEMA)
    sums = pa.concat_tables(parts).group_by(["window_start", "window_end"], use_threads=False).aggregate(
        [(m, "sum") for m in MEASURES]).sort_by("window_start")
    return pa.table({"window_start": sums["window_start"], "window_end": sums["window_end"],
                     **{m: sums[f"{m}_sum"] for m in MEASURES}}).cast(WINDOW_SUMS_SCHEMA)


def window_measures(windows: pa.Table) -> dict[datetime, tuple]:
    """Each window's MEASURES by its start, of window rows (gold's, or window_sums()'); none of
    an empty table, whatever its columns. A batch's few windows: plain Python beats a frame."""
    if windows.num_rows == 0:
        return {}
    return dict(zip(windows["window_start"].cast(UTC_TIME).to_pylist(),
                    zip(*(windows[m].to_pylist() for m in MEASURES))))


def window_rows(windows: pa.Table) -> pa.Table:
    """Window rows as window_sums() gives them (window_start, window_end and MEASURES)."""
    return windows.select(WINDOW_SUMS_SCHEMA.names).cast(WINDOW_SUMS_SCHEMA)
