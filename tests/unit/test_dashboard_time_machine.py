"""The time machine: the chart as gold stood at an earlier version, through the app's callbacks."""

import json
import re
import time
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest

from dashboard import ids
from dashboard.app import create_app
from dashboard.client import call, store_snapshot
from dashboard.data import VersionReader, data_versions
from dashboard.figures import summary_figure
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import CORRECTIONS, GOLD

UTC = timezone.utc
DAY = datetime(2026, 3, 2, tzinfo=UTC)
PLAY_OUTPUTS = [f"{ids.TM_SLIDER}.value", f"{ids.TM_PLAY_TICK}.disabled", f"{ids.TM_PLAY}.children"]


def gold_rows(windows: dict[str, float], batch: int) -> pa.Table:
    """windows: HH:MM -> buy amount (sell 100, one trade each)."""
    starts = [DAY.replace(hour=int(hm[:2]), minute=int(hm[3:])) for hm in windows]
    buys = list(windows.values())
    return pa.table({
        "window_start": starts, "window_end": [s + timedelta(minutes=15) for s in starts],
        "buy_amount": buys, "sell_amount": [100.0] * len(starts),
        "settlement_amount": [b - 100.0 for b in buys], "trade_count": [1] * len(starts),
        "revision": [1] * len(starts), "updated_at": [datetime.now(UTC)] * len(starts),
        "batch_id": [batch] * len(starts),
    }).cast(GOLD.schema)


def correction(at: datetime) -> pa.Table:
    start = DAY.replace(hour=9, minute=15)
    row = {"window_start": start, "window_end": start + timedelta(minutes=15),
           "buy_amount_before": 200.0, "buy_amount_after": 230.0, "sell_amount_before": 100.0,
           "sell_amount_after": 100.0, "settlement_amount_before": 100.0, "settlement_amount_after": 130.0,
           "trade_count_before": 1, "trade_count_after": 2, "late_trades": 1, "corrected_at": at,
           "watermark": DAY.replace(hour=9), "batch_id": 1, "query_id": "q"}
    return pa.Table.from_pylist([row], schema=CORRECTIONS.schema)


@pytest.fixture
def lake(tmp_path):
    """Gold in three versions: v0 09:00 and 09:15 (buy 200); v1 09:15 corrected to 230 (the
    correction recorded between the two commits); v2 a new window 09:30."""
    lake = Lake(tmp_path)
    lake.publish(GOLD, gold_rows({"09:00": 1000.0, "09:15": 200.0}, 0), Batch("fixture", 0))
    time.sleep(0.01)
    corrected_at = datetime.now(UTC)
    time.sleep(0.01)
    lake.publish(GOLD, gold_rows({"09:15": 230.0}, 1), Batch("fixture", 1))
    lake.publish(CORRECTIONS, correction(corrected_at), Batch("fixture", 0))
    lake.publish(GOLD, gold_rows({"09:30": 50.0}, 2), Batch("fixture", 2))
    return lake


@pytest.fixture
def client(lake):
    return create_app(lake).server.test_client()


def history(client) -> dict:
    return call(client, [f"{ids.TM_HISTORY}.data", f"{ids.TM_SLIDER}.min", f"{ids.TM_SLIDER}.max",
                         f"{ids.TM_SLIDER}.marks"], {f"{ids.TICK}.n_intervals": 1}, {f"{ids.TM_HISTORY}.data": None})


def choose(client, version, versions, live=None) -> tuple[dict | None, str]:
    answer = call(client, [f"{ids.AS_OF}.data", f"{ids.TM_LABEL}.children"],
                  {f"{ids.TM_SLIDER}.value": version, f"{ids.DAY_PICKER}.value": None},
                  {f"{ids.TM_HISTORY}.data": versions, f"{ids.SNAPSHOT}.data": live})
    return answer[ids.AS_OF]["data"], answer[ids.TM_LABEL]["children"]


def as_of_chart(client, past) -> dict:
    return call(client, [f"{ids.AS_OF_CHART}.figure", f"{ids.AS_OF_CHART}.style", f"{ids.CHART}.style"],
                {f"{ids.AS_OF}.data": past, f"{ids.CHART_MODE}.value": ids.MODE_WINDOW,
                 f"{ids.FIRST_REPORTED}.value": []})


