"""The page as one screen: what the layout holds where, the tabs, every corrected window marked,
the feed's highlight, messages styled by kind, a switch whose label says its state, a chart that
reads on a phone."""

import json
from datetime import datetime, timedelta, timezone

import pytest
from plotly.utils import PlotlyJSONEncoder

from dashboard import ids
from dashboard.client import call
from dashboard.dash_app import create_app
from dashboard.figures import corrected_windows, summary_figure, window_rows
from dashboard.formatting import message_class
from dashboard.panels import export, producer, reconciliation
from dashboard.panels.corrections_feed import corrections_feed, row_key
from dashboard.panels.tabs import TABS, tab_styles
from tests.unit.test_dashboard_guards import FakeSimulator

UTC = timezone.utc
DAY = "2026-03-02"


def window(hm: str, buy: float, sell: float, count: int, first: tuple[float, float, int] | None = None) -> dict:
    """A store window record; `first`: its buy, sell and count as first reported (else the current ones)."""
    start = datetime.fromisoformat(f"{DAY}T{hm}:00+00:00")
    fb, fs, fc = first or (buy, sell, count)
    return {"window_start": start.isoformat(), "window_end": (start + timedelta(minutes=15)).isoformat(),
            "buy_amount": buy, "sell_amount": sell, "settlement_amount": buy - sell, "trade_count": count,
            "revision": 1, "buy_amount_first": fb, "sell_amount_first": fs, "settlement_amount_first": fb - fs,
            "trade_count_first": fc}


def correction(hm: str, before: float, after: float, at: str) -> dict:
    return {"window_start": f"{DAY}T{hm}:00+00:00", "buy_amount_before": before, "buy_amount_after": after,
            "sell_amount_before": 10.0, "sell_amount_after": 10.0, "settlement_amount_before": before - 10,
            "settlement_amount_after": after - 10, "trade_count_before": 1, "trade_count_after": 2,
            "late_trades": 1, "corrected_at": at}


def walk(node, found: list[str]) -> list[str]:
    """The ids of a layout's components, depth first (page order)."""
    if isinstance(node, dict):
        if isinstance(node.get("props"), dict) and isinstance(node["props"].get("id"), str):
            found.append(node["props"]["id"])
        for value in node.values():
            walk(value, found)
    elif isinstance(node, list):
        for value in node:
            walk(value, found)
    return found


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    return create_app(tmp_path_factory.mktemp("page"))


def test_the_live_view_comes_before_the_tabs_and_every_panel_stays_in_the_page(app):
    page = walk(app.server.test_client().get("/_dash-layout").get_json(), [])
    tabs = page.index(ids.PAGE_TABS)
    for live in (ids.PRODUCER_SWITCH, ids.RATE_INPUT, ids.KPI_CARDS, ids.CHART, ids.AS_OF_CHART,
                 ids.CORRECTIONS_FEED):
        assert page.index(live) < tabs, live
    # Each tab's panel holds its components, in the page whether shown or not.
    for panel, inside in ((ids.TAB_TOO_LATE, ids.LATE_TRADES_LIST), (ids.TAB_QUARANTINE, ids.QUARANTINE_COUNTS),
                          (ids.TAB_TIME_MACHINE, ids.TM_SLIDER), (ids.TAB_TIME_MACHINE, ids.TM_PLAY_TICK),
                          (ids.TAB_RECONCILIATION, ids.RECONCILE_CHECK), (ids.TAB_EXACTLY_ONCE, ids.EXACTLY_ONCE_CHECK),
                          (ids.TAB_HEALTH, ids.KAFKA_LAG), (ids.TAB_SIMULATION, ids.LATE_SHARE_INPUT),
                          (ids.TAB_EXPORT, ids.EXPORT_WINDOWS)):
        following = [p for p, _ in TABS][[p for p, _ in TABS].index(panel) + 1:]
        end = page.index(following[0]) if following else page.index(ids.SNAPSHOT)
        assert page.index(panel) < page.index(inside) < end, (panel, inside)


def test_only_the_chosen_tab_shows_and_anything_else_shows_the_first():
    shown = [i for i, style in enumerate(tab_styles(ids.TAB_HEALTH)) if style.get("display") != "none"]
    assert shown == [[p for p, _ in TABS].index(ids.TAB_HEALTH)]
    for wrong in (None, "nope", 3, ["tab-health"]):
        assert [style.get("display") != "none" for style in tab_styles(wrong)] == [True] + [False] * (len(TABS) - 1)


