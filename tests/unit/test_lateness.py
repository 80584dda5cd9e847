"""Deriving too-late trades from silver and the per-batch watermark ledger, and their rows in gold."""

import random
from datetime import datetime, timedelta, timezone

import pandas as pd
import pyarrow as pa
import pytest

from streaming.lake.tables import LATE_TRADES, SILVER
from streaming.medallion.lateness import LATE_CANDIDATE_COLUMNS, late_trade_rows, too_late_trades

T = lambda text: pd.Timestamp(text, tz="UTC")  # noqa: E731


def test_a_trade_is_too_late_when_its_batch_watermark_is_at_or_after_its_event_time():
    silver = pd.DataFrame({
        "trade_id": ["on-time", "late", "edge", "other-partition", "first-batch"],
        "event_time": [T("2026-03-02 10:05"), T("2026-03-02 09:02"), T("2026-03-02 10:00"),
                       T("2026-03-02 09:00"), T("2026-03-02 08:00")],
        "topic": ["t"] * 5, "partition": [0, 0, 0, 1, 0], "offset": [10, 11, 12, 3, 1],
    })
    ledger = pd.DataFrame({
        "query_id": ["q"] * 3, "batch_id": [0, 1, 1], "topic": ["t"] * 3, "partition": [0, 0, 1],
        "start_offset": [0, 10, 0], "end_offset": [10, 13, 5],
        # batch 0 has no watermark yet (epoch); batch 1 uses 10:00
        "watermark": [T("1970-01-01"), T("2026-03-02 10:00"), T("2026-03-02 08:30")],
    })
    late = too_late_trades(silver, ledger).set_index("trade_id")
    assert sorted(late.index) == ["edge", "late"]
    assert late.loc["late", "late_by"] == pd.Timedelta(minutes=58)


def test_nothing_is_late_without_a_ledger():
    silver = pd.DataFrame({"trade_id": ["a"], "event_time": [T("2026-03-02 09:00")], "topic": ["t"],
                           "partition": [0], "offset": [0]})
    assert too_late_trades(silver, pd.DataFrame()).empty


def test_a_batch_trade_is_too_late_at_or_before_the_watermark_and_nothing_is_before_the_first():
    import pyarrow as pa

    from streaming.medallion.lateness import EPOCH, too_late

    trades = pa.table({"event_time": pa.array([T("2026-03-02 09:59"), T("2026-03-02 10:00"), T("2026-03-02 10:01")],
                                              pa.timestamp("us", tz="UTC"))})
    assert too_late(trades, T("2026-03-02 10:00").to_pydatetime()).to_pylist() == [True, True, False]
    assert too_late(trades, EPOCH).to_pylist() == [False, False, False]


def pandas_late_trade_rows(late, watermark, window, detected_at):
    """The gold step's rows as pandas made them before they were worked out in Arrow: the reference."""
    rows = late.to_pandas()
    event_time = pd.to_datetime(rows["event_time"], utc=True)
    start = event_time.dt.floor(pd.Timedelta(window))
    return pa.Table.from_pandas(pd.DataFrame({
        "trade_id": rows["trade_id"], "event_time": event_time, "window_start": start,
        "window_end": start + pd.Timedelta(window), "watermark": pd.Timestamp(watermark),
        "late_by_seconds": (pd.Timestamp(watermark) - event_time).dt.total_seconds(), "side": rows["side"],
        "amount": rows["amount"], "topic": rows["topic"], "partition": rows["partition"], "offset": rows["offset"],
        "detected_at": pd.Timestamp(detected_at), "backfilled_at": pd.NaT,
    }), schema=LATE_TRADES.schema, preserve_index=False)


def test_too_late_trades_rows_in_arrow_agree_with_pandas_for_any_window():
    draw = random.Random(7)
    base = datetime(2026, 3, 29, 0, 0, tzinfo=timezone.utc)
    times = [base + timedelta(microseconds=draw.randrange(0, 86_400_000_000)) for _ in range(200)]
    late = pa.table({
        "trade_id": [f"t{i}" for i in range(200)], "event_time": times,
        "side": [draw.choice(["BUY", "SELL"]) for _ in range(200)],
        "amount": [draw.uniform(1, 1e6) for _ in range(200)],
        "topic": ["trades"] * 200, "partition": [draw.randrange(3) for _ in range(200)], "offset": list(range(200)),
    }).cast(SILVER.schema_of(LATE_CANDIDATE_COLUMNS))
    detected_at = datetime(2026, 3, 30, 1, 2, 3, 456789, tzinfo=timezone.utc)
    for window in (timedelta(minutes=15), timedelta(seconds=90), timedelta(hours=1), timedelta(days=1)):
        watermark = base + timedelta(hours=23, microseconds=draw.randrange(10**9))
        arrow = late_trade_rows(late, watermark, window, detected_at)
        assert arrow.equals(pandas_late_trade_rows(late, watermark, window, detected_at)), window
        assert arrow.num_rows == 200
    empty = late_trade_rows(late.slice(0, 0), base, timedelta(minutes=15), detected_at)
    assert empty.num_rows == 0 and empty.schema == pandas_late_trade_rows(late.slice(0, 0), base, timedelta(minutes=15),
                                                                          detected_at).schema


def test_a_too_late_trade_dated_far_ahead_gets_its_rows_with_the_lateness_rounded():
    far = pa.table({"trade_id": ["t"], "event_time": [datetime(2999, 1, 1, tzinfo=timezone.utc)], "side": ["BUY"],
                    "amount": [1.0], "topic": ["trades"], "partition": [0], "offset": [0]}
                   ).cast(SILVER.schema_of(LATE_CANDIDATE_COLUMNS))
    watermark = datetime(2026, 1, 1, tzinfo=timezone.utc)
    rows = late_trade_rows(far, watermark, timedelta(minutes=15), watermark)
    expected = (watermark - datetime(2999, 1, 1, tzinfo=timezone.utc)).total_seconds()
    assert rows["late_by_seconds"][0].as_py() == pytest.approx(expected)