def press(client, trigger: str, version, versions, playing: bool = False) -> dict:
    return call(client, PLAY_OUTPUTS, {f"{ids.TM_PLAY}.n_clicks": 1, f"{ids.TM_PLAY_TICK}.n_intervals": 1,
                                       f"{ids.TM_LIVE}.n_clicks": 1},
                {f"{ids.TM_SLIDER}.value": version, f"{ids.TM_PLAY_TICK}.disabled": not playing,
                 f"{ids.TM_HISTORY}.data": versions}, changed=trigger)


def test_the_slider_lists_gold_data_versions_oldest_first_with_their_commit_times(client, lake):
    answer = history(client)
    versions = answer[ids.TM_HISTORY]["data"]
    assert [v for v, _ in versions] == [0, 1, 2]
    commits = {c["version"]: c["timestamp"] for c in lake.history(GOLD)}
    assert all(at == commits[v] for v, at in versions)
    assert answer[ids.TM_SLIDER]["min"] == 0 and answer[ids.TM_SLIDER]["max"] == 2
    assert set(answer[ids.TM_SLIDER]["marks"]) == {"0", "2"}


def test_compactions_are_not_stops_on_the_slider_as_they_change_no_values():
    commits = [{"version": 3, "timestamp": 30, "operation": "OPTIMIZE"},
               {"version": 2, "timestamp": 20, "operation": "MERGE"},
               {"version": 1, "timestamp": 10, "operation": "VACUUM END"},
               {"version": 0, "timestamp": 0, "operation": "WRITE"}]
    assert data_versions(commits) == [[0, 0], [2, 20]]


def test_choosing_an_earlier_version_draws_its_values_by_the_same_figure_code_and_says_as_of(client):
    versions = history(client)[ids.TM_HISTORY]["data"]
    past, label = choose(client, 0, versions)
    at = datetime.fromtimestamp(versions[0][1] / 1000, UTC)
    assert label == f"as of {at:%H:%M:%S} UTC, version 0"
    assert re.fullmatch(r"as of \d\d:\d\d:\d\d UTC, version 0", label)
    drawn = as_of_chart(client, past)
    figure = drawn[ids.AS_OF_CHART]["figure"]
    assert figure["data"] == summary_figure(past)["data"]  # the live chart's figure code
    assert figure["data"][0]["y"] == [1000.0, 200.0]  # before the correction and the 09:30 window
    assert label in json.dumps(figure["layout"]["annotations"])
    assert drawn[ids.CHART]["style"] == {"display": "none"} and drawn[ids.AS_OF_CHART]["style"] == {}


def test_corrections_made_after_the_chosen_version_are_not_shown(client):
    versions = history(client)[ids.TM_HISTORY]["data"]
    before, _ = choose(client, 0, versions)
    assert before["corrections"] == [] and before["counters"]["corrections"] == 0
    figure = as_of_chart(client, before)[ids.AS_OF_CHART]["figure"]
    assert not [t for t in figure["data"] if t["name"] == "Corrected by late trades"]

    after, _ = choose(client, 1, versions)
    assert after["windows"][1]["buy_amount"] == 230.0 and len(after["corrections"]) == 1
    assert len(after["windows"]) == 2  # the 09:30 window came later


def test_live_returns_to_the_current_values(client):
    versions = history(client)[ids.TM_HISTORY]["data"]
    assert press(client, f"{ids.TM_LIVE}.n_clicks", 0, versions, playing=True) == {
        ids.TM_SLIDER: {"value": None}, ids.TM_PLAY_TICK: {"disabled": True}, ids.TM_PLAY: {"children": "Play"}}
    past, label = choose(client, None, versions)
    assert past is None and label == "Live"
    drawn = as_of_chart(client, past)
    assert drawn[ids.CHART]["style"] == {} and drawn[ids.AS_OF_CHART]["style"] == {"display": "none"}
    live = store_snapshot(client)
    assert [w["buy_amount"] for w in live["windows"]] == [1000.0, 230.0, 50.0]


@pytest.mark.parametrize("version", [99, -1, "abc", True, [1]])
def test_a_version_outside_the_history_gives_a_message_not_an_error(client, version):
    versions = history(client)[ids.TM_HISTORY]["data"]
    past, label = choose(client, version, versions)
    assert past is None and "not in gold's history" in label and "versions 0 to 2" in label