def test_a_window_clicked_on_the_chart_opens_the_time_machine_tab_with_its_revisions(app):
    client = app.server.test_client()
    answer = call(client, [f"{ids.PAGE_TABS}.value"], {f"{ids.REVISION_WINDOW}.data": f"{DAY}T09:15:00+00:00"})
    assert answer[ids.PAGE_TABS]["value"] == ids.TAB_TIME_MACHINE
    styles = call(client, [f"{panel}.style" for panel, _ in TABS], {f"{ids.PAGE_TABS}.value": ids.TAB_TIME_MACHINE})
    assert [panel for panel, _ in TABS if styles[panel]["style"].get("display") != "none"] == [ids.TAB_TIME_MACHINE]


def test_every_corrected_window_of_the_day_is_marked_also_those_older_than_the_feeds_corrections():
    # 09:00 corrected long ago (the feed's newest corrections no longer reach it): its first values
    # differ from its current ones. 09:15 corrected now, in the feed. 09:30 never corrected.
    snapshot = {"windows": [window("09:00", 1200.0, 10.0, 3, first=(1000.0, 10.0, 2)), window("09:15", 230.0, 10.0, 2),
                            window("09:30", 50.0, 0.0, 1)],
                "corrections": [correction("09:15", 200.0, 230.0, f"{DAY}T10:31:05+00:00")]}
    marker = next(t for t in summary_figure(snapshot)["data"] if t["name"] == "Corrected by late trades")
    assert [x[11:16] for x in marker["x"]] == ["09:00", "09:15"]
    assert marker["hovertext"][0].startswith("09:00 window: first reported buy $1,000.00")
    assert "before the feed's newest corrections" in marker["hovertext"][0]
    assert marker["hovertext"][1] == "09:15 window: buy $200.00 → $230.00 at 10:31:05 UTC, 1 late trade"
    # Running totals mark the same windows.
    running = next(t for t in summary_figure(snapshot, ids.MODE_RUNNING)["data"] if t["name"].startswith("Corrected"))
    assert [x[11:16] for x in running["x"]] == ["09:00", "09:15"]


def test_a_window_never_corrected_and_a_correction_of_another_day_mark_nothing():
    snapshot = {"windows": [window("09:00", 100.0, 10.0, 1)],
                "corrections": [correction("11:00", 1.0, 2.0, f"{DAY}T11:31:05+00:00")]}
    assert corrected_windows(window_rows(snapshot), snapshot["corrections"]) == {}
    assert "Corrected by late trades" not in [t["name"] for t in summary_figure(snapshot)["data"]]


def test_a_drill_down_marks_no_window_even_with_corrections_in_the_snapshot():
    snapshot = {"windows": [window("09:15", 230.0, 10.0, 2)], "drill_down": True,
                "corrections": [correction("09:15", 200.0, 230.0, f"{DAY}T10:31:05+00:00")]}
    assert "Corrected by late trades" not in [t["name"] for t in summary_figure(snapshot)["data"]]


def test_the_feeds_rows_keep_their_ids_and_only_a_correction_made_moments_ago_is_highlighted():
    now = datetime(2026, 3, 2, 10, 31, 12, tzinfo=UTC)
    old = correction("09:00", 100.0, 130.0, f"{DAY}T10:01:05.123456+00:00")
    new = correction("09:15", 200.0, 230.0, f"{DAY}T10:31:05.5+00:00")
    table = corrections_feed({"corrections": [new, old]}, now)
    rows = table.children[1].children
    assert [r.id for r in rows] == [row_key(new), row_key(old)]
    assert [r.className for r in rows] == ["fresh", None]
    assert all("." not in r.id for r in rows)  # Dash ids take no dots
    assert row_key(new) == row_key(dict(new))  # the same id on the next draw
    text = json.dumps(table, cls=PlotlyJSONEncoder, ensure_ascii=False)
    assert "Buy $200.00 → $230.00" in text and "Net $190.00 → $220.00" in text and "Sell" not in text


@pytest.mark.parametrize("text", [
    producer.parse_rate(-5), producer.late_knobs(150, 0, 1, 30, 1), producer.chaos_knobs(0, "x"),
    producer.UNAVAILABLE, producer.SWITCH_INVALID])
