"""Recounting the windows that records read again touch, from silver (pure Arrow)."""

from datetime import timedelta

import pandas as pd
import pyarrow as pa

from streaming.medallion.replay import recount

T = lambda text: pd.Timestamp(text, tz="UTC")  # noqa: E731


def silver(*rows):
    return pa.Table.from_pandas(pd.DataFrame(rows, columns=["trade_id", "side", "amount", "event_time"]),
                                preserve_index=False)


def test_a_recount_sums_each_trade_once_leaves_out_the_too_late_and_only_the_windows_asked_for():
    trades = silver(("a", "BUY", 10.0, T("2026-03-02 09:14:59")), ("b", "SELL", 4.0, T("2026-03-02 09:15:00")),
                    ("a", "BUY", 10.0, T("2026-03-02 09:14:59")), ("late", "BUY", 99.0, T("2026-03-02 09:01")),
                    ("c", "BUY", 1.0, T("2026-03-02 09:31")))
    starts = pa.array([T("2026-03-02 09:00"), T("2026-03-02 09:15")], pa.timestamp("us", tz="UTC"))
    sums = recount(trades, pa.chunked_array([pa.array(["late"])]), starts, timedelta(minutes=15)).to_pylist()
    assert [(w["window_start"].strftime("%H:%M"), w["buy_amount"], w["sell_amount"], w["trade_count"])
            for w in sums] == [("09:00", 10.0, 0.0, 1), ("09:15", 0.0, 4.0, 1)]
    assert sums[1]["settlement_amount"] == -4.0
