"""The soak's figures and report (`python -m bench --soak`, run by soak.py): what was sampled,
windowed into 5-minute buckets and into A (minutes 3-8) and B (the last 5 minutes), the `soak:`
line and its ratios, and the "## Soak: " section of docs/benchmarks.md with its plot.

Everything here is pure but the plot and the page's write: the figures of a SoakRun.
"""

from __future__ import annotations

import logging
import math
import re
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

log = logging.getLogger("bench")
COMMAND = "python -m bench --soak"
HEADING = "## Soak: "  # in report.KEPT_SECTIONS; one section per broker retention
BUCKET_S = 300.0
SIGTERM_LIMIT_S = 10.0
SHORT_MINUTES = 13  # shorter than this, minutes 3-8 and the last 5 overlap or crowd the start
# (line key, what it is made of, how, format, held to the limit). "batches": every batch from
# the checkpoint; the rest are Sample fields.
FIGURES = (
    ("broker_rss_mb", "broker_rss_mb", "peak", "{:.0f}", True),
    ("broker_disk_mb", "broker_disk_mb", "peak", "{:.0f}", True),
    ("driver_rss_mb", "driver_rss_mb", "peak", "{:.0f}", True),
    ("batch_median_ms", "batches", "median", "{:.0f}", True),
    ("refresh_median_ms", "store_ms", "median", "{:.1f}", True),
    ("lag_median", "lag", "median", "{:.0f}", False),
)
# After restart_s and sigterm_s on the line (new keys go at the end): shown, not held to the limit.
EXTRA_FIGURES = (
    ("page_median_ms", "refresh_ms", "median", "{:.0f}", False),
    ("data_disk_mb", "data_disk_mb", "peak", "{:.0f}", False),
)
COLUMNS = ("minutes", "broker RSS peak (MiB)", "broker disk peak (MiB)", "driver RSS peak (MiB)",
           "batch median (ms)", "store read median (ms)", "lag median (records)", "page refresh median (ms)",
           "data dir disk peak (MiB)")


@dataclass
class Sample:
    """One sample; t is seconds since run.py was started. None: not known at that moment."""

    t: float
    driver_rss_mb: float
    broker_rss_mb: float
    broker_disk_mb: float
    data_disk_mb: float
    batch_ms: float | None = None  # /api/status: Spark's triggerExecution of the last batch
    lag: float | None = None  # /api/status: the Kafka lag, summed over partitions and queries
    trades: int | None = None  # /api/status: the producer's trades sent
    store_ms: float | None = None  # the page refresh's data tick: the tables read into the store
    refresh_ms: float | None = None  # the whole page refresh


@dataclass
class SoakRun:
    minutes: float
    rate: float
    retention: str | None  # --broker-retention as given; None: run.py's own
    sample_s: float
    limit: float
    samples: list[Sample] = field(default_factory=list)
    batches: list[tuple[float, float]] = field(default_factory=list)  # (t batch start, ms), every batch
    first_start_s: float = math.nan
    restart_s: float = math.nan
    sigterm_s: float = math.nan
    gone_s: float = math.nan  # from the SIGTERM until every process of run.py had exited
    notes: list[str] = field(default_factory=list)  # what went wrong but did not end the run


def default_limit(retention: str | None) -> float:
    """The issue's: 1.2 for the app as shipped, 1.3 with a broker retention of its own."""
    return 1.3 if retention else 1.2


def windows(minutes: float) -> tuple[tuple[float, float], tuple[float, float], bool]:
    """A and B in minutes, and whether the run was too short for minutes 3-8 against the last 5
    (then: the first third after minute 1 against the last third)."""
    if minutes >= SHORT_MINUTES:
        return (3.0, 8.0), (minutes - 5.0, minutes), False
    third = (minutes - 1.0) / 3
    return (1.0, 1.0 + third), (minutes - third, minutes), True


def window_text(window: tuple[float, float]) -> str:
    return "-".join(f"{m:.1f}".removesuffix(".0") for m in window)


