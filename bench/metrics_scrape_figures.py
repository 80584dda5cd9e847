"""The figures of `python -m bench.metrics_scrape`: its A and B blocks, what a run measured
(ScrapeRun), the figures per condition, their ratios and the verdict on issue 36's target; and
what it prints and writes: its `metrics-scrape` lines and the "## Metrics scrape: " section of
docs/benchmarks.md. Pure but for the machine's description (report.machine)."""

from __future__ import annotations

import argparse
import math
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timezone

from bench import scrape_bursts
from bench.app_run import GROUPS, LakeRun
from bench.report import machine
from bench.results import percentile
from bench.scrape_bursts import BurstRun

COMMAND = "python -m bench.metrics_scrape"
HEADING = "## Metrics scrape: "
SCRAPE_P95_LIMIT_MS = 5.0
RATIO_LIMIT = 1.1  # "within noise": B/A of the figures below
SIDE_BY_SIDE = 20  # GET /metrics and GET /api/status in turn, before the window
# A/B figures, with their format; those held to RATIO_LIMIT first. Burst throughput is held to
# it too, the other way up (B/A >= 1 / RATIO_LIMIT), as "throughput" in the verdict.
HELD = ("batch_median_ms", "batch_p95_ms", "freshness_p95_s")
FIGURES = (("batch_median_ms", "{:.0f}"), ("batch_p95_ms", "{:.0f}"), ("freshness_p95_s", "{:.2f}"),
           ("driver_cpu_s", "{:.1f}"))


# -- the blocks -------------------------------------------------------------------------------
Block = tuple[float, float, str]  # (start, end, "A" or "B"), seconds since run.py's start


def blocks(start: float, seconds: float, block_s: float) -> list[Block]:
    """Blocks of block_s from `start`, as many of A as of B (seconds / block_s, rounded), in pairs
    A B, B A, A B ...: a trend over the run (the lake growing, the machine's load) falls on both."""
    pairs = max(1, round(seconds / block_s))
    out: list[Block] = []
    for i in range(pairs):
        for name in ("AB" if i % 2 == 0 else "BA"):
            begin = start + len(out) * block_s
            out.append((begin, begin + block_s, name))
    return out


def condition_at(schedule: list[Block], t: float) -> str | None:
    """The condition of the block t falls in ([start, end)), or None outside every block."""
    for begin, end, name in schedule:
        if begin <= t < end:
            return name
    return None


def split(schedule: list[Block], series: list) -> dict[str, list]:
    """A (t, value) series' values by the condition of the block each t falls in."""
    out: dict[str, list] = {"A": [], "B": []}
    for t, value in series:
        if (name := condition_at(schedule, t)) is not None:
            out[name].append(value)
    return out


# -- the figures ------------------------------------------------------------------------------
@dataclass
class ScrapeRun:
    """What the run measured: the blocks, the run's series (app_run.LakeRun), the scrapes, CPU."""

    run: LakeRun
    schedule: list[Block] = field(default_factory=list)
    scrapes: list = field(default_factory=list)  # (t, ms, body bytes)
    scrape_errors: list = field(default_factory=list)  # text
    first_scrape: tuple[float, int] = (float("nan"), 0)  # (ms, bytes), before the window
    # Before the window, in turn: GET /metrics and GET /api/status (the same snapshot as JSON), ms.
    side_by_side: dict = field(default_factory=lambda: {"/metrics": [], "/api/status": []})
    cpu_s: dict = field(default_factory=lambda: {"A": dict.fromkeys(GROUPS, 0.0), "B": dict.fromkeys(GROUPS, 0.0)})
    status: dict = field(default_factory=dict)  # the last /api/status of the run
    parts_ms: dict = field(default_factory=dict)  # one scrape taken apart: part -> median ms
    bursts: BurstRun | None = None  # the throughput bursts (None: --bursts 0)

    def figures(self) -> dict[str, dict[str, float]]:
        batches, fresh = split(self.schedule, self.run.batches), split(self.schedule, self.run.freshness)
        return {name: {"batch_median_ms": percentile(batches[name], 50),
                       "batch_p95_ms": percentile(batches[name], 95),
                       "freshness_p95_s": percentile(fresh[name], 95),
                       "driver_cpu_s": self.cpu_s[name]["driver"]} for name in "AB"}

    def scrape_ms(self) -> list[float]:
        return [ms for _, ms, _ in self.scrapes]


