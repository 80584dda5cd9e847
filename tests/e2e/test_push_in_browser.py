"""The push in a real browser: the dashboard alone (create_app on a data dir, served by werkzeug in
a process of its own) with a fallback interval of an hour, so whatever reaches the page came over
the live connection. Gold is written straight through the Lake, as the pipeline writes it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest

from streaming.lake.store import Batch, Lake
from streaming.lake.tables import GOLD, QUARANTINE
from tests.e2e.test_browser import CHROMIUM, CHROMIUM_ARGS, wait_for_text
from tests.support.kafka import free_port
from tests.support.process import ARTIFACTS, REPO
from tests.support.waiting import wait_for

UTC = timezone.utc
DAY = datetime(2026, 3, 2, tzinfo=UTC)
# As in test_browser.py: skipped on a developer's machine without Chromium, never in CI.
pytestmark = pytest.mark.skipif(shutil.which("chromium") is None and not os.environ.get("CI"),
                                reason="Debian chromium is missing: run `bash tests/install-browser.sh`")
HOUR_MS = 3_600_000  # the fallback tick: never within a test
SERVE = """
import sys, threading
from dashboard.dash_app import create_app
from streaming.config import Settings
from streaming.run.web import WebServer, bind_address
app = create_app(sys.argv[1], refresh_ms=int(sys.argv[3]), max_pages=Settings.max_pages)
WebServer(app.server, bind_address("127.0.0.1", int(sys.argv[2])), Settings.max_pages, "dashboard")
threading.Event().wait()  # served until the test kills it
"""


def write_window(lake: Lake, batch: int, hm: str, buy: float) -> None:
    start = DAY.replace(hour=int(hm[:2]), minute=int(hm[3:]))
    lake.publish(GOLD, pa.table({
        "window_start": [start], "window_end": [start + timedelta(minutes=15)], "buy_amount": [buy],
        "sell_amount": [0.0], "settlement_amount": [buy], "trade_count": [1], "revision": [1],
        "updated_at": [datetime.now(UTC)], "batch_id": [batch]}).cast(GOLD.schema), Batch("fixture", batch))


class Dashboard:
    """The dashboard on a fixed port, stopped (SIGTERM, as a restart would) and started again."""

    def __init__(self, data_dir):
        self.data_dir, self.port = data_dir, free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", SERVE, str(self.data_dir), str(self.port), str(HOUR_MS)],
                                        cwd=REPO)
        wait_for(self._answers, 60, what="the dashboard to answer")

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "api/status", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None


@pytest.fixture
def dashboard(tmp_path):
    running = Dashboard(tmp_path)
    write_window(Lake(tmp_path), 0, "09:00", 100.0)
    running.start()
    yield running
    running.stop()


@pytest.fixture
def page(request):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        tab = browser.new_page(viewport={"width": 1440, "height": 1000})
        tab.callbacks = []
        tab.on("request", lambda r: tab.callbacks.append(r.url) if "_dash-update-component" in r.url else None)
        yield tab
        ARTIFACTS.mkdir(exist_ok=True)
        tab.screenshot(path=str(ARTIFACTS / f"push-{request.node.name}.png"), full_page=True)
        browser.close()


# Dash's callbacks still to run or answer: every list of its store's but the done ones.
PENDING_JS = """() => (window.dash_stores || []).length > 0 && window.dash_stores.every(store => {
    const callbacks = store.getState().callbacks;
    return Object.keys(callbacks).every(stage => ["stored", "completed"].includes(stage)
                                                || !Array.isArray(callbacks[stage]) || callbacks[stage].length === 0);
})"""


def settle(page, quiet_ms: int = 1000, timeout_s: float = 30.0) -> None:
    """Wait until Dash has no callback pending and the page has started none for quiet_ms: the
    first push's callbacks are over, however busy the machine (a slow answer leaves no request
    started meanwhile, but its callbacks pending). Playwright records a request only while one of
    its calls runs (page.wait_for_timeout, not time.sleep), so one made during a sleep would be
    counted after it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        before = len(page.callbacks)
        page.wait_for_function(PENDING_JS, timeout=max(1, deadline - time.monotonic()) * 1000)
        page.wait_for_timeout(quiet_ms)
        if len(page.callbacks) == before and page.evaluate(PENDING_JS):
            return
    raise AssertionError(f"the page still started callbacks after {timeout_s:.0f} s")


def test_a_quiet_page_runs_no_callback(dashboard, page):
    # Nothing changes, so nothing is pushed and the fallback tick is off (and so is the channel
    # and symbol options' interval: the push says when they change).
    page.goto(dashboard.url)
    wait_for_text(page, "#kpi-cards", "$100")
    settle(page)
    page.callbacks.clear()
    page.wait_for_timeout(4000)
    assert page.callbacks == []


def test_after_a_server_restart_the_page_reconnects_by_itself_and_updates(dashboard, page):
    page.goto(dashboard.url)
    wait_for_text(page, "#push-state", "Live")
    wait_for_text(page, "#kpi-cards", "$100")
    dashboard.stop()
    wait_for_text(page, "#push-state", "Reconnecting", timeout=15_000)
    write_window(Lake(dashboard.data_dir), 1, "09:15", 250.0)
    dashboard.start()  # the same port
    wait_for_text(page, "#push-state", "Live", timeout=30_000)
    wait_for_text(page, "#kpi-cards", "$350", timeout=15_000)
    write_window(Lake(dashboard.data_dir), 2, "09:30", 1000.0)
    wait_for_text(page, "#kpi-cards", "$1,350", timeout=15_000)


def test_a_bad_record_reaches_the_quarantine_panel_with_the_push_and_no_tick(dashboard, page):
    page.goto(dashboard.url)
    wait_for_text(page, "#push-state", "Live")
    wait_for_text(page, "#kpi-cards", "$100")
    settle(page)
    page.callbacks.clear()
    Lake(dashboard.data_dir).publish(QUARANTINE, pa.Table.from_pylist([{
        "key": b"a", "value": b"{", "topic": "trades", "partition": 0, "offset": 1, "kafka_timestamp": DAY,
        "reason": "invalid JSON", "ingested_at": datetime.now(UTC)}], schema=QUARANTINE.schema), Batch("fixture", 0))
    # The panel is in a tab not shown: its text, not what is rendered.
    page.wait_for_function("() => (document.querySelector('#quarantine-counts')?.textContent || '')"
                           ".includes('invalid JSON')", timeout=15_000)
    page.wait_for_timeout(1000)
    # Only the panel drawn from its store: neither the snapshot's callback nor its own ran on a tick.
    assert len(page.callbacks) == 1


def test_a_page_left_open_does_not_keep_every_push(dashboard, page):
    # Dash records each change of a callback's input for its (hidden) undo button: left alone,
    # every push would stay in the page's memory. push.js keeps only the last.
    page.goto(dashboard.url)
    wait_for_text(page, "#push-state", "Live")
    lake = Lake(dashboard.data_dir)
    for batch in range(1, 6):
        write_window(lake, batch, f"{9 + batch // 4:02d}:{batch % 4 * 15:02d}", 10.0)
        wait_for_text(page, "#kpi-cards", f"${100 + 10 * batch}", timeout=15_000)
    past = page.evaluate("window.dash_stores.map(store => store.getState().history.past.length)")
    assert past and max(past) <= 1