def buckets(minutes: float) -> list[tuple[float, float]]:
    """5-minute buckets in minutes; the last ends with the run."""
    edges = [5.0 * k for k in range(math.ceil(minutes / 5.0))] + [minutes]
    return list(zip(edges, edges[1:]))


def _seconds(window: tuple[float, float], minutes: float) -> tuple[float, float]:
    """[start, end) in seconds; the window that ends the run also takes what came after its end."""
    return window[0] * 60, math.inf if window[1] >= minutes else window[1] * 60


def _values(run: SoakRun, source: str, lo: float, hi: float) -> list[float]:
    if source == "batches":
        return [ms for t, ms in run.batches if lo <= t < hi]
    return [v for s in run.samples if lo <= s.t < hi and (v := getattr(s, source)) is not None]


def figures(run: SoakRun, window: tuple[float, float]) -> dict[str, float]:
    """Each figure of FIGURES and EXTRA_FIGURES over a window in minutes; NaN when nothing fell in it."""
    lo, hi = _seconds(window, run.minutes)
    found = {}
    for name, source, how, _, _ in FIGURES + EXTRA_FIGURES:
        values = _values(run, source, lo, hi)
        found[name] = (max if how == "peak" else statistics.median)(values) if values else math.nan
    return found


def ratios(run: SoakRun) -> dict[str, float]:
    """B over A for each figure, and the restart over the first start."""
    window_a, window_b, _ = windows(run.minutes)
    a, b = figures(run, window_a), figures(run, window_b)
    found = {name: b[name] / a[name] if a[name] else math.nan for name, *_ in FIGURES}
    found["restart_s"] = run.restart_s / run.first_start_s if run.first_start_s else math.nan
    return found | {name: b[name] / a[name] if a[name] else math.nan for name, *_ in EXTRA_FIGURES}


def checked(name: str) -> bool:
    return name == "restart_s" or any(key == name and held for key, _, _, _, held in FIGURES)


def over_limit(run: SoakRun) -> list[str]:
    """The checked ratios above the limit; one that could not be measured is never a pass."""
    return [name for name, value in ratios(run).items() if checked(name) and not value <= run.limit]


def summary_line(run: SoakRun) -> str:
    """`soak: minutes=M rate=R retention=X broker_rss_mb=A/B ... restart_s=first/again sigterm_s=S ...`"""
    window_a, window_b, _ = windows(run.minutes)
    a, b = figures(run, window_a), figures(run, window_b)

    def pairs(specs):
        return [f"{name}={form.format(a[name])}/{form.format(b[name])}" for name, _, _, form, _ in specs]

    return " ".join(["soak:", f"minutes={run.minutes:g}", f"rate={run.rate:g}",
                     f"retention={run.retention or 'default'}", *pairs(FIGURES),
                     f"restart_s={run.first_start_s:.1f}/{run.restart_s:.1f}",
                     f"sigterm_s={run.sigterm_s:.1f}", *pairs(EXTRA_FIGURES)])


def ratio_line(run: SoakRun) -> str:
    """`soak ratios: windows=3-8/55-60 broker_rss_mb=B/A ... over_1.2=names|none sigterm_under_10s=yes`."""
    window_a, window_b, _ = windows(run.minutes)
    found = ratios(run)
    over = over_limit(run)
    return ("soak ratios: " + f"windows={window_text(window_a)}/{window_text(window_b)} "
            + " ".join(f"{name}={value:.2f}" for name, value in found.items())
            + f" over_{run.limit:g}={','.join(over) or 'none'}"
            + f" sigterm_under_{SIGTERM_LIMIT_S:g}s={'yes' if run.sigterm_s < SIGTERM_LIMIT_S else 'no'}")


def table(run: SoakRun) -> list[str]:
    """The per-5-minute table, in Markdown."""
    rows = []
    for bucket in buckets(run.minutes):
        f = figures(run, bucket)
        rows.append([window_text(bucket)] + [form.format(f[name]) for name, _, _, form, _ in FIGURES + EXTRA_FIGURES])
    return ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS),
            *["| " + " | ".join(row) + " |" for row in rows]]


