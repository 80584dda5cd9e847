"""The dashboard in a real browser: Debian's Chromium driven headless by Playwright, against
`python run.py` on free ports. Screenshots of each state go to test-artifacts/ (not in git).

Chromium comes from tests/install-browser.sh (part of the README's test command)."""

import json
import os
import re
import shutil
import time
import urllib.request
from datetime import datetime, timedelta, timezone

import pytest

from dashboard.figures import CHART_HEIGHT
from tests.support.corpus import trade
from tests.support.kafka import TopicWriter, free_port
from tests.support.process import ARTIFACTS, RunPy
from tests.support.waiting import wait_for

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# The flags this machine needs: no sandbox as root, and no background calls to the closed network.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-sync", "--disable-quic"]
# Today: within a day of the records' Kafka time, so no trade is quarantined as a jump in time.
DAY = datetime.now(timezone.utc).strftime("%Y-%m-%dT")


def eve_of(day: str) -> str:
    """The day before `day` (DAY, read once): a test running across midnight keeps its two days apart."""
    return (datetime.fromisoformat(day[:10]) - timedelta(days=1)).strftime("%Y-%m-%d")


# Skipped on a developer's machine without Chromium; in CI (which installs it) a missing browser fails.
pytestmark = pytest.mark.skipif(shutil.which("chromium") is None and not os.environ.get("CI"),
                                reason="Debian chromium is missing: run `bash tests/install-browser.sh`")


def wait_for_text(page, selector: str, text: str, timeout: float = 30_000) -> None:
    """Wait until the element shows the text; Dash renders the layout after the page loads,
    so the element may not exist yet."""
    page.wait_for_function("([selector, text]) => (document.querySelector(selector)?.innerText || '').includes(text)",
                           arg=[selector, text], timeout=timeout)


class RunningApp:
    def __init__(self, tmp_path, *flags):
        self.broker_port, self.web_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.web_port}/"
        self.data = tmp_path / "data"
        self.process = RunPy("--data-dir", str(self.data), "--broker-port", str(self.broker_port),
                             "--port", str(self.web_port), "--refresh-ms", "1000", *flags)
        self.process.wait_for_line(f"dashboard at http://127.0.0.1:{self.web_port}", timeout_s=180)
        self.writer = TopicWriter(f"127.0.0.1:{self.broker_port}", "trades")

    def stop(self):
        try:
            code, _ = self.process.terminate()
            assert code == 0, self.process.output
        finally:
            self.process.kill()


@pytest.fixture(scope="module")
def quiet_app(tmp_path_factory):
    """One app with the producer simulation off: the tests produce their own trades."""
    app = RunningApp(tmp_path_factory.mktemp("browser"), "--no-producer")
    yield app
    app.stop()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, request):
    """A fresh page that records console errors; its screenshot is saved at the end."""
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    tab = context.new_page()
    tab.console_errors = []
    tab.on("console", lambda message: tab.console_errors.append(message.text) if message.type == "error" else None)
    tab.on("pageerror", lambda error: tab.console_errors.append(str(error)))
    yield tab
    ARTIFACTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / f"browser-{request.node.name}.png"), full_page=True)
    context.close()


def open_tab(page, label: str) -> None:
    """Click a tab under the chart, and wait for its panel."""
    page.click(f"#page-tabs label:has-text('{label}')")
    page.wait_for_selector(f"#page-tabs label.selected:has-text('{label}')")


def classes(page, selector: str) -> list[str]:
    return page.eval_on_selector(selector, "element => Array.from(element.classList)")


def chart_traces(page) -> list[str]:
    return page.evaluate("""() => {
        const plot = document.querySelector('#trade-summary-chart .js-plotly-plot');
        return plot && plot.data ? plot.data.map(t => t.name) : [];
    }""")


def sent_count(page) -> int:
    match = re.search(r"sent ([\d,]+)", page.inner_text("#status-line"))
    return int(match.group(1).replace(",", "")) if match else -1


