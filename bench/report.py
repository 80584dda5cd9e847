"""The report: docs/benchmarks.md with its two plots, and the final `bench:` line.

Every figure is written beside what it measures and how, so the page can be read without
this code; the `bench:` line sums the run up in one line for scripts and the tests.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
from datetime import datetime, timezone
from pathlib import Path

from bench.load import PARTITIONS
from bench.phases import RAMP_S
from bench.results import TARGETS, Results
from bench.sampling import MemorySampler
from streaming.config import trigger_text

log = logging.getLogger("bench")
COMMAND = "python -m bench"
# Sections other commands measure (python -m bench.broker_soak, python -m bench.delta_writers,
# python -m bench --long-run, python -m bench --soak, python -m bench.month_files,
# python -m bench.time_machine, python -m bench.metrics_scrape): a bench run carries them over.
KEPT_SECTIONS = ("## Embedded broker: ", "## Delta writers: ", "## Long run: ", "## Soak: ", "## Live files: ",
                 "## Time machine: ", "## Metrics scrape: ", "## Live page: ", "## Lateness: ")


def summary_line(results: Results) -> str:
    """One line for scripts and the tests: keep its keys (new ones go at the end)."""
    return (f"bench: throughput={results.throughput:,.0f} ratio_to_broker={results.ratio_to_broker:.3f} "
            f"freshness_p95_s={results.percentile(results.latencies(), 95):.2f} "
            f"callback_p95_ms={results.percentile(results.callback_ms, 95):.1f} "
            f"rss_mb={results.peak_total_rss_mb:,.0f} pipeline_rss_mb={results.peak_pipeline_rss_mb:,.0f} "
            f"broker_rss_mb={results.rss_mb.get('broker', 0.0):,.0f} "
            f"freshness_p50_s={results.percentile(results.latencies(), 50):.2f} "
            f"freshness_p99_s={results.percentile(results.latencies(), 99):.2f} "
            f"cpu_per_trade_us={results.cpu_per_trade_us:.0f} idle_cores={results.idle_cores:.3f}")


def write(results: Results, args: argparse.Namespace) -> Path:
    """benchmarks.md and the plots into args.out; returns the page's path."""
    args.out.mkdir(parents=True, exist_ok=True)
    plots = plot(results, args.out)
    page = args.out / "benchmarks.md"
    kept = kept_section(page.read_text()) if page.exists() else ""
    page.write_text(report(results, args, plots).rstrip("\n") + ("\n\n" + kept if kept else "\n"))
    return page


def kept_section(page: str) -> str:
    """The page's KEPT_SECTIONS, each up to the next section, or "". A heading may begin more
    than one section (the soak keeps one per broker retention): each is kept, in page order."""
    kept = []
    for heading in KEPT_SECTIONS:
        start = page.find("\n" + heading)
        while start >= 0:
            end = page.find("\n## ", start + 1)
            kept.append(page[start + 1:end if end >= 0 else len(page)].rstrip("\n") + "\n")
            start = page.find("\n" + heading, end) if end >= 0 else -1
    return "\n".join(kept)


def write_section(out: Path, heading: str, text: str) -> Path:
    """Replace (or add at the end) the page's section that begins with `heading` by `text`
    (which has no "## " inside: the next section ends it); every other section stays."""
    out.mkdir(parents=True, exist_ok=True)
    page = out / "benchmarks.md"
    old = page.read_text() if page.exists() else "# Benchmarks\n"
    start = old.find("\n" + heading)
    if start < 0:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        end = old.find("\n## ", start + 1)
        new = old[:start + 1] + text + ("\n" + old[end + 1:] if end >= 0 else "")
    page.write_text(new.rstrip("\n") + "\n")
    return page