def ratios(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    return {name: b[name] / a[name] if a[name] else float("nan") for name, _ in FIGURES}


def verdict(scrape_p95_ms: float, found: dict[str, float],
            throughput_ratio: float | None = None) -> tuple[bool, list[str]]:
    """(whether the issue's target holds, the held figures over RATIO_LIMIT; "throughput" when the
    bursts' B/A is under 1 / RATIO_LIMIT, None: no bursts). A figure that could not be measured
    (nan) is never taken for a pass."""
    over = [name for name in HELD if not found[name] <= RATIO_LIMIT]
    if throughput_ratio is not None and not throughput_ratio >= 1 / RATIO_LIMIT:
        over.append("throughput")
    return scrape_p95_ms <= SCRAPE_P95_LIMIT_MS and not over, over


def scrape_line(scrapes: list[float], body_bytes: int, interval_s: float) -> str:
    return (f"metrics-scrape: scrapes={len(scrapes)} interval_s={interval_s:g} "
            f"scrape_p50_ms={percentile(scrapes, 50):.2f} scrape_p95_ms={percentile(scrapes, 95):.2f} "
            f"scrape_max_ms={max(scrapes, default=float('nan')):.2f} body_bytes={body_bytes}")


def ab_line(a: dict[str, float], b: dict[str, float]) -> str:
    """`metrics-scrape A/B: batch_median_ms=A/B ...`: A without scraping, B with."""
    return "metrics-scrape A/B: " + " ".join(f"{name}={form.format(a[name])}/{form.format(b[name])}"
                                             for name, form in FIGURES)


def ratio_line(scrape_p95_ms: float, a: dict[str, float], b: dict[str, float],
               throughput_ratio: float | None = None) -> str:
    """`metrics-scrape ratios: NAME=B/A ... scrape_p95_le_5ms=yes|no over_1.1=names|none verdict=pass|fail`
    (the bursts' throughput ratio is on its own line, and in over_1.1 and the verdict)."""
    found = ratios(a, b)
    passed, over = verdict(scrape_p95_ms, found, throughput_ratio)
    return ("metrics-scrape ratios: " + " ".join(f"{name}={value:.2f}" for name, value in found.items())
            + f" scrape_p95_le_{SCRAPE_P95_LIMIT_MS:g}ms={'yes' if scrape_p95_ms <= SCRAPE_P95_LIMIT_MS else 'no'}"
            + f" over_{RATIO_LIMIT:g}={','.join(over) or 'none'} verdict={'pass' if passed else 'fail'}")


# -- the report -------------------------------------------------------------------------------
def body_size(result: ScrapeRun) -> int:
    sizes = [size for _, _, size in result.scrapes]
    return int(statistics.median(sizes)) if sizes else result.first_scrape[1]


def section(args: argparse.Namespace, result: ScrapeRun) -> str:
    """The page's "## Metrics scrape: " section (no "## " inside it: the next one ends it)."""
    found = result.figures()
    a, b = found["A"], found["B"]
    scrapes = result.scrape_ms()
    p95 = percentile(scrapes, 95)
    bursts = result.bursts
    tp_ratio = bursts.ratio() if bursts is not None else None
    passed, over = verdict(p95, ratios(a, b), tp_ratio)
    found_ratios, m = ratios(a, b), machine()
    batches, fresh = split(result.schedule, result.run.batches), split(result.schedule, result.run.freshness)
    rows = [(name, form.format(a[name]), form.format(b[name]), f"{found_ratios[name]:.2f}",
             ("yes" if found_ratios[name] <= RATIO_LIMIT else "**no**") if name in HELD else "shown")
            for name, form in FIGURES]
    if bursts is not None:  # lower is worse: held as A/B <= RATIO_LIMIT
        rates, a_over_b = bursts.rates(), 1 / tp_ratio if tp_ratio else math.nan
        rows.append(("throughput_trades_s (bursts)", f"{rates['A']:,.0f}", f"{rates['B']:,.0f}", f"{tp_ratio:.2f}",
                     f"{'yes' if tp_ratio >= 1 / RATIO_LIMIT else '**no**'} (A/B {a_over_b:.2f})"))
    pairs = len(result.schedule) // 2
    parts = sorted(result.parts_ms.items(), key=lambda kv: -kv[1])
    cpu = "; ".join(f"{name} " + ", ".join(f"{group} {s:.1f} s" for group, s in result.cpu_s[name].items())
                    for name in "AB")
    lines = [
        f"{HEADING}a scrape every {args.interval:g} s at {args.rate:,.0f} trades/s",
        "",
        f"Measured by `{' '.join([COMMAND, *args.argv])}` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC "
        f"({m['cpu']}, {m['memory']}, Python {m['python']}, Spark {m['spark']}). One `python run.py --no-producer` "
        f"on a fresh data dir (its embedded broker, its page, no browser open) with the bench's producer at "
        f"{args.rate:,.0f} trades/s; from {args.warm_seconds:g} s after it had caught up with its start, "
        f"{pairs} block{'s' if pairs != 1 else ''} of {args.block_seconds:g} s each without scraping (A) and with "
        f"a scraper GETting /metrics every {args.interval:g} s (B), in the order A B B A A B ..., "
        f"{args.seconds:g} s of each. Prometheus scrapes every 15 s by default: {args.interval:g} s is "
        f"{15 / args.interval:g}x harsher."
        + (f" Then, the steady producer stopped, {len(scrape_bursts.schedule(args.bursts))} bursts of "
           f"{args.burst_trades:,} trades as fast as the producer sends, A B B A ..., the scraper GETting /metrics "
           f"every {args.interval:g} s during the B ones: throughput." if bursts is not None else ""),
        "",
        f"Target (issue 36): a scrape's p95 <= {SCRAPE_P95_LIMIT_MS:g} ms, and B/A of the batch median, batch p95 "
        f"and freshness p95 within noise (<= {RATIO_LIMIT:g})"
        + (f", and burst throughput no lower than that (B/A >= 1/{RATIO_LIMIT:g} = {1 / RATIO_LIMIT:.2f})"
           if bursts is not None else "")
        + f". **{'Pass' if passed else 'Fail'}**"
        + ("." if passed else f": scrape p95 {p95:.2f} ms"
           + (f", over {RATIO_LIMIT:g}: {', '.join(over)}" if over else "") + "."),
        "",
        "```",
        scrape_line(scrapes, body_size(result), args.interval),
        ab_line(a, b),
        *([scrape_bursts.throughput_line(bursts, RATIO_LIMIT)] if bursts is not None else []),
        ratio_line(p95, a, b, tp_ratio),
        "```",
        "",
        f"| figure | A (no scrapes) | B (scraped every {args.interval:g} s) | B/A | <= {RATIO_LIMIT:g} |",
        "|---|---|---|---|---|",
        *[f"| {c1} | {c2} | {c3} | {c4} | {c5} |" for c1, c2, c3, c4, c5 in rows],
        "",
        f"- **Scrape**: {len(scrapes):,} GETs of /metrics from a process of its own, over one kept-alive "
        f"connection, from the request to its body read: p50 {percentile(scrapes, 50):.2f} ms, p95 {p95:.2f} ms, max "
        f"{max(scrapes, default=float('nan')):.2f} ms; the body {body_size(result):,} bytes"
        + (f"; {len(result.scrape_errors)} failed ({result.scrape_errors[0]})" if result.scrape_errors else "")
        + f". The endpoint's first scrape, before the blocks (not counted): {result.first_scrape[0]:.1f} ms.",
        "- **Batches**: the medallion query's batches that started in the condition's blocks, from the write of "
        f"their offsets to their commit in Spark's checkpoint ({len(batches['A']):,} / {len(batches['B']):,}).",
        "- **Freshness**: from each trade's `produce()` to gold's first version whose total includes it "
        "(its commit seen in the log, looked for every 10 ms), over the trades sent in the condition's blocks "
        f"({len(fresh['A']):,} / {len(fresh['B']):,}; never shown: {result.run.missing:,}).",
        "- **driver_cpu_s**: CPU of run.py's Python and Spark's JVM in the condition's blocks (shown, not held to "
        f"the limit: it is the scrape's cost in CPU). Every group: {cpu}.",
        *([scrape_bursts.section_text(bursts, args.interval, result.run.batches)] if bursts is not None else []),
    ]
    if parts:
        lines += [
            "- **What a scrape's time goes to**: one scrape taken apart in the bench's process, on the run's "
            "last health snapshot and its lake (median ms of 200; the pipeline's counters are this process's, "
            "so fewer series than the app's): " + ", ".join(f"{name} {ms:.2f}" for name, ms in parts) + ". "
            + limit_text(result),
        ]
    lines.append("")
    return "\n".join(lines)


def limit_text(result: ScrapeRun) -> str:
    """What limits a scrape: rendering its text, or the request around it (measured against
    GET /api/status, the same health snapshot as JSON, through the same server)."""
    whole = result.parts_ms.get("whole scrape (generate_latest)", float("nan"))
    metrics, status = (percentile(result.side_by_side[path], 50) for path in ("/metrics", "/api/status"))
    return (f"Before the blocks, {SIDE_BY_SIDE} of each in turn: GET /metrics p50 {metrics:.2f} ms, GET /api/status "
            f"(the same health snapshot as JSON, through the same server and Host guard) {status:.2f} ms. So about "
            f"{status:.1f} ms of a scrape is what a small request costs (its way through werkzeug and Flask, the "
            f"JSON included), and the rest, about "
            f"{metrics - status:.1f} ms, is rendering the app's registry in run.py's Python, whose interpreter lock "
            f"it shares with the pipeline's driver (in this process, with fewer series, it renders in {whole:.2f} "
            "ms). The tables' sizes are read on a thread of their own at most every 30 s, never in a scrape's path.")