def test_page_loads_with_title_kpi_cards_and_a_chart_of_three_lines(quiet_app, page):
    quiet_app.writer.send(trade("b1", "BUY", 10, 100.0, DAY + "09:01:00Z"),
                          trade("b2", "SELL", 4, 50.0, DAY + "09:17:00Z"))
    page.goto(quiet_app.url)
    assert page.title() == "Trade Summary"
    page.wait_for_selector("#kpi-cards .kpi")
    assert page.locator("#kpi-cards .kpi").count() == 6
    assert "total buy" in page.inner_text("#kpi-cards").lower()
    traces = wait_for(lambda: chart_traces(page) or None, 90, what="the chart's lines")
    assert traces[:3] == ["Total buy", "Total sell", "Settlement (buy − sell)"]
    wait_for_text(page, "#kpi-cards", "$")
    # The health panel's tables, Markdown rendered as tables: a row per query, a row per partition.
    open_tab(page, "Health")
    wait_for_text(page, "#health-queries table tbody", "active", timeout=30_000)
    assert page.inner_text("#health-queries table thead").split("\t")[:2] == ["Query", "Status"]
    wait_for_text(page, "#kafka-lag table tbody", "total", timeout=30_000)
    assert page.console_errors == []
    assert page.locator(".dash-debug-menu, .dash-fe-error__title").count() == 0  # no debug UI


def test_a_late_trade_sent_to_kafka_shows_up_as_a_correction_and_a_too_late_one_in_its_list(quiet_app, page):
    page.goto(quiet_app.url)
    quiet_app.writer.send(trade("c1", "BUY", 1, 100.0, DAY + "10:16:00Z"),
                          trade("c2", "BUY", 1, 5.0, DAY + "10:40:00Z"))
    # Event time reached 10:40, so the watermark is 10:10 and the 10:15 window is past.
    wait_for_text(page, "#status-line", "Watermark " + DAY[:10] + " 10:10", timeout=90_000)
    quiet_app.writer.send(trade("c3-late", "BUY", 1, 30.0, DAY + "10:20:00Z"),
                          trade("c4-too-late", "SELL", 1, 7.0, DAY + "09:05:00Z"))
    wait_for_text(page, "#corrections-feed", "$130.00", timeout=90_000)
    feed = page.inner_text("#corrections-feed")
    assert "10:15" in feed and "$100.00 → $130.00" in feed
    assert page.locator("#corrections-feed tr.fresh").count() >= 1  # the new row, highlighted as it appears
    open_tab(page, "Too late")
    wait_for_text(page, "#late-trades-list", "c4-too-late", timeout=90_000)
    assert "Corrected by late trades" in chart_traces(page)
    assert page.console_errors == []


def test_an_invalid_control_value_shows_a_message(quiet_app, page):
    page.goto(quiet_app.url)
    page.fill("#rate-input", "-5")
    page.click("#rate-apply")
    wait_for_text(page, "#control-message", "Enter a rate between")
    page.wait_for_selector("#control-message.error")
    open_tab(page, "Simulation")
    page.fill("#late-share-input", "150")
    page.click("#late-apply")
    wait_for_text(page, "#late-message", "between 0 and 100")
    page.wait_for_selector("#late-message.error")
    assert page.console_errors == []


def test_the_producer_switch_starts_and_stops_the_trades(tmp_path, page):
    app = RunningApp(tmp_path, "--no-producer", "--rate", "50", "--clock-speed", "600")
    try:
        page.goto(app.url)
        assert sent_count(page) in (0, -1)
        assert page.inner_text("#producer-switch").strip() == "Simulation paused"  # the box is not ticked
        page.click("#producer-switch input[type=checkbox]")
        wait_for_text(page, "#control-message", "Simulation running")
        wait_for_text(page, "#producer-switch", "Simulation running")
        # A success reads differently from an error: its own class and colour.
        page.wait_for_selector("#control-message.ok")
        ok_colour = page.eval_on_selector("#control-message", "e => getComputedStyle(e).color")
        # Data appears on the page within a bound: trades counted on the KPI card.
        page.wait_for_function("""() => {
            const cards = document.querySelector('#kpi-cards')?.innerText || '';
            return /Trades counted\\s*[1-9]/i.test(cards);
        }""", timeout=120_000)
        page.click("#producer-switch input[type=checkbox]")
        wait_for_text(page, "#control-message", "Simulation paused")
        wait_for_text(page, "#producer-switch", "Simulation paused")
        assert "running" not in page.inner_text("#producer-switch")
        page.fill("#rate-input", "0")
        page.click("#rate-apply")
        page.wait_for_selector("#control-message.error")
        assert page.eval_on_selector("#control-message", "e => getComputedStyle(e).color") != ok_colour
        page.wait_for_timeout(2500)  # the last trades in flight are acknowledged
        stopped_at = sent_count(page)
        page.wait_for_timeout(4000)
        assert sent_count(page) == stopped_at > 0
        assert page.console_errors == []
    finally:
        app.stop()


