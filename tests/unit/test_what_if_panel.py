"""The Lateness tab's sentence, slider and figures (dashboard/panels/what_if.py): pure functions
of /api/lateness's answer."""

from __future__ import annotations

import math
from datetime import timedelta

import pandas as pd

from dashboard.api import lateness_json, lateness_points
from dashboard.panels.what_if import chosen_delay, curve_figure, distribution_figure, sentence, slider_marks
from streaming.medallion.lateness import LatenessTally

MINUTE_US = 60_000_000
# 41,200 trades: 3 of them 50 minutes behind the front, 10 of them 20 minutes, the rest on time.
DELAY = timedelta(minutes=30)
ANSWER = lateness_json(LatenessTally.of(pd.Series([0] * 41_187 + [20 * MINUTE_US] * 10 + [50 * MINUTE_US] * 3),
                                        lateness_points(DELAY)), "2026-03-02", DELAY)


def test_the_sentence_at_the_runs_delay_says_what_was_too_late():
    assert sentence(ANSWER, None) == ("2026-03-02: with 30 minutes, 3 of 41,200 trades (0.007%) were too late "
                                      "(the run's delay, --watermark 30 minutes).")


def test_the_sentence_at_another_delay_says_what_would_have_been_and_how_much_later_windows_are_final():
    assert sentence(ANSWER, 45 * 60.0) == ("2026-03-02: with 45 minutes, 3 of 41,200 trades (0.007%) would have "
                                           "been too late, and windows final 15 minutes later.")
    assert sentence(ANSWER, 15 * 60.0).endswith("13 of 41,200 trades (0.032%) would have been too late, and windows "
                                                "final 15 minutes sooner.")


def test_the_slider_has_a_position_per_delay_of_the_curve():
    marks = slider_marks(ANSWER)
    assert list(marks.values()) == ["1m", "2m", "5m", "10m", "15m", "20m", "30m", "45m", "1h", "1.5h", "2h"]
    assert chosen_delay(ANSWER, 7) == 45 * 60.0 and chosen_delay(ANSWER, None) is None


def test_the_curve_marks_the_runs_delay_on_its_log_axis_and_the_distribution_has_a_bar_per_bin():
    curve = curve_figure(ANSWER, 45 * 60.0)
    assert curve["layout"]["xaxis"]["type"] == "log"
    assert [shape["x0"] for shape in curve["layout"]["shapes"]] == [30.0, 45.0]
    assert [round(note["x"], 6) for note in curve["layout"]["annotations"]] == [round(math.log10(30), 6),
                                                                               round(math.log10(45), 6)]
    bars = distribution_figure(ANSWER)["data"][0]
    assert dict(zip(bars["x"], bars["y"]))["0 (moved the front)"] == 41_187
    assert dict(zip(bars["x"], bars["y"]))["30m-1h"] == 3


def test_without_a_day_the_sentence_says_so():
    assert sentence(lateness_json(LatenessTally.empty(lateness_points(DELAY)), None, DELAY), None).startswith(
        "No trading day yet")
