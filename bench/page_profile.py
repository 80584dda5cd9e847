"""`python -m bench.page_profile`: where the page's main thread spends the pushes, at a steady rate.

`python run.py --no-producer` on a fresh data dir with the bench's producer (app_run.py); once it
has caught up, the page in Chromium (as bench.live_page opens it). For --seconds it runs
DevTools' sampling profiler and counts the actions dispatched to Dash's store, with the time
each took (an action runs every store subscriber: the page's connected components). Prints the
main thread's busy share, the time by script, the actions by type per push, and each push's
arrival to the paint of the count it carries (browser_page.py's observer).
"""

from __future__ import annotations

import argparse
import collections
import shutil
import sys
import tempfile
from pathlib import Path

from bench.app_run import AppRun, LakeRun
from bench.browser_page import CHROMIUM, CHROMIUM_ARGS, DRAIN, OBSERVER, open_live
from bench.command_line import WARM_SECONDS, require_positive, run_tool, tool_parser
from bench.results import percentile

COMMAND = "python -m bench.page_profile"
SAMPLING_US = 500
# Times each action dispatched to Dash's store (window.dash_stores), by its type.
COUNT_ACTIONS = """(() => {
  window.__benchActions = {};
  const store = window.dash_stores[0];
  const dispatch = store.dispatch;
  store.dispatch = function (action) {
    const began = performance.now();
    try {
      return dispatch.apply(this, arguments);
    } finally {
      const type = (action && action.type) || typeof action;
      const kept = window.__benchActions[type] = window.__benchActions[type] || [0, 0];
      kept[0] += 1;
      kept[1] += performance.now() - began;
    }
  };
})()"""


def build_parser() -> argparse.ArgumentParser:
    return tool_parser(COMMAND, "Profile the page's main thread in Chromium while run.py takes trades at --rate.",
                       ("--seconds", float, 30, "seconds profiled"), ("--rate", float, 1_000, "trades/s produced"),
                       WARM_SECONDS)


def script_of(frame: dict) -> str:
    return frame["url"].rsplit("/", 1)[-1].split("?")[0] or frame["functionName"] or "(native)"


def by_script(profile: dict) -> collections.Counter:
    """Milliseconds of samples by the script of the function running (self time)."""
    nodes = {node["id"]: node for node in profile["nodes"]}
    spent: collections.Counter = collections.Counter()
    for sample, delta_us in zip(profile["samples"], [*profile["timeDeltas"][1:], 0]):
        spent[script_of(nodes[sample]["callFrame"])] += delta_us / 1000
    return spent


def profile_page(url: str, seconds: float) -> tuple[dict, dict, list, list]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = open_live(browser, url, OBSERVER)
            page.wait_for_timeout(5_000)  # its first pushes drawn
            page.evaluate(DRAIN)
            page.evaluate(COUNT_ACTIONS)
            devtools = page.context.new_cdp_session(page)
            devtools.send("Profiler.enable")
            devtools.send("Profiler.setSamplingInterval", {"interval": SAMPLING_US})
            devtools.send("Profiler.start")
            page.wait_for_timeout(seconds * 1000)
            profile = devtools.send("Profiler.stop")["profile"]
            seen, pushed = page.evaluate(DRAIN)
            return profile, page.evaluate("window.__benchActions"), seen, pushed
        finally:
            browser.close()


def report(seconds: float, profile: dict, actions: dict, seen: list, pushed: list) -> list[str]:
    spent = by_script(profile)
    total, idle = sum(spent.values()), spent.get("(idle)", 0.0)
    pushes = max(1, len(pushed))
    arrived = {count: t for t, count in pushed}
    waits = [t - arrived[count] for t, count in seen if count in arrived]
    out = [f"page-profile: {len(pushed)} pushes in {seconds:g} s; main thread busy {1 - idle / total:.0%}, "
           f"{(total - idle) / pushes:.0f} ms a push; arrival to paint p50 {percentile(waits, 50):.0f} ms, "
           f"p95 {percentile(waits, 95):.0f} ms ({len(waits)} counts painted)"]
    out += [f"page-profile script: {name} {ms / pushes:.1f} ms a push"
            for name, ms in spent.most_common(8) if name != "(idle)"]
    out += [f"page-profile action: {name} {count / pushes:.1f} a push, {ms / count:.2f} ms each, "
            f"{ms / pushes:.1f} ms a push" for name, (count, ms) in sorted(actions.items(), key=lambda a: -a[1][1])]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    require_positive(parser, args, "seconds", "rate")

    def measure() -> int:
        work = Path(tempfile.mkdtemp(prefix="trade-summary-page-profile-"))
        try:
            with AppRun(LakeRun("page-profile"), work / "data", args.rate, "trades",
                        args.warm_seconds + args.seconds + 120, print) as app:
                app.wait_until(app.caught_up + args.warm_seconds, "the warm-up")
                found = profile_page(f"http://127.0.0.1:{app.web_port}/", args.seconds)
                app.stop_producing()
        finally:
            shutil.rmtree(work, ignore_errors=True)
        for line in report(args.seconds, *found):
            print(line, flush=True)
        return 0

    return run_tool("page profile", measure)


if __name__ == "__main__":
    sys.exit(main())
