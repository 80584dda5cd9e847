"""GET /api/lateness's parameters and its answer for a lake without trades: a clear 400 with the
usage for a bad day, and zeros rather than an error for a day without data."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd
import pytest

from dashboard.api import lateness_json, lateness_points
from dashboard.dash_app import create_app
from dashboard.panels.what_if import sentence
from streaming.lake.store import Lake
from streaming.medallion.lateness import CLOSED, LatenessTally


@pytest.fixture
def client(tmp_path):
    lake = Lake(tmp_path / "data")
    lake.ensure_all()
    return create_app(lake, watermark=timedelta(minutes=45)).server.test_client()


@pytest.mark.parametrize("query, says", [
    ("day=tomorrow", "day must be a date as YYYY-MM-DD"),
    ("day=2026-02-30", "day must be a date as YYYY-MM-DD"),
    ("day=9999-12-31", "day must be a date as YYYY-MM-DD"),  # no whole day after it to read
    ("day=2026-03-02&day=2026-03-03", "day is given 2 times"),
    ("as_of=2026-03-02T10:00:00Z", "Unknown parameter 'as_of'"),
])
def test_a_bad_parameter_gets_a_400_with_the_usage(client, query, says):
    answer = client.get(f"/api/lateness?{query}")
    assert answer.status_code == 400
    error = answer.get_json()["error"]
    assert says in error and error.endswith("Usage: GET /api/lateness?day=YYYY-MM-DD (optional: the newest day "
                                            "with data)")


def test_a_day_without_trades_answers_zeros_with_the_runs_delay_among_the_points(client):
    answer = client.get("/api/lateness?day=2026-03-02").get_json()
    assert (answer["day"], answer["trades"], answer["watermark_s"]) == ("2026-03-02", 0, 2700.0)
    assert [p["delay_s"] for p in answer["curve"]] == [m * 60.0 for m in (1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120)]
    assert all(p["too_late"] == 0 and p["share"] == 0.0 for p in answer["curve"])
    assert sum(b["trades"] for b in answer["distribution"]) == 0


def test_without_a_day_with_data_the_answer_names_none(client):
    assert client.get("/api/lateness").get_json()["day"] is None


def test_trades_for_windows_closed_when_quiet_count_at_every_delay_and_in_no_lateness_bin():
    minute = 60_000_000
    lateness = pd.Series([0, 2 * minute, CLOSED, CLOSED, pd.NA], dtype="Int64")

    answer = lateness_json(LatenessTally.of(lateness, lateness_points(timedelta(minutes=30))), "2026-03-02",
                           timedelta(minutes=30))

    assert (answer["trades"], answer["closed_when_quiet"], answer["not_judged"]) == (4, 2, 1)
    assert [p["too_late"] for p in answer["curve"]][:3] == [3, 3, 2]  # 1, 2 and 5 minutes
    assert sum(b["trades"] for b in answer["distribution"]) == 2
    assert "2 of them came for windows closed when the input went quiet" in sentence(answer, None)
