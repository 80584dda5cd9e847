"""The health panel's lag sparkline: its time ticks never repeat a label over the minutes it spans."""

from datetime import datetime, timedelta, timezone

import pytest

from dashboard.figures import lag_sparkline

START = datetime(2026, 3, 2, 16, 6, 0, tzinfo=timezone.utc)
# The steps Plotly picks for a date axis of seconds to minutes (ms), by the span and the width.
PLOTLY_STEPS_MS = [100, 200, 500, 1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000]


def sparkline_of(samples: int, every_s: int = 2) -> dict:
    history = [{"at": (START + timedelta(seconds=i * every_s)).isoformat(), "lag": 100 + i} for i in range(samples)]
    return lag_sparkline({"status": {"lag_history": history}})


def tick_format(xaxis: dict, dtick_ms: int) -> str:
    """The format Plotly gives ticks `dtick_ms` apart: the first stop whose dtickrange (ends
    included, None open) holds the step, else tickformat."""
    for stop in xaxis.get("tickformatstops", []):
        low, high = stop["dtickrange"]
        if (low is None or low <= dtick_ms) and (high is None or dtick_ms <= high):
            return stop["value"]
    return xaxis["tickformat"]


def labels(xaxis: dict, dtick_ms: int, span_s: int) -> list[str]:
    """The tick labels of a span starting at a round minute, ticks dtick_ms apart."""
    fmt = tick_format(xaxis, dtick_ms).replace("%1f", "{tenths}")
    instants = [START + timedelta(milliseconds=at) for at in range(0, span_s * 1000 + 1, dtick_ms)]
    return [at.strftime(fmt).format(tenths=at.microsecond // 100_000) for at in instants]


@pytest.mark.parametrize("dtick_ms", PLOTLY_STEPS_MS)
def test_the_lag_ticks_never_repeat_a_label_whatever_step_plotly_picks(dtick_ms):
    xaxis = sparkline_of(150)["layout"]["xaxis"]  # 5 minutes of samples
    shown = labels(xaxis, dtick_ms, 300)
    assert len(shown) == len(set(shown)), shown


def test_the_lag_ticks_show_seconds_under_a_minute_apart_and_minutes_from_a_minute():
    xaxis = sparkline_of(150)["layout"]["xaxis"]
    assert labels(xaxis, 10_000, 30) == ["16:06:00", "16:06:10", "16:06:20", "16:06:30"]
    assert labels(xaxis, 60_000, 180) == ["16:06", "16:07", "16:08", "16:09"]


@pytest.mark.parametrize("samples", [0, 1, 2, 3])
def test_the_first_seconds_of_lag_get_a_tick_per_sample(samples):
    # One sample has no span (Plotly would put ticks 0.5 ms apart): its time is the one tick.
    xaxis = sparkline_of(samples)["layout"]["xaxis"]
    assert xaxis["tickmode"] == "array" and xaxis["tickformat"] == "%H:%M:%S"
    assert xaxis["tickvals"] == [(START + timedelta(seconds=2 * i)).isoformat() for i in range(samples)]
