"""An open page costs the server nothing while nothing happens, and a trade reaches it with no
request: the real app (its health monitor, Spark's idle progress reports) with the producer off,
the page in Chromium, counting its Dash callback requests and the server-sent events it gets."""

import json
import os
import shutil

import pytest

from tests.e2e.test_browser import CHROMIUM, CHROMIUM_ARGS, DAY, RunningApp, wait_for_text
from tests.support.corpus import trade

pytestmark = pytest.mark.skipif(shutil.which("chromium") is None and not os.environ.get("CI"),
                                reason="Debian chromium is missing: run `bash tests/install-browser.sh`")

# Counts the page's pushes as they arrive, whatever assets/push.js does with them.
COUNT_PUSHES = """
window.pushesSeen = 0;
const Source = window.EventSource;
window.EventSource = function (url, options) {
    const source = new Source(url, options);
    source.addEventListener("snapshot", () => { window.pushesSeen += 1; });
    return source;
};
window.EventSource.prototype = Source.prototype;
Object.assign(window.EventSource, {CONNECTING: 0, OPEN: 1, CLOSED: 2});
"""
# The panels a push carries drawn (dashboard/panels DRAWN_FROM_SNAPSHOT): none is asked of the server.
PUSHED_PANELS = ("kpi-cards", "trade-summary-chart.figure", "status-line", "health-queries", "time-machine-slider")


@pytest.fixture
def app(tmp_path):
    running = RunningApp(tmp_path, "--no-producer")
    yield running
    running.stop()


@pytest.fixture
def page():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        tab = browser.new_page(viewport={"width": 1440, "height": 900})
        tab.callbacks = []
        tab.on("request", lambda r: tab.callbacks.append(json.loads(r.post_data or "{}").get("output", ""))
               if "_dash-update-component" in r.url else None)
        tab.add_init_script(COUNT_PUSHES)
        yield tab
        browser.close()


def test_an_idle_page_is_quiet_and_a_trade_reaches_it_and_a_tab_opened_after_with_no_request(app, page):
    app.writer.send(trade("q1", "BUY", 2, 50.0, DAY + "09:01:00Z"))
    page.goto(app.url)
    wait_for_text(page, "#push-state", "Live", timeout=60_000)
    wait_for_text(page, "#kpi-cards", "$100", timeout=90_000)
    # Waits through Playwright, not time.sleep: its sync API records a request at its next call,
    # so one made during a sleep would be missed, or counted after the count was cleared.
    page.wait_for_timeout(10_000)  # the page settles: its first callbacks, Spark's first idle reports

    page.callbacks.clear()
    pushes = page.evaluate("window.pushesSeen")
    page.wait_for_timeout(20_000)
    quiet = len(page.callbacks) + page.evaluate("window.pushesSeen") - pushes
    assert quiet <= 6, page.callbacks  # before: 5 requests a push, a push every 2 s

    page.callbacks.clear()
    hidden_health = page.text_content("#health-queries")
    app.writer.send(trade("q2", "BUY", 3, 100.0, DAY + "09:02:00Z"))
    wait_for_text(page, "#kpi-cards", "$400", timeout=60_000)
    wait_for_text(page, "#status-line", "Watermark", timeout=10_000)
    page.wait_for_timeout(1_000)
    asked = [output for output in page.callbacks if any(panel in output for panel in PUSHED_PANELS)]
    assert asked == [] and page.evaluate("window.pushesSeen") > pushes

    # The Health tab, hidden, was left as it was; opened, it shows the newest push's, asking nothing.
    assert page.text_content("#health-queries") == hidden_health
    page.click("#page-tabs label:has-text('Health')")
    page.wait_for_function("before => { const t = document.querySelector('#health-queries');"
                           " return t.textContent.includes('active') && t.textContent !== before; }",
                           arg=hidden_health, timeout=10_000)
    assert not any(panel in output for output in page.callbacks for panel in PUSHED_PANELS), page.callbacks
