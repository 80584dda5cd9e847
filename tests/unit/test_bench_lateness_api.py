"""bench.lateness_api: the ledger it seeds is the one the live query would have left (each batch's
ranges and the front of the trades before it), so the lateness worked out from it is what the
trades' order gives; and its flags."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd
import pytest

from bench import lateness_api
from bench.report import KEPT_SECTIONS
from streaming.medallion.lateness import trade_lateness

T = lambda text: pd.Timestamp(text, tz="UTC")  # noqa: E731
DELAY = timedelta(minutes=30)


def test_batches_cut_the_day_in_event_time_order_with_the_front_of_the_trades_before():
    trades = pd.DataFrame({"event_time": [T("2026-03-02 09:00"), T("2026-03-02 09:05"), T("2026-03-02 09:02"),
                                          T("2026-03-02 09:10"), T("2026-03-02 09:20")],
                           "topic": "t", "partition": [0, 1, 0, 1, 0], "offset": [0, 0, 1, 1, 2]})
    yesterday = T("2026-03-01 16:59")

    ranges, front = lateness_api.batch_ranges(trades, 7, 2, yesterday, DELAY)

    # Batches: 09:00, 09:02 | 09:05, 09:10 | 09:20.
    assert ranges[["batch_id", "partition", "start_offset", "end_offset"]].values.tolist() == [
        [7, 0, 0, 2], [8, 1, 0, 2], [9, 0, 2, 3]]
    assert ranges["front"].tolist() == [yesterday, T("2026-03-02 09:02"), T("2026-03-02 09:10")]
    assert (ranges["watermark"] == ranges["front"] - pd.Timedelta(DELAY)).all()
    assert front == T("2026-03-02 09:20")
    assert trade_lateness(trades, ranges, DELAY).tolist() == [0, 0, 0, 0, 0]  # in order: none behind


def test_a_partition_read_behind_the_others_gives_its_trades_their_lateness_and_whole_ranges():
    minute = pd.Timedelta(minutes=1)
    trades = pd.DataFrame({"event_time": [T("2026-03-02 09:00") + k * minute for k in range(6)], "topic": "t",
                           "partition": [0, 1, 0, 1, 0, 1], "offset": [0, 0, 1, 1, 2, 2]})
    lag_us = trades["partition"].map({0: 0, 1: 150_000_000}).to_numpy()  # partition 1 read 2.5 minutes behind

    ranges, front = lateness_api.batch_ranges(trades, 0, 2, None, DELAY, lag_us)

    # Reached the query at 09:00, 09:02, 09:03.5, 09:04, 09:05.5, 09:07.5: batches of 2 in that order.
    assert ranges[["batch_id", "partition", "start_offset", "end_offset"]].values.tolist() == [
        [0, 0, 0, 2], [1, 0, 2, 3], [1, 1, 0, 1], [2, 1, 1, 3]]
    assert trade_lateness(trades, ranges, DELAY).tolist() == [0, 60_000_000, 0, 60_000_000, 0, 0]
    assert front == T("2026-03-02 09:05")


def test_the_section_is_kept_by_a_normal_bench_run():
    assert lateness_api.HEADING in KEPT_SECTIONS


@pytest.mark.parametrize("argv", [["--days", "0"], ["--requests", "-1"], ["--batch-trades", "0"],
                                  ["--per-day", "x"], ["--per-day", "300"]])
def test_a_wrong_number_is_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as stopped:
        lateness_api.main(argv)
    assert stopped.value.code == 2 and "error:" in capsys.readouterr().err