def test_bad_records_sent_to_kafka_raise_the_quarantine_counts(quiet_app, page):
    page.goto(quiet_app.url)
    open_tab(page, "Quarantine")
    page.wait_for_selector("#quarantine-counts")
    quiet_app.writer.send(b"{not json", b"[1, 2]", b"\xff\xfe not utf-8")
    wait_for_text(page, "#quarantine-counts", "value is not valid UTF-8", timeout=90_000)
    counts = page.inner_text("#quarantine-counts")
    assert "value is not a JSON object" in counts
    wait_for_text(page, "#quarantine-list", "[1, 2]")
    assert page.console_errors == []


def test_the_shown_days_windows_download_as_csv(quiet_app, page):
    quiet_app.writer.send(trade("d1", "BUY", 2, 21.0, DAY + "11:02:00Z"))
    page.goto(quiet_app.url)
    wait_for_text(page, "#kpi-cards", "$", timeout=90_000)
    wait_for(lambda: "11:00" in page.inner_text("#trade-summary-chart") or None, 90, interval_s=1,
             what="the 11:00 window on the chart")
    open_tab(page, "Export")
    with page.expect_download() as download:
        page.click("#export-windows")
    assert download.value.suggested_filename == f"trade-summary-{DAY[:10]}-windows.csv"
    text = open(download.value.path(), encoding="utf-8").read()
    header, *rows = text.splitlines()
    assert header.startswith("window_start,window_end,buy,sell,settlement,trade_count")
    assert any(row.startswith(DAY + "11:00:00") and row.split(",")[2] == "42" for row in rows), text
    assert page.console_errors == []


def summary(app: RunningApp, day: str) -> dict:
    """GET /api/summary of a day: its windows as they stand now, from gold's history."""
    with urllib.request.urlopen(f"{app.url}api/summary?day={day}", timeout=10) as answer:
        return json.load(answer)


def buys(page, chart: str) -> list[float]:
    return page.evaluate("""(chart) => {
        const plot = document.querySelector('#' + chart + ' .js-plotly-plot');
        return plot && plot.data && plot.data.length ? Array.from(plot.data[0].y) : [];
    }""", chart)


def click_window(page, chart: str, window: str) -> None:
    """Click the buy line's point of a window (its start, UTC ISO) on a chart, as a user would."""
    x, y = page.evaluate("""([chart, window]) => {
        const plot = document.querySelector('#' + chart + ' .js-plotly-plot');
        const trace = plot.data[0], i = Array.from(trace.customdata).indexOf(window);
        const xa = plot._fullLayout.xaxis, ya = plot._fullLayout.yaxis, box = plot.getBoundingClientRect();
        return [box.left + xa._offset + xa.d2p(trace.x[i]), box.top + ya._offset + ya.d2p(trace.y[i])];
    }""", [chart, window])
    page.mouse.move(x, y)
    page.mouse.click(x, y)
    page.mouse.move(0, 0)  # the hover label would cover the controls under the chart