def test_a_refused_producer_value_is_styled_as_an_error(text):
    assert message_class(text, producer.ERRORS) == "message error"


@pytest.mark.parametrize("text", [
    "Rate set to 5 trades/s.", f"{producer.RUNNING}.", f"{producer.PAUSED}.",
    producer.late_knobs_message(producer.late_knobs(30, 50, 10, 30, 20)),  # type: ignore[arg-type]
    producer.chaos_knobs_message({"duplicate_share": 0.1, "malformed_share": 0.0})])
def test_what_the_producer_did_is_styled_as_a_success(text):
    assert message_class(text, producer.ERRORS) == "message ok"


def test_reconciliation_and_export_messages_are_styled_by_kind():
    for text in (reconciliation.CHOOSE_WINDOWS, reconciliation.NOT_AVAILABLE, reconciliation.NOTHING_YET,
                 reconciliation.FAILED + "boom"):
        assert message_class(text, reconciliation.ERRORS) == "message error"
    for text in ("Checked 11 windows at 10:00:00 UTC.",
                 "Backfilled 09:00 from silver (recorded as corrections). Checked 11 windows at 10:00:00 UTC."):
        assert message_class(text, reconciliation.ERRORS) == "message ok"
    assert message_class(export.NOTHING_TO_EXPORT, (export.NOTHING_TO_EXPORT,)) == "message error"
    assert message_class("", (export.NOTHING_TO_EXPORT,)) == message_class(None, ()) == "message"


def test_a_message_line_takes_its_class_from_the_message_it_shows(app):
    client = app.server.test_client()
    for text, kind in (("Enter a rate between 0.1 and 100,000 trades per second.", "message error"),
                       ("Rate set to 5 trades/s.", "message ok")):
        answer = call(client, [f"{ids.CONTROL_MESSAGE}.className"], {f"{ids.CONTROL_MESSAGE}.children": text})
        assert answer[ids.CONTROL_MESSAGE]["className"] == kind


def test_the_switch_label_says_the_state_of_the_box():
    assert producer.switch_options(True)[0]["label"].strip() == "Simulation running"
    assert producer.switch_options(False)[0]["label"].strip() == "Simulation paused"
    unavailable = producer.switch_options(None)[0]
    assert unavailable["disabled"] and "running" not in unavailable["label"]
    box = producer.switch_and_rate(False, 5.0).children[0]
    assert box.value == [] and box.options[0]["label"].strip() == "Simulation paused"


def test_unticking_the_box_relabels_it_at_once(tmp_path):
    client = create_app(tmp_path, simulator=FakeSimulator()).server.test_client()
    for value, label in (([], "Simulation paused"), (["on"], "Simulation running")):
        answer = call(client, [f"{ids.PRODUCER_SWITCH}.options"], {f"{ids.PRODUCER_SWITCH}.value": value})
        assert answer[ids.PRODUCER_SWITCH]["options"][0]["label"].strip() == label


def test_the_chart_reads_on_a_phone_level_ticks_a_short_axis_title_and_the_legend_under_the_plot():
    many = {"windows": [window(f"{9 + i // 4:02d}:{i % 4 * 15:02d}", 100.0, 10.0, 1) for i in range(32)]}
    layout = summary_figure(many)["layout"]
    assert layout["xaxis"]["tickangle"] == 0 and layout["xaxis"]["dtick"] is None  # Plotly spaces them for the width
    assert len(layout["xaxis"]["title"]["text"]) <= 36  # "Window start, UTC · Mon 02 Mar 2026"
    assert layout["legend"]["yref"] == "container" and layout["legend"]["y"] == 0  # the mode bar is at the top
    few = summary_figure({"windows": [window("09:00", 1.0, 0.0, 1), window("09:15", 1.0, 0.0, 1)]})["layout"]
    assert few["xaxis"]["dtick"] == 15 * 60 * 1000  # a tick at each window while they fit
    # Two windows hours apart: a tick every 15 minutes would crowd the axis.
    apart = summary_figure({"windows": [window("09:00", 1.0, 0.0, 1), window("15:00", 1.0, 0.0, 1)]})["layout"]
    assert apart["xaxis"]["dtick"] is None