def title(run: SoakRun) -> str:
    retention = f", broker retention {run.retention}" if run.retention else ""
    return f"{HEADING}{run.minutes:g} minutes at {run.rate:,.0f} trades/s{retention}"


def section(run: SoakRun, argv: list[str], machine: dict[str, str], plot_name: str | None) -> str:
    """The page's section for this run's retention (no "## " inside it: the next one ends it)."""
    window_a, window_b, short = windows(run.minutes)
    a, b = figures(run, window_a), figures(run, window_b)
    found = ratios(run)
    names = {"broker_rss_mb": "broker RSS, peak (MiB)", "broker_disk_mb": "broker disk, peak (MiB)",
             "driver_rss_mb": "driver RSS, peak (MiB)", "batch_median_ms": "batch duration, median (ms)",
             "refresh_median_ms": "page refresh store read, median (ms)", "lag_median": "Kafka lag, median (records)",
             "page_median_ms": "whole page refresh, median (ms)", "data_disk_mb": "data dir disk, peak (MiB)"}

    def verdict(name: str, value: float) -> str:
        return ("yes" if value <= run.limit else "**no**") if checked(name) else "not held to it"

    rows = [f"| {names[name]} | {form.format(a[name])} | {form.format(b[name])} | {found[name]:.2f} | "
            f"{verdict(name, found[name])} |" for name, _, _, form, _ in FIGURES + EXTRA_FIGURES]
    rows.append(f"| restart to first batch (s): first start / restart after the run | {run.first_start_s:.1f} | "
                f"{run.restart_s:.1f} | {found['restart_s']:.2f} | {verdict('restart_s', found['restart_s'])} |")
    rows.append(f"| SIGTERM to exit (s), after the run | | {run.sigterm_s:.1f} | | "
                f"{'yes' if run.sigterm_s < SIGTERM_LIMIT_S else '**no**'} (< {SIGTERM_LIMIT_S:g} s) |")
    rows.append(f"| SIGTERM until every process of it had exited (s) | | {run.gone_s:.1f} | | |")
    retention = (f"`--broker-retention {run.retention}`" if run.retention
                 else "run.py's own broker retention")
    which = ("the run was shorter than 13 minutes, so A is the first third after minute 1 and B the last third"
             if short else "A is minutes 3-8, B the last 5 minutes")
    lines = [
        title(run),
        "",
        f"Measured by `{' '.join([COMMAND, *argv])}` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC "
        f"({machine['cpu']}, {machine['memory']}, Python {machine['python']}, Spark {machine['spark']}). "
        f"`python run.py --rate {run.rate:g}` as shipped (its embedded broker, its producer, its page) with "
        f"{retention}, on a fresh data dir, for {run.minutes:g} minutes from its start, sampled every "
        f"{run.sample_s:g} s: the RSS of each process, the disk of the data dir and of the broker's dir, "
        "`/api/status` and one page refresh through Dash's endpoint. Minutes count from run.py's start; "
        f"{which} (minutes {window_text(window_a)} against {window_text(window_b)}).",
        "",
        "```",
        summary_line(run),
        ratio_line(run),
        "```",
        "",
        f"| figure | A (minutes {window_text(window_a)}) | B (minutes {window_text(window_b)}) | B/A | "
        f"<= {run.limit:g} |",
        "|---|---|---|---|---|",
        *rows,
        "",
        "Per 5 minutes:",
        "",
        *table(run),
        "",
        "- **broker RSS**: the embedded broker's JVM. **driver RSS**: run.py's Python and Spark's JVM together "
        "(Spark's Python workers not counted). Peaks of the samples.",
        "- **disk**: blocks in use under the broker's dir, and under the whole data dir (lake, checkpoints and "
        "broker; the lake keeps every trade, so it grows with the run and is not held to the limit).",
        "- **batch duration**: every batch of the medallion query, from the write of its offsets to its commit "
        "in Spark's checkpoint.",
        "- **page refresh**: one refresh as the browser runs it, through Dash's endpoint, per sample; the store "
        "read is its data tick (the tables read into the store), the whole refresh adds every panel's callback.",
        "- **lag**: `/api/status`'s Kafka lag, summed over the partitions (shown, not held to the limit: a few "
        "batches' worth moves it).",
        "- **restart**: from starting `python run.py` to the first batch that adds trades to gold; first on the "
        "fresh data dir, then again on the same dir after the run. **SIGTERM**: to run.py's pid at the end of "
        "the run, until it exited.",
        *[f"- Note: {note}" for note in run.notes],
        "",
    ]
    if plot_name:
        lines += [f"![{plot_name}]({plot_name})", ""]
    return "\n".join(lines)


