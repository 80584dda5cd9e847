"""The figures of `python -m bench.live_page`: its blocks, what a run measured (PageRun), trade to
pixel from the painted counts; and what it prints and writes: its `live-page` lines, the summary
line with the verdict on issue 35's targets and issue 47's trade to pixel, and the "## Live page: "
section of docs/benchmarks.md."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone

from bench.app_run import LakeRun
from bench.browser_page import BrowserRun
from bench.phases import latencies
from bench.report import machine
from bench.results import percentile
from dashboard.push import GOLD_GAP_S, POLL_S

COMMAND = "python -m bench.live_page"
HEADING = "## Live page: "
# Issue 35's targets, and issue 47's trade to pixel.
BATCH_RATIO_LIMIT = 1.2  # batch median with the most viewers / with one
UPDATE_P95_LIMIT_MS = 1000.0
PIXEL_P95_LIMIT_S = 0.5
HEAP_GROWTH_LIMIT_MIB = 20.0

# Issue 35's figures on main before the push (simulated viewers refreshing every 2 s):
# viewers -> (refresh p95 ms, batch median ms).
BEFORE = {1: (181, 156), 10: (657, 173), 30: (1852, 532)}
CONDITION_FIGURES = (("update_p50_ms", "{:.0f}"), ("update_p95_ms", "{:.0f}"), ("updates_per_viewer_s", "{:.2f}"),
                     ("batch_median_ms", "{:.0f}"), ("batch_p95_ms", "{:.0f}"), ("freshness_p95_s", "{:.2f}"),
                     ("driver_cpu_per_s", "{:.2f}"), ("viewers_cpu_per_s", "{:.2f}"), ("errors", "{:d}"))


# -- the blocks -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Block:
    mode: str
    viewers: int
    begin: float  # the measured seconds, since run.py's start (the settle comes before)
    end: float


def gold_gap_text() -> str:
    """How often the publisher pushes a new gold version at most, for the text (nothing: at once)."""
    return f", at most every {GOLD_GAP_S * 1000:.0f} ms" if GOLD_GAP_S > 0 else ""


def schedule(start: float, modes: list[str], counts: list[int], settle_s: float, block_s: float) -> list[Block]:
    """Per mode, the counts up and down again (1 10 30 30 10 1), each block's settle then its
    measured seconds, back to back from `start`."""
    out, t = [], start
    for mode in modes:
        for viewers in [*counts, *reversed(counts)]:
            out.append(Block(mode, viewers, t + settle_s, t + settle_s + block_s))
            t += settle_s + block_s
    return out


def within(series: list, blocks: list[Block]) -> list:
    """The values of a (t, value) series whose t falls in one of the blocks' measured seconds."""
    return [value for t, value in series if any(b.begin <= t < b.end for b in blocks)]


@dataclass
class PageRun:
    """What the run measured: run.py's series (app_run.LakeRun), the browser, the viewer blocks."""

    run: LakeRun
    browser: BrowserRun | None = None
    # Trade to pixel in stages, over the trades produced while the page was watched: seconds
    # from produce() to gold (the bench's freshness), to the push's arrival in the page, to the paint.
    stages: dict = field(default_factory=lambda: {"gold": [], "push": [], "pixel": []})
    pixel_unshown: int = 0
    blocks: list = field(default_factory=list)  # Block
    updates: dict = field(default_factory=dict)  # Block -> [(t, ms)]
    errors: dict = field(default_factory=dict)  # Block -> [text]
    cpu_s: dict = field(default_factory=dict)  # Block -> {"driver": s, "viewers": s}, in its measured seconds

    def conditions(self) -> list[tuple[str, int]]:
        return list(dict.fromkeys((b.mode, b.viewers) for b in self.blocks))

    def figures(self, mode: str, viewers: int) -> dict[str, float]:
        """One condition's figures over its blocks (t of the series is seconds since run.py's start)."""
        blocks = [b for b in self.blocks if (b.mode, b.viewers) == (mode, viewers)]
        updates = [ms for b in blocks for _, ms in self.updates.get(b, [])]
        seconds = sum(b.end - b.begin for b in blocks)
        return {"update_p50_ms": percentile(updates, 50), "update_p95_ms": percentile(updates, 95),
                "updates_per_viewer_s": len(updates) / (viewers * seconds) if seconds else float("nan"),
                "batch_median_ms": percentile(within(self.run.batches, blocks), 50),
                "batch_p95_ms": percentile(within(self.run.batches, blocks), 95),
                "freshness_p95_s": percentile(within(self.run.freshness, blocks), 95),
                **{f"{group}_cpu_per_s": sum(self.cpu_s.get(b, {}).get(group, math.nan) for b in blocks) / seconds
                   if seconds else math.nan for group in ("driver", "viewers")},
                "errors": sum(len(self.errors.get(b, [])) for b in blocks)}

    def batch_ratio(self, mode: str) -> float:
        """Batch median with the most viewers over that with the fewest, in one mode."""
        counts = sorted(viewers for m, viewers in self.conditions() if m == mode)
        if len(counts) < 2:
            return float("nan")
        fewest = self.figures(mode, counts[0])["batch_median_ms"]
        return self.figures(mode, counts[-1])["batch_median_ms"] / fewest if fewest else float("nan")