def machine() -> dict[str, str]:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "unknown")
    memory = next((line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal")), "0")
    import pyspark

    return {"cpu": f"{os.cpu_count()} cores, {cpu}", "memory": f"{int(memory) / 1024 / 1024:.1f} GiB",
            "python": platform.python_version(), "spark": pyspark.__version__, "os": platform.platform()}


def plot(results: Results, out_dir: Path) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed (pip install -r requirements-bench.txt): no plots")
        return []
    names = []
    if results.freshness:
        fig, ax = plt.subplots(figsize=(8, 3.5))
        ax.scatter([t for t, _ in results.freshness], [v for _, v in results.freshness], s=2, color="#1f77b4",
                   alpha=0.4, label="one trade")
        for p, style in ((50, "--"), (95, "-")):
            value = results.percentile(results.latencies(), p)
            ax.axhline(value, color="#ff7f0e", linestyle=style, label=f"p{p} {value:.2f} s")
        ax.axhline(TARGETS["freshness_p95_s"], color="#7f7f7f", linestyle=":", label="target p95")
        ax.set(xlabel="seconds since steady production began", ylabel="produce -> visible in gold (s)",
               title=f"Freshness at {results.freshness_rate:,.0f} trades/s")
        ax.legend(loc="upper right", fontsize=8)
        fig.tight_layout()
        fig.savefig(out_dir / "bench-freshness.png", dpi=110)
        plt.close(fig)
        names.append("bench-freshness.png")
    fig, ax = plt.subplots(figsize=(8, 2.8))
    labels = ["broker: plain consumer", "pipeline: Kafka -> gold", "target"]
    values = [results.broker_msgs_per_s, results.throughput, TARGETS["throughput"]]
    ax.barh(labels, values, color=["#7f7f7f", "#1f77b4", "#ff7f0e"])
    for y, value in enumerate(values):
        ax.text(value, y, f" {value:,.0f}/s", va="center", fontsize=8)
    ax.set(xlabel="trades (records) per second", title=f"Throughput on {results.trades:,} preloaded trades")
    ax.set_xlim(0, max(values) * 1.25)
    fig.tight_layout()
    fig.savefig(out_dir / "bench-throughput.png", dpi=110)
    plt.close(fig)
    names.append("bench-throughput.png")
    return names


def report(results: Results, args: argparse.Namespace, plots: list[str]) -> str:
    p = results.percentile
    lat, cb = results.latencies(), results.callback_ms
    rss_total = results.peak_total_rss_mb

    def verdict(value, target, higher_is_better=False):
        met = value >= target if higher_is_better else value <= target
        return "met" if met else "**not met**"

    rows = [
        ("throughput, Kafka -> gold (sustained)", f"{results.throughput:,.0f} trades/s",
         f">= {TARGETS['throughput']:,}", verdict(results.throughput, TARGETS["throughput"], True)),
        ("ratio to the broker anchor", f"{results.ratio_to_broker:.3f}", f">= {TARGETS['ratio_to_broker']:g}",
         verdict(results.ratio_to_broker, TARGETS["ratio_to_broker"], True)),
        ("freshness p50 / p95 / p99", f"{p(lat, 50):.2f} / {p(lat, 95):.2f} / {p(lat, 99):.2f} s",
         f"p95 <= {TARGETS['freshness_p95_s']:g} s", verdict(p(lat, 95), TARGETS["freshness_p95_s"])),
        ("CPU per trade at that rate (every process)", f"{results.cpu_per_trade_us:.0f} us", "", ""),
        ("the app idle (run.py and its broker, no page)", f"{results.idle_cores:.3f} cores", "<= 0.05 cores",
         verdict(results.idle_cores, 0.05)),
        ("dashboard data callback + chart figure p50 / p95", f"{p(cb, 50):.1f} / {p(cb, 95):.1f} ms",
         f"p95 <= {TARGETS['callback_p95_ms']:g} ms", verdict(p(cb, 95), TARGETS["callback_p95_ms"])),
        ("whole page refresh (every callback) p50 / p95",
         f"{p(results.refresh_ms, 50):.1f} / {p(results.refresh_ms, 95):.1f} ms", "", ""),
        ("peak RSS, pipeline and dashboard (driver, JVM, Python workers)",
         f"{results.peak_pipeline_rss_mb:,.0f} MiB", f"<= {TARGETS['pipeline_rss_mb']:,.0f} MiB",
         verdict(results.peak_pipeline_rss_mb, TARGETS["pipeline_rss_mb"])),
        ("peak RSS, embedded broker (stands in for the user's Kafka)", f"{results.rss_mb.get('broker', 0.0):,.0f} MiB",
         "", ""),
        ("peak RSS, all processes together", f"{rss_total:,.0f} MiB", "", ""),
    ]
    m = machine()
    lines = [
        "# Benchmarks",
        "",
        f"Measured by `{' '.join([COMMAND, *args.argv])}` on "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC. One run measures everything, so the figures",
        "compare with each other; the machine is shared, so expect some spread between runs.",
        "",
        "| figure | measured | target | |",
        "|---|---|---|---|",
        *[f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows],
        "",
        "## Machine",
        "",
        *[f"- {k}: {v}" for k, v in m.items()],
        f"- Spark master `{args.master}`, {PARTITIONS} topic partitions, embedded Apache Kafka broker"
        + "".join(f", `--conf {key}={value}`" for key, value in args.conf),
        "",
        "## What each figure is",
        "",
        f"- **Broker anchor**: {results.broker_msgs_per_s:,.0f} records/s, a plain confluent-kafka consumer "
        f"reading the {results.trades:,} preloaded trades (assign + consume, each value touched), in a process "
        "of its own that the memory figures leave out. The pipeline cannot read faster than this.",
        f"- **Throughput**: the pipeline's one query (`medallion`: bronze, silver, quarantine and gold) catches "
        "up on the preloaded "
        f"trades with `--available-now` and `--max-offsets-per-trigger {args.batch_size}`. Sustained = trades / "
        "(first batch start .. last batch end); gold is then checked against the exact totals. "
        f"End to end, including query start-up: {results.throughput_wall:,.0f} trades/s. "
        f"Spark itself took {results.spark_start_s:.1f} s to start (not counted)."
        + (f" Before it, the same pipeline ran over {results.warmup_trades:,} other trades (not counted), as "
           "a pipeline that has been running has its hot code compiled by the JVM, its Python workers "
           f"started and its code generated. That warm-up itself, cold, ran at {results.throughput_cold:,.0f} "
           "trades/s." if results.warmup_trades else ""),
        *[f"  - `{name}`: {s['batches']} batches of up to {args.batch_size:,} records, "
          f"mean {s['mean_ms']:,.0f} ms, max {s['max_ms']:,.0f} ms" for name, s in results.batches.items()],
        f"- **Freshness**: trades produced at {results.freshness_rate:,.0f}/s for {args.freshness_seconds:g} s "
        f"with batches {trigger_text(args.trigger)}; a trade's latency is from its "
        "`produce()` call to gold's first version whose total count includes it (its commit seen in the log, "
        "looked for every 10 ms). "
        f"{len(lat):,} trades measured" + (f", {results.freshness_missing:,} never showed" if
                                           results.freshness_missing else "")
        + (f"; {ramp}" if (ramp := results.ramp_text(RAMP_S)) else "") + "."
        + (f" The {long_run}." if (long_run := results.long_run_text(args.freshness_seconds)) else ""),
        f"- **Dashboard**: the callbacks as the browser runs them, through Dash's HTTP endpoint. The data "
        "callback reads gold, corrections and late trades into the store; the chart callback builds the "
        "figure from it (the target's figure); the whole refresh adds the KPI, feed and health callbacks. "
        "Gold gets a new version before each refresh, as it does live. A full trading day: "
        f"{results.dashboard_rows.get('windows', 0)} windows, {results.dashboard_rows.get('corrections', 0)} "
        f"corrections, {results.dashboard_rows.get('late_trades', 0)} too-late trades; {len(cb)} refreshes.",
        "- **Memory**: every process sampled each second through the run. The peak of their RSS summed "
        f"at one moment is the figure above; PSS, which shares the pages Spark's forked Python workers have "
        f"in common out among them, peaked at {results.peak_total_pss_mb:,.0f} MiB. Each group's own peak RSS: "
        + ", ".join(f"{name} {mb:,.0f} MiB" for name, mb in results.rss_mb.items()) + "."
        + (f" The pipeline's peak came in the {results.pipeline_peak_phase} phase: "
           + ", ".join(f"{name} {mb:,.0f} MiB ({count} process{'es' if count != 1 else ''})"
                       for name, (mb, count) in results.pipeline_peak_parts.items()) + "."
           if results.pipeline_peak_parts else ""),
        "",
        "## Where the CPU went",
        "",
        f"CPU seconds per process group in each phase (the machine has {os.cpu_count()} cores, so "
        "a phase can use at most that many times its wall time):",
        "",
        "| phase | wall | " + " | ".join(MemorySampler.GROUPS) + " | cores busy |",
        "|---|---|" + "---|" * len(MemorySampler.GROUPS) + "---|",
        *[f"| {name} | {results.phase_s[name]:.1f} s | "
          + " | ".join(f"{cpu[g]:.1f} s" for g in MemorySampler.GROUPS)
          + f" | {sum(cpu.values()) / results.phase_s[name]:.2f} |" for name, cpu in results.cpu_s.items()],
        "",
        *cpu_per_trade_lines(results),
        "",
        *peer_lines(results),
    ]
    for name in plots:
        lines += [f"![{name}]({name})", ""]
    return "\n".join(lines)


# Measured once each on a 2-core machine of this kind, the same broker and trades, gold only (no
# bronze, silver, quarantine or Delta commits): (tool, trades/s, ratio to that run's broker anchor).
PEERS = (
    ("a hand-written confluent-kafka loop", "61,500", "0.155"),
    ("Bytewax 0.21", "26,000-27,500", "0.064-0.067"),
    ("Pathway 0.33 (with a global lateness cutoff it dropped 60% of a catch-up)", "17,000-19,000", "0.045-0.065"),
    ("Quix Streams 3.28", "3,200", "0.008"),
)


def peer_lines(results: Results) -> list[str]:
    """The peers, as context for this run's figure (docs/benchmarks.md, "Against the peers")."""
    return [
        "## Against the peers (context, not measured in this run)",
        "",
        "What a user could pick instead, each measured once on a machine of this kind with the same broker and "
        "trades, doing gold only. Compare ratios to the broker anchor: the machine's speed varies between runs.",
        "",
        "| tool | warm catch-up, trades/s | ratio to the broker anchor |",
        "|---|---|---|",
        f"| **Trade Summary, this run: every table** | {results.throughput:,.0f} | {results.ratio_to_broker:.3f} |",
        *[f"| {tool} | {rate} | {ratio} |" for tool, rate, ratio in PEERS],
    ]


def cpu_per_trade_lines(results: Results) -> list[str]:
    """The throughput phase's CPU per trade, against what the target leaves on these cores."""
    cpu = results.cpu_s.get("throughput")
    if not cpu or not results.trades:
        return []
    per_trade = {group: seconds / results.trades * 1e6 for group, seconds in cpu.items()}
    budget = (os.cpu_count() or 1) / TARGETS["throughput"] * 1e6
    return [
        f"Per trade in the throughput phase: {sum(per_trade.values()):.1f} us of CPU ("
        + ", ".join(f"{group} {us:.1f} us" for group, us in per_trade.items()) + f"). {TARGETS['throughput']:,} "
        f"trades/s on {os.cpu_count()} cores leaves {budget:.0f} us per trade for all of them together.",
        "",
    ]