def _retention_of(heading_line: str) -> str | None:
    found = re.search(r", broker retention (\S+)$", heading_line.strip())
    return found.group(1) if found else None


def replace_section(page: str, text: str, retention: str | None) -> str:
    """The page with its soak section of the same retention replaced by text (or text added at the end)."""
    start = page.find("\n" + HEADING)
    while start >= 0:
        end = page.find("\n## ", start + 1)
        if _retention_of(page[start + 1:page.find("\n", start + 1)]) == retention:
            new = page[:start + 1] + text + ("\n" + page[end + 1:] if end >= 0 else "")
            return new.rstrip("\n") + "\n"
        start = page.find("\n" + HEADING, end) if end >= 0 else -1
    return page.rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n"


def write(out: Path, text: str, retention: str | None) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    page = out / "benchmarks.md"
    page.write_text(replace_section(page.read_text() if page.exists() else "# Benchmarks\n", text, retention))
    return page


def plot_name(retention: str | None) -> str:
    return f"bench-soak-retention-{re.sub(r'[^0-9A-Za-z]+', '-', retention)}.png" if retention else "bench-soak.png"


def plot(run: SoakRun, out_dir: Path) -> str | None:
    """Memory, disk, batch durations, page refresh and lag over the run's minutes, A and B shaded."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed (pip install -r requirements-bench.txt): no plot")
        return None
    minutes = [s.t / 60 for s in run.samples]
    fig, axes = plt.subplots(4, 1, figsize=(9, 9), sharex=True)
    memory, disk, batches, page = axes
    memory.plot(minutes, [s.driver_rss_mb for s in run.samples], label="driver (run.py + Spark JVM)")
    memory.plot(minutes, [s.broker_rss_mb for s in run.samples], label="broker JVM")
    disk.plot(minutes, [s.broker_disk_mb for s in run.samples], label="broker dir")
    disk.plot(minutes, [s.data_disk_mb for s in run.samples], label="data dir (all)")
    batches.scatter([t / 60 for t, _ in run.batches], [ms for _, ms in run.batches], s=2, alpha=0.3,
                    label="each batch")
    page.plot(minutes, [math.nan if s.store_ms is None else s.store_ms for s in run.samples], label="store read")
    page.plot(minutes, [math.nan if s.refresh_ms is None else s.refresh_ms for s in run.samples],
              label="whole refresh")
    lag = page.twinx()
    lag.plot(minutes, [math.nan if s.lag is None else s.lag for s in run.samples], color="#7f7f7f",
             linestyle=":", label="Kafka lag")
    lag.set_ylabel("lag (records)")
    lag.legend(loc="upper right", fontsize=8)
    window_a, window_b, _ = windows(run.minutes)
    for axis, label in zip(axes, ("RSS (MiB)", "disk (MiB)", "batch (ms)", "page refresh (ms)")):
        for window in (window_a, window_b):
            axis.axvspan(*window, color="#2ca02c", alpha=0.08)
        axis.set_ylabel(label)
        axis.legend(loc="upper left", fontsize=8, markerscale=4)
    batches.set_yscale("log")
    memory.set_title(title(run).removeprefix("## ") + " (shaded: A and B)")
    page.set_xlabel("minutes since python run.py started")
    fig.tight_layout()
    name = plot_name(run.retention)
    fig.savefig(out_dir / name, dpi=110)
    plt.close(fig)
    return name