def watched(seen: list[tuple[float, int]], tail_s: float = 5.0) -> tuple[float, float] | None:
    """The seconds the page was watched: from its first painted count to `tail_s` before its last
    (a trade produced then has had time to be painted)."""
    return (seen[0][0], seen[-1][0] - tail_s) if len(seen) >= 2 and seen[-1][0] - tail_s > seen[0][0] else None


def latencies_within(sent: list[float], shown: list[tuple[float, int]],
                     window: tuple[float, float]) -> tuple[list, int]:
    """Each trade produced within the window (after its start, up to its end), from its produce()
    to the first (t, count) of `shown` that counts it; and how many of those it never counted."""
    values, _ = latencies(sent, shown, 0)
    first, last = window
    kept = [latency for t, latency in zip(sent, values) if first < t <= last]
    return kept, sum(1 for t in sent[len(values):] if first < t <= last)


def condition_line(result: PageRun, mode: str, viewers: int) -> str:
    found = result.figures(mode, viewers)
    return (f"live-page viewers: mode={mode} viewers={viewers} "
            + " ".join(f"{name}={form.format(found[name])}" for name, form in CONDITION_FIGURES))


def browser_figures(result: PageRun) -> dict[str, float]:
    browser, pixel = result.browser, result.stages["pixel"]
    if browser is None:
        return {}
    heap = [mib for _, mib in browser.heap]
    minutes = (browser.heap[-1][0] - browser.heap[0][0]) / 60 if len(browser.heap) >= 2 else 0.0
    return {"open_min": minutes, "trades": len(pixel), "unshown": result.pixel_unshown,
            "trade_to_pixel_p50_s": percentile(pixel, 50), "trade_to_pixel_p95_s": percentile(pixel, 95),
            **{f"to_{stage}_p{p}_s": percentile(result.stages[stage], p)
               for stage in ("gold", "push") for p in (50, 95)},
            "heap_first_mib": heap[0] if heap else math.nan, "heap_last_mib": heap[-1] if heap else math.nan,
            "heap_max_mib": max(heap, default=math.nan), "heap_growth_mib": browser.heap_growth_mib(),
            "page_errors": len(browser.errors)}


def browser_line(result: PageRun) -> str:
    found = browser_figures(result)
    return "live-page browser: " + " ".join(
        f"{name}={value:.2f}" if isinstance(value, float) else f"{name}={value}" for name, value in found.items())


def targets(result: PageRun) -> dict[str, tuple[float, float]]:
    """Each measured target: name -> (found, limit); what the run did not measure is left out."""
    out: dict[str, tuple[float, float]] = {}
    if result.browser is not None:
        found = browser_figures(result)
        out["trade_to_pixel_p95_s"] = (found["trade_to_pixel_p95_s"], PIXEL_P95_LIMIT_S)
        out["heap_growth_mib"] = (found["heap_growth_mib"], HEAP_GROWTH_LIMIT_MIB)
    pushed = sorted(viewers for mode, viewers in result.conditions() if mode == "push")
    if pushed:
        out["push_update_p95_ms"] = (max(result.figures("push", n)["update_p95_ms"] for n in pushed),
                                     UPDATE_P95_LIMIT_MS)
    if len(pushed) >= 2:
        out["push_batch_ratio"] = (result.batch_ratio("push"), BATCH_RATIO_LIMIT)
    return out


def failed(result: PageRun) -> list[str]:
    """The targets missed; a figure that could not be measured (nan) is never taken for a pass."""
    return [name for name, (found, limit) in targets(result).items() if not found <= limit]


def summary_line(result: PageRun) -> str:
    """`live-page: NAME=found ... verdict=pass|fail`: the targets, and the poll mode's figures beside them."""
    parts = [f"{name}={found:.2f}" for name, (found, _) in targets(result).items()]
    polled = sorted(viewers for mode, viewers in result.conditions() if mode == "poll")
    if polled:
        parts.append(f"poll_update_p95_ms={max(result.figures('poll', n)['update_p95_ms'] for n in polled):.2f}")
    if len(polled) >= 2:
        parts.append(f"poll_batch_ratio={result.batch_ratio('poll'):.2f}")
    if result.browser is not None:  # issue 47's name for it, beside python -m bench's idle_cores=
        parts.append(f"pixel_p95_s={browser_figures(result)['trade_to_pixel_p95_s']:.2f}")
    missed = failed(result)
    return f"live-page: {' '.join(parts)} missed={','.join(missed) or 'none'} verdict={'fail' if missed else 'pass'}"


def lines(result: PageRun) -> list[str]:
    out = [condition_line(result, mode, viewers) for mode, viewers in result.conditions()]
    if result.browser is not None:
        out.append(browser_line(result))
    return [*out, summary_line(result)]


