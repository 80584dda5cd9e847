"""The history-day tool's parts (python -m bench.history_day): the day it writes and what it prints."""

import random

import numpy as np
import pytest

from bench.history_day import DAY_START, WINDOW_US, day_changes, main, next_batch, report, time_pushes
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import SUMMARY_HISTORY
from streaming.medallion.history import LATE, ON_TIME


def test_a_seeded_day_is_its_changes_in_time_order_each_in_its_window_or_late_in_the_one_before():
    day = day_changes(5_000)
    changed = day["changed_at"].to_numpy().astype("int64")
    starts = day["window_start"].to_numpy().astype("int64")
    late = np.array(day["cause"].to_pylist()) == LATE
    assert day.schema == SUMMARY_HISTORY.schema and np.all(np.diff(changed) >= 0)
    assert np.all(changed[~late] - starts[~late] < WINDOW_US)
    assert np.all(changed[late] - starts[late] >= WINDOW_US) and 0.02 < late.mean() < 0.08
    assert set(day["cause"].to_pylist()) == {ON_TIME, LATE}


def test_a_new_batch_changes_the_days_last_window_and_now_and_then_the_one_before():
    batches = [next_batch(batch, random.Random(batch)) for batch in range(20)]
    last = int(DAY_START.timestamp() * 1e6) + 86_400 * 1_000_000 - WINDOW_US
    assert all(rows["window_start"].to_numpy().astype("int64")[0] == last for rows in batches)
    assert {rows.num_rows for rows in batches} == {1, 2}


def test_each_new_file_of_a_seeded_day_is_timed(tmp_path):
    lake = Lake(tmp_path)
    for batch in range(3):
        lake.publish(SUMMARY_HISTORY, day_changes(30).slice(batch * 10, 10), Batch("seed", batch))
    taken = time_pushes(lake, 3, 4)
    assert len(taken) == 4 and all(ms > 0 for ms in taken)
    assert 30 + 4 <= lake.read(SUMMARY_HISTORY).num_rows <= 30 + 8  # a batch's one or two changes each


def test_each_size_is_reported_with_its_median_and_p95():
    assert report({25_000: [10.0, 20.0, 30.0]}) == ["history-day: 25,000 rows: p50 20.0 ms, p95 30.0 ms a new file"]


@pytest.mark.parametrize("argv", [["--rows", "ten"], ["--rows", "0"], ["--steps", "0"]])
def test_a_wrong_flag_is_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2 and "error" in capsys.readouterr().err
