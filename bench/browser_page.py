"""The page in a real browser, for `python -m bench.live_page`: Chromium (Playwright, headless,
1440x900) on the running app's page, left open, with nothing clicked.

- Trade to pixel: a MutationObserver on the KPI cards notes each new "Trades counted" value at
  the next animation frame after the change (when the browser paints it), with the time. Trade k
  of the bench's producer is on screen once the value reaches the day's count before the run
  plus k: its latency is that moment minus its produce() time, as the bench's freshness is
  measured to gold.
- The push's arrival: the page's EventSource is wrapped to note when each push arrived and the
  day's count it carries, so that trade to pixel splits into gold's freshness, gold to the push's
  arrival, and the arrival to the paint.
- The JS heap: every `sample_s`, after a garbage collection (DevTools' HeapProfiler), the used
  size (Runtime.getHeapUsage); its growth over the open time is what a page left open costs.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from dashboard import ids

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"  # Debian's: tests/install-browser.sh
# No sandbox as root, no background calls to the closed network (as tests/e2e/test_browser.py).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-sync", "--disable-quic"]
VIEWPORT = {"width": 1440, "height": 900}
TRADES_CARD = 3  # "Trades counted": the fourth of dashboard/panels/kpis.py's cards

# Installed before the page's scripts: notes each push's arrival and count (the wrapper's listener
# runs before push.js's), then waits for the cards and notes each new count once painted.
OBSERVER = """
(() => {
  window.__benchSeen = [];
  window.__benchPushed = [];
  const Native = window.EventSource;
  window.EventSource = function (url, init) {
    const source = new Native(url, init);
    source.addEventListener('snapshot', (event) => {
      const kpis = /"kpis":\\s*\\{[^}]*"trades":\\s*(\\d+)/.exec(event.data);
      if (kpis) window.__benchPushed.push([performance.timeOrigin + performance.now(), parseInt(kpis[1], 10)]);
    });
    return source;
  };
  Object.assign(window.EventSource, {CONNECTING: 0, OPEN: 1, CLOSED: 2});
  window.EventSource.prototype = Native.prototype;
  let last = null;
  function note() {
    const cards = document.querySelectorAll('#%(cards)s .kpi-value');
    if (cards.length <= %(card)d) return;
    const count = parseInt(cards[%(card)d].textContent.replace(/,/g, ''), 10);
    if (Number.isNaN(count) || count === last) return;
    last = count;
    requestAnimationFrame(() => window.__benchSeen.push([performance.timeOrigin + performance.now(), count]));
  }
  const watch = setInterval(() => {
    const cards = document.getElementById('%(cards)s');
    if (!cards) return;
    clearInterval(watch);
    note();
    new MutationObserver(note).observe(cards, {childList: true, subtree: true, characterData: true});
  }, 20);
})();
""" % {"cards": ids.KPI_CARDS, "card": TRADES_CARD}
DRAIN = """(() => {
  const found = [window.__benchSeen, window.__benchPushed];
  window.__benchSeen = [];
  window.__benchPushed = [];
  return found;
})()"""


@dataclass
class BrowserRun:
    """What the open page showed; times are time.monotonic()."""

    seen: list = field(default_factory=list)  # (t painted, trades counted)
    pushed: list = field(default_factory=list)  # (t a push arrived, trades counted in it)
    heap: list = field(default_factory=list)  # (t, used MiB after a GC)
    live_at: float = float("nan")  # when the page said Live
    errors: list = field(default_factory=list)  # the page's own errors (console, uncaught)

    def heap_growth_mib(self) -> float:
        return self.heap[-1][1] - self.heap[0][1] if len(self.heap) >= 2 else float("nan")


def open_live(browser, url: str, init_script: str, watch: Callable[[Any], None] | None = None):
    """A new page (VIEWPORT) running `init_script`, at `url`, once its live connection says Live;
    `watch(page)` first, to see what happens while it loads."""
    page = browser.new_page(viewport=VIEWPORT)
    if watch is not None:
        watch(page)
    page.add_init_script(init_script)
    page.goto(url)
    page.wait_for_function(f"document.getElementById('{ids.PUSH_STATE}')?.textContent === 'Live'", timeout=120_000)
    return page


def watch_page(url: str, seconds: float, sample_s: float, say) -> BrowserRun:
    """Open `url`, wait for its live connection, and keep it open `seconds`, sampling the heap
    every `sample_s` (the first sample once Live: the page loaded and drawn)."""
    from playwright.sync_api import sync_playwright

    found = BrowserRun()
    wall_minus_monotonic = time.time() - time.monotonic()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:

            def watch(page) -> None:
                page.on("pageerror", lambda error: found.errors.append(str(error)))
                page.on("console", lambda message: message.type == "error" and found.errors.append(message.text))

            page = open_live(browser, url, OBSERVER, watch)
            found.live_at = time.monotonic()
            devtools = page.context.new_cdp_session(page)

            def sample() -> None:
                devtools.send("HeapProfiler.collectGarbage")
                used = devtools.send("Runtime.getHeapUsage")["usedSize"] / 2**20
                found.heap.append((time.monotonic(), used))
                seen, pushed = page.evaluate(DRAIN)
                found.seen.extend((wall_ms / 1000 - wall_minus_monotonic, count) for wall_ms, count in seen)
                found.pushed.extend((wall_ms / 1000 - wall_minus_monotonic, count) for wall_ms, count in pushed)

            page.wait_for_timeout(2_000)  # its first pushes drawn
            sample()
            say(f"  browser: the page is Live; heap {found.heap[0][1]:.1f} MiB; open for {seconds / 60:g} min ...")
            ends, last_said = found.live_at + seconds, time.monotonic()
            while (left := ends - time.monotonic()) > 0:
                page.wait_for_timeout(min(sample_s, left) * 1000)
                sample()
                if time.monotonic() - last_said >= 300:
                    last_said = time.monotonic()
                    say(f"  browser: {(time.monotonic() - found.live_at) / 60:.0f} min open, heap "
                        f"{found.heap[-1][1]:.1f} MiB, {found.seen[-1][1] if found.seen else 0:,} trades shown")
        finally:
            browser.close()
    for error in sorted(set(found.errors))[:3]:  # what the figures count, said once each
        say(f"  browser: the page logged: {error[:300]}")
    return found