def section(args: argparse.Namespace, result: PageRun) -> str:
    """The page's "## Live page: " section (no "## " inside it: the next one ends it)."""
    m, missed, found = machine(), failed(result), targets(result)
    counts = ", ".join(map(str, args.viewers))
    title = ", ".join(part for part in (f"{args.browser_minutes:g} min in Chromium" if args.browser_minutes else "",
                                        f"{counts} viewers" if args.viewers else "") if part)
    text = [
        f"{HEADING}{title} at {args.rate:,.0f} trades/s",
        "",
        f"Measured by `{' '.join([COMMAND, *args.argv])}` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC "
        f"({m['cpu']}, {m['memory']}, Python {m['python']}, Spark {m['spark']}). One `python run.py --no-producer` "
        f"on a fresh data dir with the bench's producer at {args.rate:,.0f} trades/s; from {args.warm_seconds:g} s "
        "after it had caught up with its start, the page in Chromium, then the simulated viewers.",
        "",
        f"Targets (issues 35 and 47): trade to pixel p95 <= {PIXEL_P95_LIMIT_S:g} s; the page's JS heap grows <= "
        f"{HEAP_GROWTH_LIMIT_MIB:g} MiB over 30 minutes; with the most viewers on the live connection, the batch "
        f"median <= {BATCH_RATIO_LIMIT:g}x that with one, and each page's update p95 <= {UPDATE_P95_LIMIT_MS:,.0f} ms. "
        + (f"**Missed: {', '.join(missed)}.**" if missed else "**Pass.**"),
        "",
        "```",
        *lines(result),
        "```",
        "",
    ]
    if found:
        text += ["| target | found | limit |", "|---|---|---|",
                 *[f"| {name} | {value:.2f} | {limit:g} |" for name, (value, limit) in found.items()], ""]
    if result.blocks:
        text += [
            "| mode | viewers | update p50 / p95 ms | updates per viewer per s | batch median / p95 ms | "
            "freshness p95 s | CPU s per s: run.py's driver / the viewers | before the push: refresh p95 / batch "
            "median ms |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for mode, viewers in result.conditions():
            f = result.figures(mode, viewers)
            before = BEFORE.get(viewers)
            text.append(f"| {mode} | {viewers} | {f['update_p50_ms']:.0f} / {f['update_p95_ms']:.0f} | "
                        f"{f['updates_per_viewer_s']:.2f} | {f['batch_median_ms']:.0f} / {f['batch_p95_ms']:.0f} | "
                        f"{f['freshness_p95_s']:.2f} | {f['driver_cpu_per_s']:.2f} / {f['viewers_cpu_per_s']:.2f} | "
                        + (f"{before[0]:,} / {before[1]:,} |" if before and mode == "poll" else "|"))
        text += [
            "",
            f"- **Viewers**: each block starts its pages ({args.settle_seconds:g} s to start and connect, unmeasured) "
            f"and measures {args.block_seconds:g} s; per mode the counts go up and down again, so each count has two "
            "blocks. A push viewer holds GET /api/events and parses each push, as the page does: the push carries the"
            " panels drawn (chart, KPI cards, feeds and status, health, the time machine's slider), which the page "
            "sets with no request; its update is from the push's arrival to the push parsed. A poll viewer refreshes "
            "every 2 s as the page does while its connection is down; its update is the refresh. Batches: the "
            "medallion query's, from the write of their offsets to their commit, started in the blocks. CPU: run.py's"
            " Python and Spark's JVM, and the viewers' own processes, which share the machine's 2 cores with it (real"
            " viewers would be on other machines). The last column is the issue's measurement on main before the push"
            " (another day, the same kind of machine).",
        ]
    if result.browser is not None:
        b = browser_figures(result)
        text += [
            f"- **Trade to pixel**: {b['trades']:,} trades produced while the page was open in headless Chromium at "
            "1440x900, each from its produce() to the first animation frame after the page's \"Trades counted\" "
            f"reached it: p50 {b['trade_to_pixel_p50_s']:.2f} s, p95 {b['trade_to_pixel_p95_s']:.2f} s"
            + (f"; {b['unshown']:,} never shown" if b["unshown"] else "")
            + f". In stages, p50 / p95: to gold {b['to_gold_p50_s']:.2f} / {b['to_gold_p95_s']:.2f} s (the bench's "
            "freshness: gold's commit seen in its log, looked for every 10 ms), to the push's arrival in the page "
            f"{b['to_push_p50_s']:.2f} / "
            f"{b['to_push_p95_s']:.2f} s (the publisher looks for a change as a gold step settles and every "
            f"{POLL_S * 1000:.0f} ms, and pushes a new gold version at once{gold_gap_text()}), to the paint (the "
            "page's callbacks on the push, then its render).",
            f"- **JS heap**: after a garbage collection every {args.heap_sample_seconds:g} s, over "
            f"{b['open_min']:.0f} min open: {b['heap_first_mib']:.1f} MiB at first, {b['heap_last_mib']:.1f} MiB "
            f"at the end (max {b['heap_max_mib']:.1f}), a growth of {b['heap_growth_mib']:.1f} MiB"
            + (f"; the page logged {b['page_errors']} errors, such as `{sorted(result.browser.errors)[0][:200]}`"
               if b["page_errors"] else "") + ".",
        ]
    return "\n".join([*text, ""])
