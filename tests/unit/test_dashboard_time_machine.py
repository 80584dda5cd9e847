"""The time machine over a whole day, from gold's change history: the slider's span, Play at each
speed, Live, the chart at an instant, the ghost of what was first reported, a window's
revisions and the CSV as of an instant (pure functions, and through the app's callbacks)."""

import json
import shutil
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from dashboard import ids
from dashboard.client import call, from_store, store_snapshot
from dashboard.dash_app import create_app
from dashboard.data import history_span
from dashboard.figures import summary_figure
from dashboard.panels.export import export_name, windows_export
from dashboard.panels.time_slider import (
    DEFAULT_SPEED,
    LIVE_LABEL,
    NO_HISTORY,
    PICK_A_WINDOW,
    PLAY_TICK_MS,
    SHOWN,
    clicked_window,
    instant_of,
    is_live,
    next_instant,
    revision_rows,
    slider_marks,
    slider_range,
    speed_of,
)
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import CORRECTIONS, GOLD, SUMMARY_HISTORY
from streaming.medallion.history import LATE, ON_TIME, in_change_order

UTC = timezone.utc
DAY = datetime(2026, 3, 2, tzinfo=UTC)
T0 = datetime(2026, 3, 2, 10, 0, 0, 250_000, tzinfo=UTC)  # the day's first change (a batch's time)
T0_S = int(T0.timestamp())  # the slider's first instant: the second of the first change
FOLLOW_JS = Path(__file__).resolve().parents[2] / "assets" / "time_machine.js"
PLAY_OUTPUTS = [f"{ids.TM_SLIDER}.value", f"{ids.TM_PLAY_TICK}.disabled", f"{ids.TM_PLAY}.children"]


def at(hm: str, day: datetime = DAY) -> datetime:
    return day.replace(hour=int(hm[:2]), minute=int(hm[3:]))


