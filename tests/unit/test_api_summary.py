"""GET /api/summary on a real Delta history: a day's windows as they stood at an instant, and
a clear 400 for each bad parameter."""

from datetime import datetime, timezone

import pandas as pd
import pyarrow as pa
import pytest

from dashboard.api import BadRequest, parse_instant, summary_json, summary_parameters
from dashboard.dash_app import create_app
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import GOLD, SUMMARY_HISTORY
from streaming.medallion.history import LATE, ON_TIME, change_rows
from streaming.run.health import newest_watermark

NINE = pd.Timestamp("2026-03-02 09:00", tz="UTC")


def window(start: pd.Timestamp, buy: float, sell: float, count: int) -> pd.DataFrame:
    return pd.DataFrame([{"window_start": start, "window_end": start + pd.Timedelta(minutes=15), "buy_amount": buy,
                          "sell_amount": sell, "settlement_amount": buy - sell, "trade_count": count}])


def arrow(frame: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(frame, preserve_index=False)


@pytest.fixture
def client(tmp_path):
    """A lake whose 09:00 window of 2026-03-02 changed at 12:00 (on time) and 12:05 (late), and
    whose 2026-03-03 has one window; and the dashboard's server over it."""
    lake = Lake(tmp_path / "data")
    changes = [(NINE, "12:00", 10.0, 4.0, 2, ON_TIME), (NINE, "12:05", 15.0, 4.0, 3, LATE),
               (NINE + pd.Timedelta(days=1), "12:10", 1.0, 0.0, 1, ON_TIME)]
    for batch, (start, hhmm, buy, sell, count, cause) in enumerate(changes):
        changed_at = pd.Timestamp(f"2026-03-02 {hhmm}", tz="UTC").to_pydatetime()
        change = change_rows(arrow(pd.DataFrame()), arrow(window(start, buy, sell, count)), cause, changed_at, "q",
                             batch)
        lake.publish(SUMMARY_HISTORY, change, Batch("q", batch))
        gold = window(start, buy, sell, count).assign(revision=1, updated_at=changed_at, batch_id=batch)
        lake.publish(GOLD, pa.Table.from_pandas(gold, preserve_index=False), Batch("q", batch))
    return create_app(lake).server.test_client()


def test_the_windows_of_a_day_as_they_stood_at_an_instant(client):
    answer = client.get("/api/summary?day=2026-03-02&as_of=2026-03-02T12:03:00Z")
    assert answer.status_code == 200
    assert answer.get_json() == {"day": "2026-03-02", "as_of": "2026-03-02T12:03:00Z", "windows": [{
        "window_start": "2026-03-02T09:00:00Z", "window_end": "2026-03-02T09:15:00Z", "buy": 10.0, "sell": 4.0,
        "net": 6.0, "trades": 2, "changed_at": "2026-03-02T12:00:00Z", "cause": ON_TIME, "final": False}]}
    later = client.get("/api/summary?day=2026-03-02&as_of=2026-03-02T13:05:00%2B01:00").get_json()
    assert (later["as_of"], later["windows"][0]["buy"], later["windows"][0]["cause"]) == (
        "2026-03-02T12:05:00Z", 15.0, LATE)
    assert client.get("/api/summary?day=2026-03-02&as_of=2026-03-02T11:00:00Z").get_json()["windows"] == []


def test_without_parameters_it_is_the_newest_day_now(client):
    answer = client.get("/api/summary").get_json()
    assert answer["day"] == "2026-03-03" and [w["trades"] for w in answer["windows"]] == [1]
    assert datetime.fromisoformat(answer["as_of"]) <= datetime.now(timezone.utc)
    assert client.get("/api/summary?day=2026-03-02").get_json()["windows"][0]["buy"] == 15.0
    assert client.get("/api/summary?day=2025-01-01").get_json()["windows"] == []  # a day without data


@pytest.mark.parametrize("query, says", [
    ("day=2026-3-2", "day must be a date as YYYY-MM-DD"),
    ("day=yesterday", "day must be a date as YYYY-MM-DD"),
    ("day=2026-02-30", "day must be a date as YYYY-MM-DD"),
    ("as_of=noon", "as_of must be an ISO-8601 time"),
    ("as_of=", "as_of must be an ISO-8601 time"),
    ("day=2026-03-02&day=2026-03-03", "day is given 2 times"),
    ("date=2026-03-02", "Unknown parameter 'date'"),
])
def test_a_bad_parameter_gets_a_400_saying_what_is_wrong(client, query, says):
    answer = client.get(f"/api/summary?{query}")
    assert answer.status_code == 400
    assert says in answer.get_json()["error"]


def test_the_api_is_behind_the_host_guard(client):
    assert client.get("/api/summary", headers={"Host": "evil.example:8050"}).status_code == 403


def test_an_offset_sent_with_an_unencoded_plus_is_read_as_one():
    assert parse_instant("2026-03-02T13:00:00 01:00") == datetime(2026, 3, 2, 12, tzinfo=timezone.utc)
    assert parse_instant("2026-03-02T12:00:00") == datetime(2026, 3, 2, 12, tzinfo=timezone.utc)
    with pytest.raises(BadRequest):
        summary_parameters({"as_of": ["2026-03-02 noon"]})


def test_a_window_is_final_once_the_watermark_has_passed_its_end():
    windows_now = pd.concat([window(NINE, 1.0, 0.0, 1), window(NINE + pd.Timedelta(minutes=15), 2.0, 0.0, 1)])
    noon = datetime(2026, 3, 2, 12, tzinfo=timezone.utc)
    history = change_rows(arrow(pd.DataFrame()), arrow(windows_now), ON_TIME, noon, "q", 0)
    at = datetime(2026, 3, 2, 13, tzinfo=timezone.utc)
    watermark = parse_instant("2026-03-02T09:20:00Z")

    windows = summary_json(history, "2026-03-02", at, watermark)["windows"]

    assert [(w["window_start"][11:16], w["final"]) for w in windows] == [("09:00", True), ("09:15", False)]
    assert newest_watermark({"queries": [{"watermark": "2026-03-02T09:20:00Z"}, {"watermark": None}]}) == watermark
    assert not any(w["final"] for w in summary_json(history, "2026-03-02", at, None)["windows"])