def test_the_time_machine_plays_back_a_past_day_and_a_clicked_window_shows_its_revisions(tmp_path, page):
    app = RunningApp(tmp_path, "--no-producer")
    past = eve_of(DAY)
    window = f"{past}T20:15:00+00:00"
    try:
        # Yesterday's 20:15 window in one batch; event time reached 20:40, so the watermark is 20:10
        # and a trade at 20:20 in another batch corrects the window, which is past.
        app.writer.send(trade("y1", "BUY", 1, 100.0, f"{past}T20:16:00Z"),
                        trade("y2", "BUY", 1, 5.0, f"{past}T20:40:00Z"))
        first = wait_for(lambda: len(summary(app, past)["windows"]) == 2 and summary(app, past), 120, interval_s=1,
                         what="yesterday's windows")
        # The slider steps in whole seconds: the correction comes at least one after.
        changed_at = max(datetime.fromisoformat(w["changed_at"]) for w in first["windows"])
        time.sleep(max(0.0, (changed_at - datetime.now(timezone.utc)).total_seconds() + 1.2))
        app.writer.send(trade("y3-late", "BUY", 1, 30.0, f"{past}T20:20:00Z"))
        wait_for(lambda: summary(app, past)["windows"][0]["buy"] == 130.0, 60, interval_s=1, what="the correction")
        app.writer.send(trade("t1", "BUY", 1, 7.0, DAY + "00:05:00Z"))  # today: yesterday becomes a past day
        wait_for(lambda: summary(app, DAY[:10])["windows"], 60, interval_s=1, what="today's window")

        page.goto(app.url)
        wait_for_text(page, "#kpi-cards", "$", timeout=90_000)
        page.click("#day-picker")
        page.get_by_role("option", name=datetime.fromisoformat(past).strftime("%a %d %b %Y")).click()
        open_tab(page, "Time machine")
        page.wait_for_function(  # the slider spans yesterday's three changes (today has one)
            "() => { const s = document.querySelector('.time-machine-slider [role=slider]');"
            " return s && Number(s.getAttribute('aria-valuemax')) > Number(s.getAttribute('aria-valuemin')); }",
            timeout=60_000)
        page.locator(".time-machine-slider [role=slider]").first.focus()
        page.keyboard.press("Home")  # the day's first change: before the late trade
        wait_for_text(page, "#time-machine-label", "as of", timeout=30_000)
        page.wait_for_selector("#as-of-chart", state="visible", timeout=30_000)  # in the live chart's place
        page.wait_for_selector("#trade-summary-chart", state="hidden", timeout=30_000)
        wait_for(lambda: buys(page, "as-of-chart") == [100.0, 5.0] or None, 30, what="the window before its correction")

        click_window(page, "as-of-chart", window)
        wait_for_text(page, "#window-revisions", "20:15 window: 1 of 2 changes made by", timeout=30_000)
        revisions = page.inner_text("#window-revisions")
        assert "$100.00" in revisions and "$130.00" in revisions and "late trades" in revisions

        page.check("#time-machine-speed input[value='600']")
        page.click("#time-machine-play")  # to the day's last change, where it stops: Live, the day as it is
        wait_for_text(page, "#time-machine-label", "Live", timeout=30_000)
        page.wait_for_selector("#trade-summary-chart", state="visible", timeout=30_000)
        wait_for(lambda: buys(page, "trade-summary-chart") == [130.0, 5.0] or None, 30,
                 what="the played-back correction")
        wait_for_text(page, "#time-machine-play", "Play", timeout=30_000)
        wait_for_text(page, "#window-revisions", "20:15 window: 2 changes", timeout=30_000)

        page.click("#time-machine-live")
        wait_for_text(page, "#time-machine-label", "Live", timeout=30_000)
        page.wait_for_selector("#trade-summary-chart", state="visible", timeout=30_000)
        open_tab(page, "Health")
        click_window(page, "trade-summary-chart", window)  # the live chart of the day picked
        page.wait_for_selector("#window-revisions", state="visible", timeout=30_000)  # its tab opens
        wait_for_text(page, "#window-revisions", "20:15 window: 2 changes", timeout=30_000)
        assert page.console_errors == []
    finally:
        app.stop()


def lateness(app: RunningApp, day: str) -> dict:
    """GET /api/lateness of a day."""
    with urllib.request.urlopen(f"{app.url}api/lateness?day={day}", timeout=10) as answer:
        return json.load(answer)


