"""reconcile.compare: streamed gold vs a recompute, the difference explained or not (pure)."""

import pandas as pd

from streaming.jobs.reconcile import compare


def test_compare_flags_a_difference_that_the_too_late_trades_do_not_explain():
    ws = pd.Timestamp("2026-03-02T09:00:00Z")
    window = {"window_start": [ws], "window_end": [ws + pd.Timedelta(minutes=15)]}
    streamed = pd.DataFrame({**window, "buy_amount": [100.0], "sell_amount": [0.0], "settlement_amount": [100.0],
                             "trade_count": [1]})
    recomputed = streamed.assign(buy_amount=[150.0], settlement_amount=[150.0], trade_count=[2])
    too_late = pd.DataFrame({"window_start": [ws], "trade_id": ["x"], "side": ["BUY"], "amount": [20.0]})
    row = compare(streamed, recomputed, too_late, watermark=ws + pd.Timedelta(hours=1)).iloc[0]
    assert row.diff_buy_amount == 50.0 and row.late_buy == 20.0
    assert not row.explained and not row.matches and row.final
