"""`python -m bench.push_replay`: what one push costs the page, panel by panel, on a quiet machine.

`python run.py` at --rate until caught up (app_run.py), then the producer stopped and the page in
Chromium (as bench.live_page opens it) on the default tab. The newest push is replayed --pushes
times per variant, each time under a new push_id with one more trade counted and, in the
variant's panels, every output changed; the time from the push handed to the page to its
second animation frame after is noted. "none" changes no panel: the push's own cost. A live push
changes the KPI cards and the chart each time; the others as their data changes (the health
panel and the slider with the status, every 2 s).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from bench.app_run import AppRun, LakeRun
from bench.browser_page import CHROMIUM, CHROMIUM_ARGS, open_live
from bench.command_line import WARM_SECONDS, require_positive, run_tool, tool_parser
from bench.results import percentile, print_taken
from dashboard import ids
from dashboard.panels import DRAWN_FROM_SNAPSHOT

COMMAND = "python -m bench.push_replay"
VARIANTS = ((), *((drawing.name,) for drawing in DRAWN_FROM_SNAPSHOT),
            tuple(drawing.name for drawing in DRAWN_FROM_SNAPSHOT))
# Keeps each push's JSON as it arrives.
KEEP_PUSHES = """(() => {
  const Native = window.EventSource;
  window.EventSource = function (url, init) {
    const source = new Native(url, init);
    source.addEventListener('snapshot', (event) => { window.__benchLast = event.data; });
    window.__benchSource = source;
    return source;
  };
  Object.assign(window.EventSource, {CONNECTING: 0, OPEN: 1, CLOSED: 2});
  window.EventSource.prototype = Native.prototype;
})()"""
# The stream closed, the newest push replayed n times with the named panels' outputs changed.
REPLAY = """async ([n, names]) => {
  window.__benchSource.close();
  const base = JSON.parse(window.__benchLast);
  const frame = () => new Promise(done => requestAnimationFrame(() => setTimeout(done, 0)));
  const taken = [];
  for (let i = 1; i <= n; i++) {
    const push = JSON.parse(JSON.stringify(base));
    push.push_id = 'replay-' + i;
    push.kpis.trades += i;
    push.panels.filter(panel => names.includes(panel.name)).forEach(panel => panel.props.forEach(output => {
      const value = output[2];
      if (typeof value === 'string') output[2] = value + ' ' + i;
      else if (typeof value === 'number') output[2] = value + i;
      else if (value && Array.isArray(value.data)) value.data.forEach(trace => {
        if (Array.isArray(trace.y) && typeof trace.y[trace.y.length - 1] === 'number') trace.y[trace.y.length - 1] += i;
      });
    }));
    await new Promise(done => setTimeout(done, 150));
    const began = performance.now();
    window.dash_clientside.set_props('%s', {data: push});
    await frame();
    await frame();
    taken.push(performance.now() - began);
  }
  return taken;
}""" % ids.PUSHED


def build_parser():
    return tool_parser(COMMAND, "What one push costs the page, panel by panel, with the pipeline quiet.",
                       ("--pushes", int, 15, "replays per variant"), ("--rate", float, 1_000, "trades/s before"),
                       WARM_SECONDS)


def report(taken: dict[str, list[float]]) -> list[str]:
    """A line per variant: its p50 and the fewest milliseconds, and its p50 over "none"'s."""
    own = percentile(taken["none"], 50)
    return [f"push-replay: {name}: p50 {percentile(ms, 50):.0f} ms, min {min(ms):.0f} ms"
            + ("" if name == "none" else f", {percentile(ms, 50) - own:+.0f} ms over none")
            for name, ms in taken.items()]


def replay(url: str, pushes: int) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    taken = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            for names in VARIANTS:
                page = open_live(browser, url, KEEP_PUSHES)
                page.wait_for_timeout(3_000)  # its first pushes drawn
                taken[",".join(names) or "none"] = page.evaluate(REPLAY, [pushes, list(names)])
                page.close()
        finally:
            browser.close()
    return taken


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    require_positive(parser, args, "pushes", "rate")

    def measure() -> int:
        work = Path(tempfile.mkdtemp(prefix="trade-summary-push-replay-"))
        try:
            with AppRun(LakeRun("push-replay"), work / "data", args.rate, "trades",
                        args.warm_seconds + 60 * len(VARIANTS) + 120, print) as app:
                app.wait_until(app.caught_up + args.warm_seconds, "the warm-up")
                app.stop_producing()
                taken = replay(f"http://127.0.0.1:{app.web_port}/", args.pushes)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print_taken("push-replay", report(taken), taken)
        return 0

    return run_tool("push replay", measure)


if __name__ == "__main__":
    sys.exit(main())
