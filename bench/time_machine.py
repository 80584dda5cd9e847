"""How fast the time machine answers on a month-old lake (issue 34): GET /api/summary for a day as
of an instant, and the page's first draw of a past day.

It seeds a lake as the long run does (seed.py: `--days` days of `--trades` trades in bronze,
silver and gold, and gold's change history at the pipeline's design rate, about 30 changes a
window), plus, unless `--stress-trades 0`, one more day around the clock whose history has the
volume of a market running in real time (about 1,800 changes a window, 170,000 a day; gold and
its history only). Then, in this process:

* the dashboard's server (dashboard.dash_app.create_app on the lake, werkzeug on 127.0.0.1 and a free
  port, in a thread) answers `--requests` GET /api/summary?day=D&as_of=T over HTTP, `--per-day`
  in a row per day D picked at random, each T a random instant of the wall time over which the
  day's history was written. A request is cold when the server's HistoryReader no longer keeps
  the day (the first of a day, or of a day it has let go since: it keeps the last few days asked);
* the page's first draw of a past day, `--draws` times on as many distinct days, each with new
  readers (nothing kept): the day's history, corrections and too-late trades read, the page's
  own snapshot as of an instant (panels.time_slider.as_of_snapshot) and its figure
  (dashboard.figures), serialised as Dash sends it.

It prints the figures and writes the "## Time machine: " section of docs/benchmarks.md, with
the issue's targets: as_of p95 <= 100 ms, first draw p95 <= 300 ms.

    python -m bench.time_machine                       # the long run's seed: 30M trades, 30 days
    python -m bench.time_machine --trades 3000000 --lake /tmp/tm-lake   # seeded once, then reused
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import shutil
import sys
import tempfile
import threading
import time
import urllib.request
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

import pandas as pd
import plotly.utils
import pyarrow as pa
import pyarrow.compute as pc

from bench import seed
from bench.command_line import log_to_terminal, require_positive, stop_on_sigterm, tool_parser
from bench.report import machine, write_section
from bench.results import percentile
from dashboard import figures
from dashboard.context import PageReaders
from dashboard.dash_app import create_app
from dashboard.panels.time_slider import as_of_snapshot
from dashboard.readers import HISTORY_DAYS_KEPT
from streaming.lake.store import Lake
from streaming.lake.tables import SUMMARY_HISTORY

log = logging.getLogger("bench")
COMMAND = "python -m bench.time_machine"
HEADING = "## Time machine: "
AS_OF_TARGET_MS = 100.0
FIRST_DRAW_TARGET_MS = 300.0
STRESS_WRITER = "bench-seed-stress"  # the query id of the stress day's history
MANIFEST = "bench-time-machine.json"  # what was seeded, kept in the lake for a reuse
STAGES = ("read", "late data", "snapshot", "figure")


# -- the command line ---------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = tool_parser(
        COMMAND, __doc__,
        ("--trades", int, 30_000_000, "trades seeded over the days (the long run's seed)"),
        ("--days", int, 30, "days of the seeded lake"),
        ("--requests", int, 200, "GET /api/summary requests on the seeded days"),
        ("--per-day", int, 5, "requests in a row on one day (the first cold)"),
        ("--draws", int, 20, "first draws of a past day, on as many distinct days"),
        ("--stress-trades", int, 1_000_000, "trades of the extra day with real-time history (0: no such day)"),
        ("--stress-runs", int, 5, "cold requests and first draws of the stress day"),
        ("--chunk", int, 1_000_000, "trades generated and written at a time while seeding"),
        ("--seed", int, 7, "random seed of the days and instants asked"),
    )
    parser.add_argument("--lake", type=Path, default=None,
                        help="a lake this bench seeded, reused as it is; seeded there and kept if it holds no "
                             "seed of this bench (default: a temporary one, removed at the end)")
    parser.add_argument("--out", type=Path, default=Path("docs"), help="where benchmarks.md is (default: docs)")
    return parser


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = argv
    require_positive(parser, args, "trades", "days", "requests", "per_day", "draws", "stress_runs", "chunk")
    if args.stress_trades < 0:
        parser.error("--stress-trades must be 0 or more")
    if args.draws > args.days:
        parser.error(f"--draws must be at most --days ({args.days}): each draw is on a day not read before")
    if args.per_day > args.requests:
        parser.error("--per-day must be at most --requests")
    return args


# -- the lake -----------------------------------------------------------------------------------
@dataclass
class Seeded:
    """What the lake holds: its days, the stress day, and how it was seeded."""

    days: list[str]
    stress_day: str | None
    trades: int
    changes: int
    stress_changes: int
    seconds: float
    reused: bool = False
    spans: dict = field(default_factory=dict)  # day -> (first, last) change, epoch microseconds
    history_bytes: int = 0
    history_files: int = 0


def seed_lake(lake_dir: Path, args: argparse.Namespace) -> Seeded:
    """The long run's lake with gold's history, and the stress day before its first day."""
    plan = seed.SeedPlan(args.trades, args.days, "trades", seed.wall_now())
    log.info("seeding %s trades over %d days into %s ...", f"{args.trades:,}", args.days, lake_dir)
    result = seed.seed_lake(lake_dir, plan, args.chunk)
    seconds, stress_day, stress_changes = result.seconds, None, 0
    if args.stress_trades:
        day = plan.first_day - timedelta(days=1)
        stress = seed.SeedPlan(args.stress_trades, 1, "trades", plan.wall_end - timedelta(days=args.days),
                               last_day=day, seed=plan.seed + 1, around_the_clock=True)
        began = time.perf_counter()
        stress_changes = seed.seed_gold_day(lake_dir, stress, seed.REAL_TIME, STRESS_WRITER, args.chunk)
        seconds += time.perf_counter() - began
        stress_day = day.isoformat()
        log.info("  stress day %s: %s changes in %.1f s", stress_day, f"{stress_changes:,}",
                 time.perf_counter() - began)
    days = [(plan.first_day + timedelta(days=i)).isoformat() for i in range(args.days)]
    seeded = Seeded(days, stress_day, result.trades, result.changes, stress_changes, seconds)
    (lake_dir / MANIFEST).write_text(json.dumps({k: v for k, v in vars(seeded).items() if k != "spans"}))
    return seeded


def reused_lake(lake_dir: Path) -> Seeded | None:
    """What this bench seeded into lake_dir before, or None."""
    manifest = lake_dir / MANIFEST
    if not manifest.exists():
        return None
    found = json.loads(manifest.read_text())
    return Seeded(**{**found, "reused": True, "spans": {}})


def day_spans(lake: Lake) -> dict[str, tuple[int, int]]:
    """Each day's (first, last) change in epoch microseconds: the instants worth asking about."""
    rows = lake.read(SUMMARY_HISTORY, ["window_start", "changed_at"])
    spans = pa.table({"day": pc.cast(rows["window_start"], pa.date32()), "at": rows["changed_at"].cast(pa.int64())}) \
        .group_by("day").aggregate([("at", "min"), ("at", "max")]).to_pylist()
    return {span["day"].isoformat(): (span["at_min"], span["at_max"]) for span in spans}