def test_choosing_a_version_before_any_history_is_read_says_so(client):
    past, label = choose(client, 1, None)
    assert past is None and label.startswith("No history yet")


def test_play_steps_through_the_versions_and_stops_at_the_newest(client):
    versions = history(client)[ids.TM_HISTORY]["data"]
    tick = f"{ids.TM_PLAY_TICK}.n_intervals"
    started = press(client, f"{ids.TM_PLAY}.n_clicks", None, versions)
    assert started == {ids.TM_SLIDER: {"value": 0}, ids.TM_PLAY_TICK: {"disabled": False},
                       ids.TM_PLAY: {"children": "Pause"}}
    assert press(client, tick, 0, versions, playing=True)[ids.TM_SLIDER]["value"] == 1
    last = press(client, tick, 1, versions, playing=True)
    assert last[ids.TM_SLIDER]["value"] == 2 and last[ids.TM_PLAY_TICK]["disabled"] is True
    paused = press(client, f"{ids.TM_PLAY}.n_clicks", 1, versions, playing=True)
    assert paused == {ids.TM_PLAY_TICK: {"disabled": True}, ids.TM_PLAY: {"children": "Play"}}


def test_reading_a_version_twice_uses_the_cache(lake, monkeypatch):
    reads = []
    original = Lake.read

    def counted(self, table, columns=None, where=None, version=None):
        reads.append(version)
        return original(self, table, columns, where, version)

    monkeypatch.setattr(Lake, "read", counted)
    client = create_app(lake).server.test_client()
    versions = history(client)[ids.TM_HISTORY]["data"]
    first, _ = choose(client, 1, versions)
    again, _ = choose(client, 1, versions)
    assert first == again and reads.count(1) == 1

    reader = VersionReader(lake, size=2)
    for version in (0, 1, 0, 2, 1):
        reader.read(version)
    assert (reader.hits, reader.misses) == (1, 4)  # 1 was the least recently used when 2 came in


def test_old_versions_stay_readable_after_the_writers_compaction(tmp_path):
    lake = Lake(tmp_path)
    for batch in range(21):  # a window per batch; version 20 is compacted by the writer: OPTIMIZE, version 21
        minutes = 9 * 60 + 15 * batch
        lake.publish(GOLD, gold_rows({f"{minutes // 60:02d}:{minutes % 60:02d}": float(batch)}, batch),
                     Batch("fixture", batch))
    assert lake.history(GOLD, 1)[0]["operation"] == "OPTIMIZE"
    client = create_app(lake).server.test_client()
    versions = history(client)[ids.TM_HISTORY]["data"]
    assert [v for v, _ in versions] == list(range(21))
    past, label = choose(client, 3, versions)
    assert [w["buy_amount"] for w in past["windows"]] == [0.0, 1.0, 2.0, 3.0] and label.endswith("version 3")
    past, label = choose(client, 21, versions)
    assert "not in gold's history" in label  # the compaction itself is no stop


def test_a_version_whose_files_were_vacuumed_gives_a_message_not_an_error(tmp_path):
    lake = Lake(tmp_path)
    for batch in range(21):
        minutes = 9 * 60 + 15 * batch
        lake.publish(GOLD, gold_rows({f"{minutes // 60:02d}:{minutes % 60:02d}": float(batch)}, batch),
                     Batch("fixture", batch))
    lake.open(GOLD).vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False)
    lake.publish(GOLD, gold_rows({"09:00": 99.0}, 21), Batch("fixture", 21))  # after the vacuum's own commits
    client = create_app(lake).server.test_client()
    versions = history(client)[ids.TM_HISTORY]["data"]
    past, label = choose(client, 3, versions)
    assert past is None and label == "Version 3 can no longer be read (a vacuum may have removed its files)."
    newest = versions[-1][0]
    assert [v for v, _ in versions[-2:]] == [20, newest]  # OPTIMIZE and the vacuum's commits are no stops
    now, label = choose(client, newest, versions)  # on the compacted files, which the vacuum kept
    assert len(now["windows"]) == 21 and now["windows"][0]["buy_amount"] == 99.0
    assert label.endswith(f"version {newest}")
