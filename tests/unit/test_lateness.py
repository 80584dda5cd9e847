"""Deriving too-late trades from silver and the per-batch watermark ledger (pure pandas)."""

import pandas as pd

from streaming.medallion.lateness import too_late_trades

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