def test_the_lateness_tab_draws_follows_each_push_and_its_sentence_follows_the_day(tmp_path, page):
    app = RunningApp(tmp_path, "--no-producer")
    past = eve_of(DAY)
    try:
        # Each day: a trade at 10:00 moves the front, then trades behind it in later batches.
        for day, behind in ((past, (45,)), (DAY[:10], (1, 60))):
            front = datetime.fromisoformat(f"{day}T10:00:00+00:00")
            app.writer.send(trade(f"{day}-front", "BUY", 1, 10.0, f"{day}T10:00:00Z"))
            wait_for(lambda d=day: lateness(app, d)["trades"] == 1, 120, interval_s=1, what=f"{day}'s front")
            app.writer.send(*(trade(f"{day}-{m}", "SELL", 1, 10.0,
                                    (front - timedelta(minutes=m)).strftime("%Y-%m-%dT%H:%M:%SZ")) for m in behind))
            wait_for(lambda d=day, n=len(behind): lateness(app, d)["trades"] == 1 + n, 120, interval_s=1,
                     what=f"{day}'s later trades")

        page.goto(app.url)
        wait_for_text(page, "#kpi-cards", "$", timeout=90_000)
        open_tab(page, "Lateness")
        wait_for_text(page, "#lateness-sentence", "1 of 3 trades (33.333%) were too late", timeout=60_000)
        page.wait_for_selector("#lateness-curve .js-plotly-plot .scatterlayer .trace")
        page.wait_for_selector("#lateness-distribution .js-plotly-plot .barlayer .trace")
        # The open tab follows each push: one more trade too late, and its sentence says so.
        today = datetime.fromisoformat(f"{DAY[:10]}T10:00:00+00:00")
        app.writer.send(trade(f"{DAY[:10]}-90", "SELL", 1, 10.0,
                              (today - timedelta(minutes=90)).strftime("%Y-%m-%dT%H:%M:%SZ")))
        wait_for_text(page, "#lateness-sentence", "2 of 4 trades (50.000%) were too late", timeout=60_000)
        page.click("#day-picker")
        page.get_by_role("option", name=datetime.fromisoformat(past).strftime("%a %d %b %Y")).click()
        wait_for_text(page, "#lateness-sentence", f"{past}: with 30 minutes, 1 of 2 trades (50.000%) were too late",
                      timeout=60_000)
        assert page.console_errors == []
    finally:
        app.stop()


def test_the_exactly_once_panel_counts_on_demand(quiet_app, page):
    quiet_app.writer.send(trade("f1", "SELL", 1, 8.0, DAY + "13:01:00Z"))
    page.goto(quiet_app.url)
    wait_for_text(page, "#kpi-cards", "$", timeout=90_000)
    open_tab(page, "Exactly once")
    page.click("#exactly-once-check")
    wait_for_text(page, "#exactly-once-message", "Counted at", timeout=30_000)
    table = page.inner_text("#exactly-once-table")
    assert "trades:0" in table and "Redeliveries dropped" in table
    assert "Gold counts" in table
    assert page.console_errors == []


def screen(browser, width: int, height: int):
    """A new page of that viewport, recording page errors."""
    context = browser.new_context(viewport={"width": width, "height": height})
    tab = context.new_page()
    tab.console_errors = []
    tab.on("pageerror", lambda error: tab.console_errors.append(str(error)))
    return context, tab


def box(page, selector: str) -> dict:
    return page.eval_on_selector(selector, "e => { const r = e.getBoundingClientRect();"
                                           " return {left: r.left, top: r.top, right: r.right, bottom: r.bottom}; }")


def x_labels_apart(page) -> bool:
    """No two of the chart's x tick labels overlap."""
    return page.evaluate("""() => {
        const boxes = Array.from(document.querySelectorAll('#trade-summary-chart .xtick text'))
            .map(t => t.getBoundingClientRect()).sort((a, b) => a.left - b.left);
        return boxes.every((b, i) => i === 0 || boxes[i - 1].right <= b.left + 1); }""")


