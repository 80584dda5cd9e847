"""find_corrections: which window updates are corrections, with before and after (pure)."""

from datetime import datetime, timedelta, timezone

import pandas as pd
import pyarrow as pa

from streaming.medallion.corrections import find_corrections

UTC = timezone.utc
T = lambda hm: pd.Timestamp(f"2026-03-02 {hm}", tz="UTC")  # noqa: E731


def window(hm, buy, sell, count):
    start = T(hm)
    return {"window_start": start, "window_end": start + pd.Timedelta(minutes=15), "buy_amount": buy,
            "sell_amount": sell, "settlement_amount": buy - sell, "trade_count": count}


def corrections(current, updated, watermark):
    return find_corrections(pa.Table.from_pylist(current), pa.Table.from_pylist(updated), watermark,
                            timedelta(minutes=30), datetime(2026, 11, 22, tzinfo=UTC), 7, "q").to_pandas()


def test_an_update_of_a_past_window_is_a_correction_with_before_and_after():
    # watermark 09:01 -> event time had reached 09:31; the 09:15 window (ends 09:30) was past
    out = corrections([window("09:15", 50.0, 0.0, 1)], [window("09:15", 80.0, 0.0, 2)],
                      datetime(2026, 3, 2, 9, 1, tzinfo=UTC))
    assert len(out) == 1
    row = out.iloc[0]
    assert (row.buy_amount_before, row.buy_amount_after, row.late_trades, row.batch_id) == (50.0, 80.0, 1, 7)
    assert (row.settlement_amount_before, row.settlement_amount_after) == (50.0, 80.0)


def test_the_window_in_progress_is_not_a_correction():
    out = corrections([window("09:30", 10.0, 0.0, 1)], [window("09:30", 20.0, 0.0, 2)],
                      datetime(2026, 3, 2, 9, 1, tzinfo=UTC))
    assert out.empty


def test_a_past_window_seen_for_the_first_time_is_a_correction_from_zero():
    out = corrections([], [window("09:00", 0.0, 7.0, 1)], datetime(2026, 3, 2, 10, 0, tzinfo=UTC))
    assert tuple(out.iloc[0][["sell_amount_before", "sell_amount_after", "trade_count_before"]]) == (0.0, 7.0, 0)


def test_no_watermark_yet_means_no_corrections_and_unchanged_values_are_not_corrections():
    assert corrections([], [window("09:00", 1.0, 0.0, 1)], None).empty
    same = window("09:00", 1.0, 0.0, 1)
    assert corrections([same], [same], datetime(2026, 3, 2, 11, tzinfo=UTC)).empty