def instant(span: tuple[int, int], rng: random.Random) -> datetime:
    """A random instant of the span, to the millisecond (as a client would write it)."""
    micros = rng.randint(span[0], span[1])
    return datetime.fromtimestamp(micros // 1000 / 1000, timezone.utc)


# -- the API over HTTP ------------------------------------------------------------------------------
class Server:
    """The dashboard's server on 127.0.0.1 and a free port, in a thread of this process."""

    def __init__(self, lake: Lake):
        from werkzeug.serving import make_server

        self.web = make_server("127.0.0.1", 0, create_app(lake).server, threaded=True)
        self.url = f"http://127.0.0.1:{self.web.server_port}"
        self.thread = threading.Thread(target=self.web.serve_forever, name="dashboard", daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.web.shutdown()
        self.thread.join(timeout=10)

    def get(self, path: str) -> tuple[float, dict]:
        """(ms, JSON) of a GET."""
        began = time.perf_counter()
        with urllib.request.urlopen(self.url + path, timeout=60) as answer:
            body = answer.read()
        return (time.perf_counter() - began) * 1000, json.loads(body)


def visits(days: list[str], count: int, stress_day: str | None, stress_runs: int,
           rng: random.Random) -> list[str]:
    """`count` days to ask about in turn, at random, never the same twice running; the stress
    day (if any) `stress_runs` times among them, with enough other days between to be cold."""
    order: list[str] = []
    while len(order) < count:
        day = rng.choice(days)
        if not order or order[-1] != day or len(days) == 1:
            order.append(day)
    if stress_day is not None:
        between = 2 * HISTORY_DAYS_KEPT  # other days, picked at random, may come twice
        for n in range(stress_runs):
            order.insert(min(len(order), (n + 1) * (between + 1) - 1), stress_day)
    return order


def colds(order: list[str], kept: int = HISTORY_DAYS_KEPT) -> list[bool]:
    """Whether each visit finds its day no longer kept by the server's HistoryReader (an LRU of
    `kept` days, as dashboard.readers._Days)."""
    recent: OrderedDict[str, None] = OrderedDict()
    cold = []
    for day in order:
        cold.append(day not in recent)
        recent[day] = None
        recent.move_to_end(day)
        while len(recent) > kept:
            recent.popitem(last=False)
    return cold


@dataclass
class ApiTimes:
    cold: list[float] = field(default_factory=list)
    warm: list[float] = field(default_factory=list)
    stress_cold: list[float] = field(default_factory=list)
    stress_warm: list[float] = field(default_factory=list)
    windows: list[int] = field(default_factory=list)  # windows per answer (not empty: the instants are the day's)

    @property
    def seeded_days(self) -> list[float]:
        return self.cold + self.warm


def measure_api(server: Server, seeded: Seeded, args: argparse.Namespace, rng: random.Random) -> ApiTimes:
    server.get("/api/status")  # the server's first request pays for Flask's own start-up
    order = visits(seeded.days, args.requests // args.per_day, seeded.stress_day, args.stress_runs, rng)
    times = ApiTimes()
    for day, cold in zip(order, colds(order)):
        stress = day == seeded.stress_day
        for n in range(args.per_day):
            at = instant(seeded.spans[day], rng)
            ms, answer = server.get(f"/api/summary?day={day}&as_of={at.isoformat().replace('+00:00', 'Z')}")
            times.windows.append(len(answer["windows"]))
            first = cold and n == 0
            (times.stress_cold if stress and first else times.stress_warm if stress
             else times.cold if first else times.warm).append(ms)
    return times


# -- the page's first draw ---------------------------------------------------------------------
def first_draw(lake: Lake, day: str, at: datetime) -> dict[str, float]:
    """ms per stage of the page's first draw of `day` as of `at`, on new readers."""
    spent, clock = {}, time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        spent[stage], clock = (now - clock) * 1000, now

    readers = PageReaders.of(lake)  # new readers: nothing kept
    ordered = readers.history.read(day)
    lap("read")
    corrections, late_trades = readers.corrections.read(day), readers.late_trades.read(day)
    lap("late data")
    snapshot = as_of_snapshot(ordered, pd.Timestamp(at), corrections, late_trades, day, [day])  # the page's own
    lap("snapshot")
    figure = figures.as_of_figure(figures.summary_figure(snapshot, first_reported=True), snapshot["as_of"]["label"])
    json.dumps(figure, cls=plotly.utils.PlotlyJSONEncoder)  # as Dash sends it
    lap("figure")
    spent["total"] = sum(spent.values())
    return spent


def measure_draws(lake: Lake, days: list[str], spans: dict, rng: random.Random) -> list[dict[str, float]]:
    return [first_draw(lake, day, instant(spans[day], rng)) for day in days]


# -- the figures --------------------------------------------------------------------------------
def spread(values: list[float]) -> str:
    """'p50 / p95 / max ms (n)'."""
    if not values:
        return "-"
    return (f"{percentile(values, 50):.1f} / {percentile(values, 95):.1f} / {max(values):.1f} ms "
            f"({len(values)})")


def verdict(values: list[float], target: float) -> str:
    return "pass" if values and percentile(values, 95) <= target else "FAIL"


def stage_text(draws: list[dict[str, float]]) -> str:
    return ", ".join(f"{stage} {percentile([d[stage] for d in draws], 50):.1f}" for stage in STAGES)


def figure_lines(seeded: Seeded, api: ApiTimes, draws: list[dict[str, float]],
                 stress_draws: list[dict[str, float]]) -> list[str]:
    totals = [d["total"] for d in draws]
    lines = [
        f"GET /api/summary?day&as_of, {len(seeded.days)} seeded days (p50 / p95 / max, requests):",
        f"  all      {spread(api.seeded_days)}   target p95 <= {AS_OF_TARGET_MS:g} ms: "
        f"{verdict(api.seeded_days, AS_OF_TARGET_MS)}",
        f"  cold     {spread(api.cold)}   target p95 <= {AS_OF_TARGET_MS:g} ms: {verdict(api.cold, AS_OF_TARGET_MS)}",
        f"  warm     {spread(api.warm)}",
        "first draw of a past day, new readers each (p50 / p95 / max, days):",
        f"  total    {spread(totals)}   target p95 <= {FIRST_DRAW_TARGET_MS:g} ms: "
        f"{verdict(totals, FIRST_DRAW_TARGET_MS)}",
        f"  stages, p50 ms: {stage_text(draws)}",
    ]
    if seeded.stress_day is not None:
        stress_totals = [d["total"] for d in stress_draws]
        lines += [
            f"stress day {seeded.stress_day}, {seeded.stress_changes:,} changes (real-time history volume):",
            f"  API cold {spread(api.stress_cold)}",
            f"  API warm {spread(api.stress_warm)}",
            f"  first draw {spread(stress_totals)}",
            f"  stages, p50 ms: {stage_text(stress_draws)}",
        ]
    return lines


def section(args: argparse.Namespace, seeded: Seeded, lines: list[str]) -> str:
    """The page's "## Time machine: " section (no "## " inside it: the next one ends it)."""
    found = machine()
    how = ("reused, seeded before" if seeded.reused else f"seeded in {seeded.seconds:.0f} s")
    stress = (f" One more day, {seeded.stress_day}, trades around the clock ({args.stress_trades:,} when seeded) "
              f"with the history of a market at the wall clock's pace: about 1,800 changes a window, "
              f"{seeded.stress_changes:,} in the day (gold and its history only)." if seeded.stress_day else "")
    return "\n".join([
        f"{HEADING}as of an instant on a {len(seeded.days)}-day lake", "",
        f"Measured by `{' '.join([COMMAND, *args.argv])}` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC "
        f"({found['cpu']}, {found['memory']}, Python {found['python']}). The lake: the long run's seed "
        f"({seeded.trades:,} trades over {len(seeded.days)} days, bench/seed.py), {how}, with gold's change "
        f"history at the pipeline's design rate (two micro-batches a wall second, the simulator's market at 60x: "
        f"about 30 changes per 15-minute window while it is open, a running total up to its gold row; 2% of the "
        f"windows 1-3 late changes after): {seeded.changes:,} changes, closed days rolled as the pipeline "
        f"rolls them; gold/summary_history is {seeded.history_bytes / 2**20:.1f} MiB in "
        f"{seeded.history_files} files.{stress}", "",
        "```", *lines, "```", "",
        f"- **GET /api/summary**: over HTTP to the dashboard's own server (create_app, werkzeug, in a thread of the "
        f"bench's process), from request to parsed JSON; each day D picked at random, {args.per_day} requests in a "
        "row, each as of a random instant of the wall time the day's history was written over. Cold: the "
        f"server's HistoryReader no longer kept the day (it keeps the last {HISTORY_DAYS_KEPT} days asked), so "
        "it read the day's files afresh; warm: it answered from the day it kept (as_of and the JSON).",
        "- **First draw**: the server's work from a past day picked to its chart ready to send, on new "
        "readers each time (nothing kept): read the day's history (`read`), its corrections and too-late "
        "trades (`late data`; the seed has none), the page's own snapshot as of the instant "
        "(`snapshot`: panels.time_slider.as_of_snapshot, each window's last change, its revisions and "
        "first-reported values), and the figure, drawn by dashboard.figures and serialised as Dash sends it "
        "(`figure`). The browser's own drawing is not in it.",
        "- What limits it: a day's history is one Parquet file once its day is rolled, read whole; the cost "
        "grows with the day's changes (the stress day), in the read and the sort into change order, then in "
        "as_of's pass over them. The files are in the OS's page cache (just written or read).", ""])


# -- the run ------------------------------------------------------------------------------------
def run(args: argparse.Namespace, lake_dir: Path, say: Callable[[str], None]) -> tuple[Seeded, list[str]]:
    seeded = reused_lake(lake_dir)
    if seeded is None:
        seeded = seed_lake(lake_dir, args)
    else:
        log.info("reusing the lake seeded before in %s", lake_dir)
    lake = Lake(lake_dir)
    seeded.history_bytes = seed.table_bytes(lake, SUMMARY_HISTORY)
    opened = lake.open(SUMMARY_HISTORY)
    seeded.history_files = len(opened.file_uris()) if opened is not None else 0
    seeded.spans = day_spans(lake)
    missing = [day for day in [*seeded.days, seeded.stress_day] if day is not None and day not in seeded.spans]
    if missing:
        raise RuntimeError(f"the lake has no history for {', '.join(missing)}")
    rng = random.Random(args.seed)
    log.info("GET /api/summary: %d requests ...", args.requests)
    with Server(lake) as server:
        api = measure_api(server, seeded, args, rng)
    log.info("first draws: %d days ...", args.draws)
    draws = measure_draws(lake, rng.sample(seeded.days, args.draws), seeded.spans, rng)
    stress_draws = (measure_draws(lake, [seeded.stress_day] * args.stress_runs, seeded.spans, rng)
                    if seeded.stress_day else [])
    lines = figure_lines(seeded, api, draws, stress_draws)
    for line in lines:
        say(line)
    return seeded, lines


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    stop_on_sigterm()
    log_to_terminal()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # not a line per request
    lake_dir = args.lake or Path(tempfile.mkdtemp(prefix="trade-summary-time-machine-"))
    try:
        seeded, lines = run(args, lake_dir, lambda line: print(line, flush=True))
        print(f"wrote {write_section(args.out, HEADING, section(args, seeded, lines))}")
        return 0 if all("FAIL" not in line for line in lines) else 1
    except KeyboardInterrupt:
        log.info("interrupted")
        return 130
    except Exception as exc:  # noqa: BLE001 - one readable line
        log.error("time machine bench failed: %s", exc)
        return 1
    finally:
        if args.lake is None:
            shutil.rmtree(lake_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