def test_one_screen_at_1440x900_shows_the_switch_the_kpis_the_chart_and_the_feed_without_scrolling(quiet_app, browser):
    quiet_app.writer.send(trade("s1", "BUY", 3, 40.0, DAY + "14:01:00Z"))
    context, page = screen(browser, 1440, 900)
    try:
        page.goto(quiet_app.url)
        wait_for_text(page, "#kpi-cards", "$", timeout=90_000)
        wait_for(lambda: chart_traces(page) or None, 90, what="the chart's lines")
        for selector in ("#producer-switch", "#rate-input", "#kpi-cards", "#trade-summary-chart", "#corrections-feed",
                         "#page-tabs"):
            shown = box(page, selector)
            assert shown["right"] > shown["left"] and shown["bottom"] > shown["top"], selector
            assert 0 <= shown["left"] and shown["right"] <= 1440 and 0 <= shown["top"] and shown["bottom"] <= 900, \
                (selector, shown)
        assert page.evaluate("() => window.scrollY") == 0
        # The chart and the feed side by side, the chart its full height (once it collapsed to its padding).
        chart = box(page, "#trade-summary-chart")
        assert box(page, "#corrections-feed")["left"] > chart["right"] - 1
        assert chart["bottom"] - chart["top"] >= CHART_HEIGHT
        assert x_labels_apart(page)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "browser-one-screen-1440x900.png"))
        assert page.console_errors == []
    finally:
        context.close()


def test_on_a_phone_nothing_overflows_sideways_and_the_kpis_and_chart_come_first(quiet_app, browser):
    quiet_app.writer.send(trade("p1", "SELL", 2, 12345.67, DAY + "14:16:00Z"))
    context, page = screen(browser, 390, 844)
    try:
        page.goto(quiet_app.url)
        wait_for_text(page, "#kpi-cards", "$", timeout=90_000)
        wait_for(lambda: chart_traces(page) or None, 90, what="the chart's lines")
        width = "() => document.documentElement.scrollWidth"
        assert page.evaluate(width) <= 390
        kpis, chart = box(page, "#kpi-cards"), box(page, "#trade-summary-chart")
        assert kpis["top"] < chart["top"] < box(page, "#corrections-feed")["top"]
        assert chart["top"] < box(page, "#status-line")["top"] and chart["top"] < box(page, "#producer-switch")["top"]
        # Each KPI value inside its card.
        assert page.evaluate("""() => Array.from(document.querySelectorAll('#kpi-cards .kpi')).every(card => {
            const value = card.querySelector('.kpi-value').getBoundingClientRect(), own = card.getBoundingClientRect();
            return value.right <= own.right + 0.5 && value.left >= own.left - 0.5; })""")
        # The x axis's labels level, its title whole, the legend clear of the mode bar.
        assert page.evaluate("""() => Array.from(document.querySelectorAll('#trade-summary-chart .xtick text'))
            .every(t => !/rotate\\(\\s*-?[1-9]/.test(t.getAttribute('transform') || ''))""")
        assert x_labels_apart(page)
        title = page.text_content("#trade-summary-chart .g-xtitle") or ""
        assert title.startswith("Window start, UTC") and title.endswith(DAY[:4])
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "browser-phone-390x844.png"), full_page=True)
        for label in ("Too late", "Lateness", "Quarantine", "Time machine", "Reconciliation", "Exactly once",
                      "Health", "Simulation", "Export"):
            open_tab(page, label)
            assert page.evaluate(width) <= 390, label
        assert page.console_errors == []
    finally:
        context.close()


def test_the_history_sliders_labels_are_whole_and_no_unexplained_number_box_sits_beside_it(quiet_app, page):
    quiet_app.writer.send(trade("h1", "BUY", 1, 10.0, DAY + "15:01:00Z"))
    page.goto(quiet_app.url)
    wait_for_text(page, "#kpi-cards", "$", timeout=90_000)
    open_tab(page, "Time machine")
    page.wait_for_function("() => document.querySelectorAll('.time-machine-slider .dash-slider-mark').length > 0",
                           timeout=60_000)
    assert page.locator(".time-machine input[type=number], .time-machine input[type=text]").count() == 0
    slider = box(page, ".time-machine-slider")
    marks = page.eval_on_selector_all(
        ".time-machine-slider .dash-slider-mark",
        "marks => marks.map(m => { const r = m.getBoundingClientRect(); return [r.left, r.right]; })")
    assert all(slider["left"] <= left and right <= slider["right"] for left, right in marks), (slider, marks)
    live = box(page, "#time-machine-live")
    assert all(right <= live["left"] for _, right in marks)  # no label under the Live button
