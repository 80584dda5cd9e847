"""`python -m bench --long-run`: is the app as quick and as light on a month-old lake as on an empty one?

In one invocation, so that the two compare on a shared, noisy machine: seeds a lake with
`--seed-trades` trades over `--seed-days` days (seed.py: written straight into the tables, as
the pipeline would have), then starts `python run.py` on an empty lake and on the seeded one in
turn, with the bench's producer at `--rate` and the page refreshed every 2 s, and measures each
for `--seconds` once it has caught up (app_run.py). Prints one `long-run:` line (empty/full per
figure) and the ratio of each (full over empty; the issue asks each to stay at or under 1.2),
and writes the "## Long run: " section of docs/benchmarks.md (kept by a normal `python -m bench`,
report.KEPT_SECTIONS) with a plot of batch durations and memory over time.

This module reads its command line, runs the two lakes and formats the line and the section.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from bench import app_run, seed
from bench.app_run import LakeRun
from bench.command_line import WARM_SECONDS, add_app_run_arguments, require_positive, run_tool, tool_parser
from bench.report import machine, write_section
from bench.results import percentile

log = logging.getLogger("bench")
COMMAND = "python -m bench --long-run"
HEADING = "## Long run: "
PLOT = "bench-long-run.png"
RATIO_LIMIT = 1.2
# The line's figures, in order, with their format.
FIGURES = (("restart_s", "{:.1f}"), ("driver_rss_mb", "{:.0f}"), ("batch_p95_ms", "{:.0f}"),
           ("freshness_p95_s", "{:.2f}"), ("refresh_p95_ms", "{:.1f}"), ("broker_rss_mb", "{:.0f}"))
DESCRIPTION = ("Seed a lake of a month of trades, then run `python run.py` on an empty lake and on the seeded "
               "one with a producer at a steady rate and the page refreshed, and compare: start-up, driver "
               "memory, batch time, freshness, page refresh and broker memory. Prints one `long-run:` line and "
               "the ratios, and writes its section of docs/benchmarks.md with a plot.")


def build_parser() -> argparse.ArgumentParser:
    parser = tool_parser(
        COMMAND, DESCRIPTION,
        ("--seed-trades", int, 30_000_000, "trades to seed the full lake with"),
        ("--seed-days", int, 30, "trading days they spread over (the days before the live one)"),
        ("--rate", float, 1_000, "trades/s produced while each lake runs"),
        ("--seconds", float, 300, "seconds measured on each lake"),
        WARM_SECONDS,
        ("--chunk", int, 1_000_000, "trades generated and written at a time while seeding"),
    )
    add_app_run_arguments(parser, "the temporary lakes and the runs' logs")
    return parser


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = argv
    require_positive(parser, args, "seed_trades", "seed_days", "rate", "seconds", "chunk")
    if args.warm_seconds < 0:
        parser.error("--warm-seconds must be 0 or more")
    return args


# -- the figures ------------------------------------------------------------------------------
def figures(run: LakeRun) -> dict[str, float]:
    return {"restart_s": run.restart_s, "driver_rss_mb": run.peak("driver"),
            "batch_p95_ms": percentile(run.in_window(run.batches), 95),
            "freshness_p95_s": percentile(run.in_window(run.freshness), 95),
            "refresh_p95_ms": percentile(run.in_window(run.refresh_ms), 95),
            "broker_rss_mb": run.peak("broker")}


def ratios(empty: dict[str, float], full: dict[str, float]) -> dict[str, float]:
    return {name: full[name] / empty[name] if empty[name] else float("nan") for name, _ in FIGURES}


def summary_line(seeded: int, empty: dict[str, float], full: dict[str, float]) -> str:
    """`long-run: trades_seeded=N restart_s=E/F ...`: E on the empty lake, F on the full one."""
    return "long-run: " + " ".join([f"trades_seeded={seeded}"] + [
        f"{name}={form.format(empty[name])}/{form.format(full[name])}" for name, form in FIGURES])


def ratio_line(empty: dict[str, float], full: dict[str, float]) -> str:
    """`long-run ratios: restart_s=F/E ... over_1.2=names|none`."""
    found = ratios(empty, full)
    over = [name for name, value in found.items() if not value <= RATIO_LIMIT]
    return ("long-run ratios: " + " ".join(f"{name}={value:.2f}" for name, value in found.items())
            + f" over_{RATIO_LIMIT:g}={','.join(over) or 'none'}")


# -- the run ----------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> tuple[seed.SeedResult, LakeRun, LakeRun]:
    work = Path(tempfile.mkdtemp(prefix="trade-summary-long-run-"))
    try:
        log.info("long run: seeding %s trades over %d days into %s ...", f"{args.seed_trades:,}", args.seed_days,
                 work / "full")
        plan = seed.SeedPlan(args.seed_trades, args.seed_days, args.topic, seed.wall_now())
        seeded = seed.seed_lake(work / "full", plan, args.chunk)
        log.info("  seeded in %.0f s (%s trades/s): %s; disk free %.1f -> %.1f GiB", seeded.seconds,
                 f"{seeded.trades / seeded.seconds:,.0f}", sizes_text(seeded), seeded.disk_free_before / 2**30,
                 seeded.disk_free_after / 2**30)
        runs = []
        for name in ("empty", "full"):
            log.info("the %s lake: python run.py, %g trades/s, %g s measured ...", name, args.rate, args.seconds)
            runs.append(app_run.measure(name, work / name, args.seconds, args.warm_seconds, args.rate, args.topic,
                                        log.info))
            said = figures(runs[-1])
            log.info("  %s: %s", name, ", ".join(f"{k} {form.format(said[k])}" for k, form in FIGURES))
        return seeded, runs[0], runs[1]
    finally:
        if args.keep:
            log.info("lakes and logs kept in %s", work)
        else:
            shutil.rmtree(work, ignore_errors=True)


def sizes_text(seeded: seed.SeedResult) -> str:
    return ", ".join(f"{name} {size / 2**20:,.0f} MiB in {seeded.files[name]} files"
                     for name, size in seeded.bytes.items())


# -- the report -------------------------------------------------------------------------------
def plot(empty: LakeRun, full: LakeRun, out_dir: Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed (pip install -r requirements-bench.txt): no plot")
        return None
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for run, color in ((empty, "#1f77b4"), (full, "#d62728")):
        top.scatter([t for t, _ in run.batches], [ms for _, ms in run.batches], s=3, alpha=0.4, color=color,
                    label=f"{run.name} lake")
        times = [t for t, _ in run.rss]
        bottom.plot(times, [s["driver"] for _, s in run.rss], color=color, label=f"{run.name}: driver")
        bottom.plot(times, [s["broker"] for _, s in run.rss], color=color, linestyle=":",
                    label=f"{run.name}: broker")
        for axis in (top, bottom):
            axis.axvspan(*run.window, color=color, alpha=0.06)
            axis.axvline(run.restart_s, color=color, linestyle="--", linewidth=0.8)
    top.set(ylabel="batch duration (ms)", yscale="log",
            title="Batches and memory from run.py's start (dashed: first batch; shaded: measured)")
    bottom.set(xlabel="seconds since python run.py started", ylabel="RSS (MiB)")
    top.legend(loc="upper right", fontsize=8, markerscale=4)
    bottom.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / PLOT, dpi=110)
    plt.close(fig)
    return PLOT


def both(empty: LakeRun, full: LakeRun, text) -> str:
    """`text(run)` for E, then F: 'E / F'."""
    return f"{text(empty)} / {text(full)}"


def milestones(run: LakeRun) -> str:
    return ", ".join(f"{name} {t:.1f} s" for name, t in sorted(run.milestones.items(), key=lambda kv: kv[1]))


def first(series: list) -> str:
    return format(series[0][1], ",.0f") if series else "-"


def section(args: argparse.Namespace, seeded: seed.SeedResult, empty: LakeRun, full: LakeRun,
            plot_name: str | None) -> str:
    """The page's "## Long run: " section (no "## " inside it: the next one ends it)."""
    e, f = figures(empty), figures(full)
    found, m = ratios(e, f), machine()
    rows = [(name, form.format(e[name]), form.format(f[name]), f"{found[name]:.2f}",
             "yes" if found[name] <= RATIO_LIMIT else "**no**") for name, form in FIGURES]
    driver_run = both(empty, full, lambda r: format(r.peak("driver", window=False), ",.0f"))
    workers = both(empty, full, lambda r: format(r.peak("workers"), ",.0f"))
    python = both(empty, full, lambda r: format(r.peak("run.py"), ",.0f"))
    batches = both(empty, full, lambda r: format(len(r.in_window(r.batches)), ","))
    median = both(empty, full, lambda r: format(percentile(r.in_window(r.batches), 50), ".0f"))
    status = both(empty, full, lambda r: format(percentile(r.in_window(list(r.status_ms.values())), 95), ".0f"))
    trades = both(empty, full, lambda r: format(len(r.in_window(r.freshness)), ","))
    missing = both(empty, full, lambda r: format(r.missing, ","))
    first_refresh = both(empty, full, lambda r: first(r.refresh_ms))
    first_filter = both(empty, full, lambda r: first(r.filter_ms))
    filter_max = both(empty, full, lambda r: format(max(r.in_window(r.filter_ms), default=0), ",.0f"))
    cpu = "; ".join(f"{run.name} " + ", ".join(f"{group} {s:.0f} s" for group, s in run.cpu_s.items())
                    for run in (empty, full))
    lines = [
        f"{HEADING}{seeded.trades:,} trades over {args.seed_days} days",
        "",
        f"Measured by `{' '.join([COMMAND, *args.argv])}` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC "
        f"({m['cpu']}, {m['memory']}, Python {m['python']}, Spark {m['spark']}). E: `python run.py` on an empty "
        f"lake; F: on a lake seeded with {seeded.trades:,} trades over {args.seed_days} days. One invocation, one "
        "lake after the other, each with its own embedded broker, `--no-producer` and the bench's producer at "
        f"{args.rate:,.0f} trades/s, measured for {args.seconds:g} s from {args.warm_seconds:g} s after the "
        "pipeline had caught up with what was produced while it started.",
        "",
        "```",
        summary_line(seeded.trades, e, f),
        ratio_line(e, f),
        "```",
        "",
        f"| figure | E (empty) | F (full) | F/E | <= {RATIO_LIMIT:g} |",
        "|---|---|---|---|---|",
        *[f"| {a} | {b} | {c} | {d} | {g} |" for a, b, c, d, g in rows],
        "",
        f"- **Seed**: {seeded.trades:,} trades (unique ids; the simulator's symbols, prices, sides and channels) "
        f"over the market hours of {args.seed_days} days, in {seeded.seconds:.0f} s "
        f"({seeded.trades / seeded.seconds:,.0f} trades/s), written straight into bronze, silver and gold "
        f"({seeded.windows:,} windows) through the lake, bronze and silver by day, the closed days rolled as "
        f"the pipeline rolls them: "
        f"{sizes_text(seeded)}. Disk free {seeded.disk_free_before / 2**30:.1f} -> "
        f"{seeded.disk_free_after / 2**30:.1f} GiB. The seeded records are on partitions "
        f"{seed.PARTITIONS}-{2 * seed.PARTITIONS - 1} of the live topic's name, which the live topic (partitions "
        f"0-{seed.PARTITIONS - 1}) never has, so the fresh checkpoint's batches find no record of theirs in bronze "
        "and take the tasks' path, as they would on a real month's lake (bench/seed.py says why).",
        "- **restart_s**: from starting `python run.py` to the first micro-batch visible in gold (the producer "
        "starts as soon as the app has made the topic). Start-up milestones from its log (s since start, to the "
        f"second): E {milestones(empty)}; F {milestones(full)}.",
        "- **driver_rss_mb**: peak RSS of run.py's Python and Spark's JVM together, sampled each second in the "
        f"measured window (over the whole run: {driver_run} MiB), of which run.py's Python alone peaked at "
        f"{python} MiB. Spark's Python workers, not counted in it: {workers} MiB.",
        "- **batch_p95_ms**: the medallion query's batches in the window, from the write of their offsets to their "
        f"commit in Spark's checkpoint ({batches} batches, median {median} ms). Spark's own triggerExecution of "
        f"the batches /api/status showed (one a second): p95 {status} ms.",
        "- **freshness_p95_s**: from each trade's `produce()` to gold's first version whose total includes it "
        "(its commit seen in the log, looked for every 10 ms), over the trades sent in the window "
        f"({trades}; never shown: {missing}).",
        "- **refresh_p95_ms**: one page refresh as the browser runs it (dashboard/client.py `refresh_page`: the "
        "data tick, the chart, the panels and quarantine) over HTTP, every 2 s in the window. The page's first "
        f"refresh took {first_refresh} ms; the drill-down's options (at load, then every 30 s; they read silver) "
        f"{first_filter} ms at load, at most {filter_max} ms in the window.",
        "- **broker_rss_mb**: peak RSS of the embedded broker's JVM in the window.",
        f"- CPU in the window: {cpu} (of {args.seconds * (os.cpu_count() or 1):,.0f} core-seconds; the bench's "
        "producer, gold watcher and page calls run beside them).",
        "",
    ]
    if plot_name:
        lines += [f"![{plot_name}]({plot_name})", ""]
    return "\n".join(lines)


def write(out: Path, text: str) -> Path:
    """Replace (or add at the end) the page's long-run section; every other section stays."""
    return write_section(out, HEADING, text)


def main(argv: list[str]) -> int:
    args = parse_args(argv)

    def measure_and_report() -> int:
        seeded, empty, full = run(args)
        args.out.mkdir(parents=True, exist_ok=True)
        page = write(args.out, section(args, seeded, empty, full, plot(empty, full, args.out)))
        log.info("wrote %s", page)
        e, f = figures(empty), figures(full)
        print(summary_line(seeded.trades, e, f), flush=True)
        print(ratio_line(e, f), flush=True)
        return 1 if empty.missing or full.missing else 0

    return run_tool("long run", measure_and_report)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