def change(hm: str, buy: float, changed_at: datetime, cause: str, batch: int, day: datetime = DAY) -> dict:
    start = at(hm, day)
    return {"window_start": start, "window_end": start + timedelta(minutes=15), "buy_amount": buy,
            "sell_amount": 100.0, "settlement_amount": buy - 100.0, "trade_count": int(buy // 100),
            "changed_at": changed_at, "cause": cause, "batch_id": batch, "query_id": "q"}


# 2026-03-02: 09:00 and 09:15 on time at T0; 09:15 corrected by a late trade a minute later;
# 09:30 on time two minutes later. 2026-03-01: one window, changed once.
CHANGES = [change("09:00", 1000.0, T0, ON_TIME, 0), change("09:15", 200.0, T0, ON_TIME, 0),
           change("09:15", 230.0, T0 + timedelta(minutes=1), LATE, 1),
           change("09:30", 500.0, T0 + timedelta(minutes=2), ON_TIME, 2)]
PAST_DAY = DAY - timedelta(days=1)
PAST_CHANGES = [change("16:45", 300.0, at("17:00", PAST_DAY), ON_TIME, 0, PAST_DAY)]


def ordered(rows=CHANGES) -> pa.Table:
    return in_change_order(pa.Table.from_pylist(rows, schema=SUMMARY_HISTORY.schema))


def gold_of(rows: list[dict]) -> pa.Table:
    """Gold now: each window's last change."""
    last = {row["window_start"]: row for row in rows}
    return pa.Table.from_pylist([{**{k: v for k, v in row.items() if k in GOLD.schema.names}, "revision": 1,
                                  "updated_at": row["changed_at"]} for row in last.values()], schema=GOLD.schema)


@pytest.fixture
def lake(tmp_path):
    lake = Lake(tmp_path)
    rows = PAST_CHANGES + CHANGES
    for batch in range(3):  # as the gold step writes them: a commit per batch
        lake.publish(SUMMARY_HISTORY, pa.Table.from_pylist([r for r in rows if r["batch_id"] == batch],
                                                           schema=SUMMARY_HISTORY.schema), Batch("q", batch))
    lake.publish(GOLD, gold_of(rows), Batch("fixture", 0))
    correction = {"window_start": at("09:15"), "window_end": at("09:30"), "buy_amount_before": 200.0,
                  "buy_amount_after": 230.0, "sell_amount_before": 100.0, "sell_amount_after": 100.0,
                  "settlement_amount_before": 100.0, "settlement_amount_after": 130.0, "trade_count_before": 2,
                  "trade_count_after": 2, "late_trades": 1, "corrected_at": T0 + timedelta(minutes=1),
                  "watermark": at("09:00"), "batch_id": 1, "query_id": "q"}
    lake.publish(CORRECTIONS, pa.Table.from_pylist([correction], schema=CORRECTIONS.schema), Batch("q", 1))
    return lake


@pytest.fixture
def client(lake):
    return create_app(lake).server.test_client()


CHOOSE_OUTPUTS = [f"{ids.AS_OF}.data", f"{ids.TM_LABEL}.children"]


def choose_state(day=None, high=None, label=None) -> dict:
    """What choose_instant reads besides the slider's value: the day, the slider's max and the label."""
    return {f"{ids.DAY_PICKER}.value": day, f"{ids.TM_SLIDER}.max": high, f"{ids.TM_LABEL}.children": label}


def choose(client, value, day=None, high=None, label=None) -> tuple[dict | None, str]:
    answer = call(client, CHOOSE_OUTPUTS, {f"{ids.TM_CHOSEN}.data": value}, choose_state(day, high, label))
    return answer[ids.AS_OF]["data"], answer[ids.TM_LABEL]["children"]


def as_of_chart(client, past, first_reported: bool = False) -> dict:
    return call(client, [f"{ids.AS_OF_CHART}.figure", f"{ids.AS_OF_CHART}.style", f"{ids.CHART}.style"],
                {f"{ids.AS_OF}.data": past, f"{ids.CHART_MODE}.value": ids.MODE_WINDOW,
                 f"{ids.FIRST_REPORTED}.value": ["on"] if first_reported else []})


def spread(client, live) -> dict:
    return from_store(client, [f"{ids.TM_SLIDER}.{p}" for p in ("min", "max", "marks", "disabled")], live,
                      state={f"{ids.TM_SLIDER}.min": 0, f"{ids.TM_SLIDER}.max": 0, f"{ids.TM_SLIDER}.disabled": True})


def revisions_drawn(client, click, past=None, on_as_of_chart=False) -> str:
    clicked = ids.AS_OF_CHART if on_as_of_chart else ids.CHART
    window = call(client, [f"{ids.REVISION_WINDOW}.data"],
                  {f"{ids.CHART}.clickData": None if on_as_of_chart else click,
                   f"{ids.AS_OF_CHART}.clickData": click if on_as_of_chart else None},
                  changed=f"{clicked}.clickData")[ids.REVISION_WINDOW]["data"]
    drawn = call(client, [f"{ids.REVISIONS}.children"], {f"{ids.REVISION_WINDOW}.data": window,
                                                         f"{ids.AS_OF}.data": past})
    return json.dumps(drawn[ids.REVISIONS]["children"])


# The slider's span and marks

def test_the_slider_spans_the_day_from_its_first_change_to_its_last_in_whole_seconds():
    span = history_span(ordered())
    assert span == [T0_S, T0_S + 120]
    assert instant_of(T0_S, span) == pd.Timestamp("2026-03-02T10:00:00.999999Z")  # the end of that second
    low, high, marks, disabled = slider_range(span)
    assert (low, high, disabled) == (T0_S, T0_S + 120, False)
    assert all(low <= int(mark) <= high for mark in marks) and "10:01:00" in marks.values()


def test_a_day_without_history_gives_a_disabled_slider_and_says_so():
    assert history_span(ordered([])) is None
    assert slider_range(None) == (0, 0, {}, True)
    assert instant_of(T0_S, None) == NO_HISTORY


def test_the_marks_of_a_whole_trading_day_are_round_hours_as_hh_mm():
    nine = int(at("09:00").timestamp())
    marks = slider_marks([nine + 17, nine + 8 * 3600])
    assert list(marks.values()) == ["10:00", "12:00", "14:00", "16:00"]


# Play, Pause, speeds and Live

@pytest.mark.parametrize("speed", [1, 10, 60, 600])
def test_playing_moves_the_instant_on_by_the_tick_times_the_speed(speed):
    span = [T0_S, T0_S + 100_000]
    value, disabled, button = next_instant(ids.TM_PLAY_TICK, T0_S + 5, False, speed, span)
    assert value == T0_S + 5 + PLAY_TICK_MS * speed // 1000 and disabled is False and button == "Pause"


@pytest.mark.parametrize("speed", [1, 10, 60, 600])
def test_playing_stops_at_the_days_last_change(speed):
    span = [T0_S, T0_S + 120]
    assert next_instant(ids.TM_PLAY_TICK, T0_S + 119, False, speed, span) == (T0_S + 120, True, "Play")
    assert next_instant(ids.TM_PLAY_TICK, T0_S + 120, False, speed, span) == (T0_S + 120, True, "Play")


def test_play_starts_at_the_days_first_change_from_live_or_from_the_end_and_pauses():
    span = [T0_S, T0_S + 120]
    assert next_instant(ids.TM_PLAY, None, True, 60, span) == (T0_S, False, "Pause")
    assert next_instant(ids.TM_PLAY, T0_S + 120, True, 60, span) == (T0_S, False, "Pause")
    assert next_instant(ids.TM_PLAY, T0_S + 30, True, 60, span) == (T0_S + 30, False, "Pause")  # goes on from there
    paused = next_instant(ids.TM_PLAY, T0_S + 30, False, 60, span)
    assert paused[1:] == (True, "Play")


def test_a_tick_after_a_pause_moves_nothing():
    assert next_instant(ids.TM_PLAY_TICK, T0_S + 30, True, 60, [T0_S, T0_S + 120])[1:] == (True, "Play")
    assert next_instant(ids.TM_PLAY_TICK, None, True, 60, [T0_S, T0_S + 120])[1:] == (True, "Play")


def test_a_history_spread_over_days_gets_a_few_marks_not_one_a_day():
    nine = int(at("09:00").timestamp())
    assert len(slider_marks([nine, nine + 30 * 86400])) <= 7


@pytest.mark.parametrize("trigger", [ids.TM_LIVE, ids.DAY_PICKER])
def test_live_and_another_day_return_to_the_live_chart_with_the_handle_at_the_right_end(trigger):
    span = [T0_S, T0_S + 120]
    value, disabled, button = next_instant(trigger, T0_S + 30, False, 60, span)
    assert (value, disabled, button) == (T0_S + 120, True, "Play") and is_live(value, span[1])
    assert next_instant(trigger, T0_S + 30, False, 60, None) == (None, True, "Play")  # no history: no end


# Live: the handle at the right end, following the newest instant

def test_none_or_the_right_end_is_live_and_any_instant_before_it_is_not():
    assert is_live(None, T0_S + 120) and is_live(T0_S + 120, T0_S + 120) and is_live(float(T0_S + 120), T0_S + 120)
    assert not is_live(T0_S + 119, T0_S + 120) and not is_live(T0_S, T0_S + 120)
    assert not is_live(T0_S + 120, None) and not is_live("abc", T0_S + 120)  # no max known: only None is Live


def moved(calls: list[tuple]) -> list:
    """What assets/time_machine.js's move(max, value, disabled, label) gives for each call, in one
    page (node; "keep" for no_update): [the slider's new value, the instant passed on]. A call is
    (triggered, max, value, disabled, label), triggered being the props that changed."""
    script = ("const window = {dash_clientside: {no_update: 'keep'}};\n" + FOLLOW_JS.read_text()
              + "\nconst tm = window.dash_clientside.timeMachine;"
                "\nconsole.log(JSON.stringify(JSON.parse(process.argv[1]).map(([triggered, ...args]) => {"
                "\n  window.dash_clientside.callback_context = "
                f"{{triggered: triggered.map(p => ({{prop_id: '{ids.TM_SLIDER}.' + p}}))}};"
                "\n  return tm.move(...args); })));")
    done = subprocess.run(["node", "-e", script, json.dumps(calls)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def followed(calls: list[tuple]) -> list:
    """The slider's value move() gives for each change of its max alone, (max, disabled, value), in Live."""
    return [handle for handle, _ in moved([(["max"], high, value, disabled, LIVE_LABEL)
                                           for high, disabled, value in calls])]


@pytest.mark.skipif(shutil.which("node") is None, reason="node runs the page's follow")
def test_in_live_the_handle_follows_each_new_change_to_the_right_end_and_a_chosen_instant_stays():
    # A new page: no value (dcc.Slider then shows the handle at its min, the left end).
    assert followed([(T0_S + 60, False, None), (T0_S + 120, False, T0_S + 60)]) == [T0_S + 60, T0_S + 120]
    dragged_back = [(T0_S + 60, False, None), (T0_S + 120, False, T0_S + 30), (T0_S + 180, False, T0_S + 30)]
    assert followed(dragged_back) == [T0_S + 60, "keep", "keep"]
    # Live (next_instant) puts the handle at the end: from then on it follows again.
    assert followed([*dragged_back, (T0_S + 240, False, T0_S + 180)])[-1] == T0_S + 240


@pytest.mark.skipif(shutil.which("node") is None, reason="node runs the page's follow")
def test_another_day_moves_the_handle_from_the_old_days_end_to_the_new_days():
    old, new = [T0_S, T0_S + 120], [T0_S - 86400, T0_S - 86400 + 60]
    end = next_instant(ids.DAY_PICKER, T0_S + 30, True, 60, old)[0]  # the old day's right end
    assert followed([(old[1], False, None), (new[1], False, end)]) == [old[1], new[1]]
    # Through a day without history (a disabled slider, 0 to 0) the handle waits for the next day's end.
    assert followed([(old[1], False, None), (0, True, end), (new[1], False, end)]) == [old[1], "keep", new[1]]


@pytest.mark.skipif(shutil.which("node") is None, reason="node runs the page's move")
def test_the_handle_following_in_live_passes_nothing_on_and_a_chosen_instant_is_passed_on():
    first, second = T0_S + 60, T0_S + 120
    assert moved([(["max"], first, None, False, LIVE_LABEL)]) == [[first, "keep"]]
    # Dragged back: the instant goes to the server; the next new end leaves it there, and sends nothing.
    assert moved([(["max"], first, None, False, LIVE_LABEL), (["value"], first, T0_S + 30, False, LIVE_LABEL),
                  (["max"], second, T0_S + 30, False, "as of")]) == [[first, "keep"], ["keep", T0_S + 30],
                                                                      ["keep", "keep"]]
    # Dragged while the end moves: the drag is passed on.
    assert moved([(["max"], first, None, False, LIVE_LABEL),
                  (["max", "value"], second, T0_S + 30, False, LIVE_LABEL)])[-1] == ["keep", T0_S + 30]
    # Back at the end while the label still shows an instant: Live is passed on, for the label.
    assert moved([(["max"], first, None, False, LIVE_LABEL), (["value"], first, first, False, "as of")])[-1] == [
        "keep", first]


def test_the_right_end_shows_the_live_chart_and_a_step_back_the_day_as_it_stood(client):
    assert choose(client, T0_S + 120, high=T0_S + 120) == (None, LIVE_LABEL)
    past, label = choose(client, T0_S + 60, high=T0_S + 120)
    assert past is not None and label == f"as of 2026-03-02 {datetime.fromtimestamp(T0_S + 60, UTC):%H:%M:%S} UTC"


def test_the_handle_following_new_changes_in_live_sends_nothing_new(client):
    # Each new change moves the handle in Live: the as-of chart and revisions are not redrawn for it.
    answer = call(client, CHOOSE_OUTPUTS, {f"{ids.TM_SLIDER}.value": T0_S + 120},
                  choose_state(high=T0_S + 120, label=LIVE_LABEL))
    assert answer == {}


@pytest.mark.parametrize("value", [None, 0, 7, "600", True, 600.0])
def test_a_speed_other_than_1_10_60_or_600_plays_at_the_default(value):
    assert speed_of(value) == (600 if value == 600.0 else DEFAULT_SPEED)


@pytest.mark.parametrize("value", [T0_S - 1, T0_S + 121, "abc", True, [1]])
def test_an_instant_outside_the_days_history_gives_a_message_not_an_error(client, value):
    past, label = choose(client, value)
    assert past is None and "not an instant of this day's history" in label and "10:00:00 to 10:02:00" in label


# The chart at an instant

def test_an_instant_draws_the_day_as_it_stood_then_by_the_same_figure_code(client):
    past, label = choose(client, T0_S)
    assert label == f"as of 2026-03-02 {datetime.fromtimestamp(T0_S, UTC):%H:%M:%S} UTC"
    assert [(w["window_start"][11:16], w["buy_amount"], w["revision"]) for w in past["windows"]] == [
        ("09:00", 1000.0, 1), ("09:15", 200.0, 1)]  # before the correction and the 09:30 window
    assert past["corrections"] == [] and past["counters"]["corrections"] == 0
    drawn = as_of_chart(client, past)
    figure = drawn[ids.AS_OF_CHART]["figure"]
    assert figure["data"] == summary_figure(past)["data"]  # the live chart's figure code
    assert label in json.dumps(figure["layout"]["annotations"])
    assert drawn[ids.CHART]["style"] == {"display": "none"} and drawn[ids.AS_OF_CHART]["style"] == SHOWN


def test_after_the_correction_the_chart_shows_it_and_its_ghost_as_first_reported(client):
    past, _ = choose(client, T0_S + 60)
    corrected = past["windows"][1]
    assert (corrected["buy_amount"], corrected["buy_amount_first"], corrected["revision"]) == (230.0, 200.0, 2)
    assert len(past["windows"]) == 2 and len(past["corrections"]) == 1
    figure = as_of_chart(client, past, first_reported=True)[ids.AS_OF_CHART]["figure"]
    names = [trace["name"] for trace in figure["data"]]
    assert "Corrected by late trades" in names and "Buy as first reported" in names


def test_a_past_day_picked_is_played_back_over_its_own_changes(client):
    live = store_snapshot(client, day="2026-03-01")
    span = live["history_span"]
    assert span == [int(at("17:00", PAST_DAY).timestamp())] * 2
    answer = spread(client, live)
    assert answer[ids.TM_SLIDER]["min"] == span[0] and answer[ids.TM_SLIDER]["disabled"] is False
    past, label = choose(client, span[0], day="2026-03-01")
    assert past["day"] == "2026-03-01" and [w["buy_amount"] for w in past["windows"]] == [300.0]
    assert label == "as of 2026-03-01 17:00:00 UTC"


def test_live_returns_to_the_current_values(client):
    past, label = choose(client, None)
    assert past is None and label == "Live"
    drawn = as_of_chart(client, past)
    assert drawn[ids.CHART]["style"] == SHOWN and drawn[ids.AS_OF_CHART]["style"] == {"display": "none"}
    assert [w["buy_amount"] for w in store_snapshot(client)["windows"]] == [1000.0, 230.0, 500.0]


def test_the_live_ghost_as_first_reported_comes_from_the_history(client):
    live = store_snapshot(client)
    assert [(w["buy_amount"], w["buy_amount_first"]) for w in live["windows"]] == [
        (1000.0, 1000.0), (200.0 + 30.0, 200.0), (500.0, 500.0)]
    assert live["history_span"] == [T0_S, T0_S + 120]


# A window's revisions

def test_the_revision_rows_of_a_window_are_its_changes_oldest_first_later_ones_marked():
    rows = revision_rows(ordered(), "2026-03-02T09:15:00+00:00", instant_of(T0_S, history_span(ordered())))
    assert [(r["buy"], r["sell"], r["net"], r["trades"], r["cause"], r["later"]) for r in rows] == [
        (200.0, 100.0, 100.0, 2, ON_TIME, False), (230.0, 100.0, 130.0, 2, LATE, True)]
    assert rows[0]["changed_at"] == T0.isoformat()
    assert [r["later"] for r in revision_rows(ordered(), "2026-03-02T09:15:00+00:00")] == [False, False]


def test_a_click_gives_the_window_from_customdata_or_plotlys_zoneless_x():
    assert clicked_window({"points": [{"x": "2026-03-02 09:15", "customdata": "2026-03-02T09:15:00+00:00"}]}) \
        == "2026-03-02T09:15:00+00:00"
    assert clicked_window({"points": [{"x": "2026-03-02 09:15"}]}) == "2026-03-02T09:15:00+00:00"
    assert clicked_window({"points": [{"customdata": 5, "x": "2026-03-02 09:30"}]}) == "2026-03-02T09:30:00+00:00"
    for junk in (None, {}, {"points": []}, {"points": ["x"]}, {"points": [{"x": "soon"}]}):
        assert clicked_window(junk) is None


def test_clicking_a_window_on_the_live_chart_lists_each_of_its_changes(client):
    live = store_snapshot(client)
    figure = summary_figure(live)
    click = {"points": [{"x": "2026-03-02 09:15", "customdata": figure["data"][0]["customdata"][1]}]}
    text = revisions_drawn(client, click)
    assert "2026-03-02 09:15 window: 2 changes" in text
    assert "$200.00" in text and "$230.00" in text and "on time" in text and "late trades" in text


def test_clicking_a_window_on_the_chart_at_an_instant_fades_the_changes_made_after_it(client):
    past, _ = choose(client, T0_S)
    text = revisions_drawn(client, {"points": [{"x": "2026-03-02 09:15"}]}, past, on_as_of_chart=True)
    assert "1 of 2 changes made by 10:00:00 UTC" in text and "after-instant" in text


def test_before_any_click_the_revisions_panel_says_how_to_choose_a_window(client):
    page = json.dumps(client.get("/_dash-layout").get_json())
    assert PICK_A_WINDOW in page and ids.REVISIONS in page


# The CSV as of an instant

def test_the_windows_csv_as_of_an_instant_is_named_after_the_instant_and_holds_its_windows(client):
    assert export_name("2026-03-02", "windows", pd.Timestamp("2026-03-02T10:42:00Z")) == \
        "trade-summary-2026-03-02-windows-as-of-10-42-00.csv"
    live = store_snapshot(client)
    past, _ = choose(client, T0_S)
    content, name = windows_export(live, past)
    assert name == f"trade-summary-2026-03-02-windows-as-of-{datetime.fromtimestamp(T0_S, UTC):%H-%M-%S}.csv"
    assert [line.split(",")[2] for line in content.splitlines()[1:]] == ["1000.0", "200.0"]
    content, name = windows_export(live, None)  # Live: the live windows
    assert name == "trade-summary-2026-03-02-windows.csv" and len(content.splitlines()) == 4
