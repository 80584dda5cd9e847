"""The window sums exist twice, in Spark (gold.trade_summary, the stream) and in Arrow
(gold.window_sums, for batches read from silver): on the same trades they give the same windows."""

from datetime import datetime, timedelta, timezone

import pyarrow as pa

from streaming.medallion.gold import trade_summary, window_sums

UTC = timezone.utc
WINDOW, WATERMARK = timedelta(minutes=15), timedelta(minutes=30)
TRADES = pa.schema([("trade_id", pa.string()), ("side", pa.string()), ("amount", pa.float64()),
                    ("event_time", pa.timestamp("us", tz="UTC"))])
NINE = datetime(2026, 3, 2, 9, tzinfo=UTC)


def trades(*rows) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(TRADES.names, row)) for row in rows], schema=TRADES)


def spark_windows(spark, arrow: pa.Table) -> list[tuple]:
    rows = trade_summary(spark.createDataFrame(arrow), WINDOW).collect()
    # The session's time zone is UTC: Spark hands back naive UTC times.
    return sorted((r.window_start.replace(tzinfo=UTC), r.window_end.replace(tzinfo=UTC), r.buy_amount,
                   r.sell_amount, r.settlement_amount, r.trade_count) for r in rows)


def arrow_windows(arrow: pa.Table) -> list[tuple]:
    return sorted((r["window_start"], r["window_end"], r["buy_amount"], r["sell_amount"], r["settlement_amount"],
                   r["trade_count"]) for r in window_sums(arrow, WINDOW).to_pylist())


def assert_same_windows(spark, arrow: pa.Table) -> list[tuple]:
    in_spark, in_arrow = spark_windows(spark, arrow), arrow_windows(arrow)
    assert [(w[0], w[1], w[5]) for w in in_spark] == [(w[0], w[1], w[5]) for w in in_arrow]  # counts exactly
    for s, a in zip(in_spark, in_arrow):
        assert all(abs(x - y) <= 1e-9 for x, y in zip(s[2:5], a[2:5])), (s, a)  # buy, sell, settlement
    return in_arrow


def test_spark_and_arrow_agree_on_window_edges_duplicates_and_settlement_signs(spark):
    minute = timedelta(minutes=1)
    arrow = trades(
        ("edge-before", "BUY", 10.125, NINE + 15 * minute - timedelta(microseconds=1)),
        ("edge-at", "BUY", 5.5, NINE + 15 * minute),
        ("start", "SELL", 0.1, NINE),
        ("sells-win", "SELL", 250.0, NINE + 16 * minute),
        ("twice", "BUY", 0.2, NINE + 2 * minute),
        ("twice", "BUY", 0.2, NINE + 2 * minute),  # a redelivery: the same trade again
        ("only-sell", "SELL", 1.0 / 3, NINE + 45 * minute),
        ("next-day", "BUY", 1e9 + 0.01, NINE + timedelta(days=1)),
    )
    windows = assert_same_windows(spark, arrow)
    assert [(w[0] - NINE, w[5]) for w in windows] == [
        (timedelta(0), 3), (15 * minute, 2), (45 * minute, 1), (timedelta(days=1), 1)]


def test_spark_and_arrow_agree_on_many_trades_and_after_2262(spark):
    rows = [(f"t{i}", "BUY" if i % 3 else "SELL", round(1 + i * 0.37, 2), NINE + timedelta(seconds=97 * i))
            for i in range(400)]
    rows += rows[::7]  # redelivered copies
    far = datetime(2999, 1, 1, tzinfo=UTC)
    rows += [("far-1", "BUY", 7.0, far), ("far-2", "SELL", 9.0, far + WINDOW - timedelta(microseconds=1))]
    windows = assert_same_windows(spark, trades(*rows))
    assert sum(w[5] for w in windows) == 402
    assert windows[-1][:2] == (far, far + WINDOW)
