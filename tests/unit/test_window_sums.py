"""gold.window_sums, the Arrow twin of the stream's window sums, at the edges (no Spark)."""

from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest

from streaming.medallion.gold import WINDOW_SUMS_SCHEMA, window_sums

UTC = timezone.utc
WINDOW = timedelta(minutes=15)
TRADES = pa.schema([("trade_id", pa.string()), ("side", pa.string()), ("amount", pa.float64()),
                    ("event_time", pa.timestamp("us", tz="UTC"))])


def sums(*trades) -> dict[datetime, dict]:
    """(trade_id, side, amount, event_time) rows -> {window_start: its row}, checked to be oldest first."""
    table = pa.Table.from_pylist([dict(zip(TRADES.names, t)) for t in trades], schema=TRADES)
    out = window_sums(table, WINDOW)
    assert out.schema == WINDOW_SUMS_SCHEMA
    rows = out.to_pylist()
    assert [r["window_start"] for r in rows] == sorted(r["window_start"] for r in rows)
    return {r["window_start"]: r for r in rows}


def at(hh: int, mm: int, ss: int = 0, us: int = 0, day: int = 2) -> datetime:
    return datetime(2026, 3, day, hh, mm, ss, us, tzinfo=UTC)


def test_a_trade_at_exactly_the_window_start_belongs_to_that_window_and_a_microsecond_before_to_the_previous():
    out = sums(("a", "BUY", 10.0, at(9, 14, 59, 999_999)), ("b", "BUY", 5.0, at(9, 15)))
    assert sorted(out) == [at(9, 0), at(9, 15)]
    assert (out[at(9, 0)]["buy_amount"], out[at(9, 0)]["trade_count"]) == (10.0, 1)
    assert (out[at(9, 15)]["buy_amount"], out[at(9, 15)]["trade_count"]) == (5.0, 1)
    assert out[at(9, 15)]["window_end"] == at(9, 30) and out[at(9, 0)]["window_end"] == at(9, 15)


def test_a_trade_id_twice_counts_once_and_its_first_row_wins():
    out = sums(("a", "BUY", 10.0, at(9, 1)), ("b", "SELL", 3.0, at(9, 2)), ("a", "SELL", 99.0, at(9, 20)))
    assert list(out) == [at(9, 0)]  # the second "a" would have opened 09:15
    row = out[at(9, 0)]
    assert (row["buy_amount"], row["sell_amount"], row["trade_count"]) == (10.0, 3.0, 2)


def test_settlement_is_buy_minus_sell_and_negative_when_sells_win():
    out = sums(("a", "BUY", 100.0, at(9, 1)), ("b", "SELL", 250.0, at(9, 2)), ("c", "SELL", 1.0, at(9, 20)))
    nine = out[at(9, 0)]
    assert (nine["buy_amount"], nine["sell_amount"], nine["trade_count"]) == (100.0, 250.0, 2)
    assert nine["settlement_amount"] == pytest.approx(-150.0)
    quarter = out[at(9, 15)]
    assert (quarter["buy_amount"], quarter["sell_amount"], quarter["settlement_amount"]) == (0.0, 1.0, -1.0)


def test_a_time_past_2262_works():
    # pandas' nanosecond timestamps end in 2262; Arrow's microseconds do not.
    new_year = datetime(2999, 1, 1, tzinfo=UTC)
    out = sums(("a", "BUY", 7.0, new_year), ("b", "SELL", 2.0, new_year + timedelta(minutes=14, seconds=59)),
               ("c", "BUY", 1.0, new_year + WINDOW))
    assert sorted(out) == [new_year, new_year + WINDOW]
    row = out[new_year]
    assert (row["window_end"], row["buy_amount"], row["sell_amount"], row["trade_count"]) == \
        (new_year + WINDOW, 7.0, 2.0, 2)


def test_windows_are_counted_from_the_epoch_and_no_trades_is_no_windows():
    assert list(sums(("a", "BUY", 1.0, at(23, 59, 59, day=1)), ("b", "BUY", 1.0, at(0, 0)))) == \
        [at(23, 45, day=1), at(0, 0)]
    assert window_sums(TRADES.empty_table(), WINDOW).num_rows == 0
