"""How fast GET /api/lateness answers on a month-old lake (issue 48).

It seeds a lake as the long run does (seed.py: `--days` days of `--trades` trades in bronze,
silver and gold; no change history) and the ledger the live query would have left over them
(`seed_ledger`: batches of `--batch-trades` trades in event-time order, one offset range per
partition each, with the front of the trades before). Then the dashboard's server
(dashboard.app.create_app on the lake, werkzeug on 127.0.0.1 and a free port, in a thread of this
process) answers `--requests` GET /api/lateness?day=D over HTTP, `--per-day` in a row per day D
picked at random. A request is cold when the server's LatenessReader no longer keeps the day
(it keeps the last DAYS_KEPT days asked): it reads the day's silver files and their ledger rows
and works out each trade's lateness; warm, it answers from what it kept.

It prints the figures and writes the "## Lateness: " section of docs/benchmarks.md.

    python -m bench.lateness_api [--lake DIR]
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import shutil
import sys
import tempfile
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from bench import seed
from bench.command_line import DOCS, require_positive, run_tool, tool_parser
from bench.report import machine, write_section
from bench.time_machine import Server, colds, percentile, spread, verdict, visits
from dashboard.api import lateness_json
from dashboard.readers import DAYS_KEPT, LatenessReader
from streaming.config import Settings
from streaming.lake.sql import in_time_range
from streaming.lake.store import Lake
from streaming.lake.tables import BATCH_WATERMARKS, SILVER
from streaming.medallion.lateness import EPOCH, LATENESS_COLUMNS, trade_lateness

log = logging.getLogger("bench")
COMMAND = "python -m bench.lateness_api"
HEADING = "## Lateness: "
TARGET_MS = 100.0
LEDGER_WRITER = "bench-seed-query"  # the query id of the seeded ledger
MANIFEST = "bench-lateness.json"


def build_parser() -> argparse.ArgumentParser:
    parser = tool_parser(
        COMMAND, __doc__,
        ("--trades", int, 30_000_000, "trades seeded over the days (the long run's seed)"),
        ("--days", int, 30, "days of the seeded lake"),
        ("--batch-trades", int, 500, "trades per seeded micro-batch (1,000 trades/s at two batches a second)"),
        ("--requests", int, 100, "GET /api/lateness requests on the seeded days"),
        ("--per-day", int, 5, "requests in a row on one day (the first cold)"),
        ("--chunk", int, 1_000_000, "trades generated and written at a time while seeding"),
        ("--seed", int, 7, "random seed of the days asked"),
    )
    parser.add_argument("--lake", type=Path, default=None,
                        help="a lake this bench seeded, reused as it is; seeded there and kept if it holds no "
                             "seed of this bench (default: a temporary one, removed at the end)")
    parser.add_argument("--out", type=Path, default=DOCS, help="where benchmarks.md is (default: docs/)")
    return parser


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = argv
    require_positive(parser, args, "trades", "days", "batch_trades", "requests", "per_day", "chunk")
    if args.per_day > args.requests:
        parser.error("--per-day must be at most --requests")
    return args


# -- the lake -----------------------------------------------------------------------------------
def batch_ranges(trades: pd.DataFrame, first_batch: int, batch_trades: int, front: pd.Timestamp | None,
                 delay: timedelta) -> tuple[pd.DataFrame, pd.Timestamp | None]:
    """A day's trades (LATENESS_COLUMNS) cut into batches of `batch_trades` in event-time order,
    as ledger rows: per batch and partition its offset range, the front of the trades before it
    (`front`: the day before's last) and the watermark it trails by `delay`. Also the day's front."""
    trades = trades.sort_values(["event_time", "partition", "offset"], kind="stable").reset_index(drop=True)
    batch = first_batch + np.arange(len(trades)) // batch_trades
    trades = trades.assign(batch_id=batch)
    ranges = (trades.groupby(["batch_id", "topic", "partition"], sort=True)["offset"]
              .agg(start_offset="min", last="max").reset_index())
    latest = trades.groupby("batch_id")["event_time"].max().cummax()
    fronts = latest.shift(1)
    fronts.iloc[0] = front if front is not None else pd.NaT
    ranges["front"] = pd.to_datetime(ranges["batch_id"].map(fronts), utc=True)
    ranges["watermark"] = (ranges["front"] - pd.Timedelta(delay)).where(
        ranges["front"] - pd.Timedelta(delay) > pd.Timestamp(EPOCH), pd.Timestamp(EPOCH))
    ranges = ranges.assign(query_id=LEDGER_WRITER, end_offset=ranges["last"] + 1, records_lost=0,
                           closed_to=pd.NaT)
    return ranges, latest.iloc[-1] if len(latest) else front


def seed_ledger(lake: Lake, days: list[str], batch_trades: int, delay: timedelta = Settings.watermark) -> int:
    """The ledger (BATCH_WATERMARKS) over silver's seeded trades, a day (one commit) at a time; its rows."""
    lake.ensure(BATCH_WATERMARKS)
    front, next_batch, rows = None, 0, 0
    for k, day in enumerate(days):
        start = datetime.combine(date.fromisoformat(day), datetime.min.time(), timezone.utc)
        trades = lake.read(SILVER, LATENESS_COLUMNS, in_time_range("event_time", start, start + timedelta(days=1),
                                                                   high_inclusive=False)).to_pandas()
        if trades.empty:
            continue
        ranges, front = batch_ranges(trades, next_batch, batch_trades, front, delay)
        next_batch = int(ranges["batch_id"].max()) + 1
        table = pa.Table.from_pandas(ranges[BATCH_WATERMARKS.schema.names], schema=BATCH_WATERMARKS.schema,
                                     preserve_index=False)
        seed.append_chunk(lake, BATCH_WATERMARKS, table, k, writer=LEDGER_WRITER)
        rows += table.num_rows
    return rows


def seeded_lake(lake_dir: Path, args: argparse.Namespace) -> tuple[list[str], dict]:
    """The lake's days and what its seeding took: seeded now, or read from its manifest."""
    manifest = lake_dir / MANIFEST
    if manifest.exists():
        found = json.loads(manifest.read_text())
        log.info("reusing the lake seeded before in %s", lake_dir)
        return found["days"], {**found, "reused": True}
    plan = seed.SeedPlan(args.trades, args.days, "trades", seed.wall_now())
    log.info("seeding %s trades over %d days into %s ...", f"{args.trades:,}", args.days, lake_dir)
    began = time.perf_counter()
    result = seed.seed_lake(lake_dir, plan, args.chunk, history=None)
    days = [(plan.first_day + timedelta(days=i)).isoformat() for i in range(args.days)]
    ledger_began = time.perf_counter()
    rows = seed_ledger(Lake(lake_dir), days, args.batch_trades)
    log.info("  seed ledger: %s rows in %.1f s", f"{rows:,}", time.perf_counter() - ledger_began)
    found = {"days": days, "trades": result.trades, "ledger_rows": rows, "batch_trades": args.batch_trades,
             "seconds": time.perf_counter() - began}
    manifest.write_text(json.dumps(found))
    return days, {**found, "reused": False}


# -- the requests -------------------------------------------------------------------------------
def measure(server: Server, days: list[str], args: argparse.Namespace) -> tuple[list[float], list[float], set]:
    """(cold ms, warm ms, the trades each answer counted) of the requests."""
    server.get("/api/status")  # the server's first request pays for Flask's own start-up
    order = visits(days, args.requests // args.per_day, None, 0, random.Random(args.seed))
    cold_ms: list[float] = []
    warm_ms: list[float] = []
    counted = set()
    for day, cold in zip(order, colds(order, kept=DAYS_KEPT)):
        for n in range(args.per_day):
            ms, answer = server.get(f"/api/lateness?day={day}")
            (cold_ms if cold and n == 0 else warm_ms).append(ms)
            counted.add(answer["trades"] + answer["not_judged"])
    return cold_ms, warm_ms, counted


def cold_stages(lake: Lake, day: str) -> dict[str, float]:
    """ms of each stage of a cold day's answer, as the page's LatenessReader and the API do them."""
    spent, clock = {}, time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal clock
        spent[stage], clock = (time.perf_counter() - clock) * 1000, time.perf_counter()

    start = datetime.combine(date.fromisoformat(day), datetime.min.time(), timezone.utc)
    trades = lake.read(SILVER, LATENESS_COLUMNS, in_time_range("event_time", start, start + timedelta(days=1),
                                                               high_inclusive=False)).to_pandas()
    lap("silver read")
    ledger = LatenessReader(lake, Settings.watermark)._ledger_of(trades)
    lap("ledger read")
    lateness = trade_lateness(trades, ledger, Settings.watermark)
    lap("lateness")
    lateness_json(lateness, day, Settings.watermark)
    lap("answer")
    return spent


def figure_lines(days: list[str], cold_ms: list[float], warm_ms: list[float], counted: set,
                 stages: list[dict[str, float]]) -> list[str]:
    every = cold_ms + warm_ms
    return [
        f"GET /api/lateness?day, {len(days)} seeded days, {min(counted):,}-{max(counted):,} trades a day "
        "(p50 / p95 / max, requests):",
        f"  all      {spread(every)}   target p95 <= {TARGET_MS:g} ms: {verdict(every, TARGET_MS)}",
        f"  cold     {spread(cold_ms)}",
        f"  warm     {spread(warm_ms)}",
        f"a cold day by stage, p50 ms of {len(stages)} days: "
        + ", ".join(f"{stage} {percentile([s[stage] for s in stages], 50):.0f}" for stage in stages[0]),
    ]


def section(args: argparse.Namespace, seeded: dict, lines: list[str], cold_p50: float) -> str:
    found = machine()
    how = "reused, seeded before" if seeded["reused"] else f"seeded in {seeded['seconds']:.0f} s"
    return "\n".join([
        f"{HEADING}the what-if of a day on a {len(seeded['days'])}-day lake", "",
        f"Measured by `{' '.join([COMMAND, *args.argv])}` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC "
        f"({found['cpu']}, {found['memory']}, Python {found['python']}). The lake: the long run's seed "
        f"({seeded['trades']:,} trades over {len(seeded['days'])} days, bench/seed.py), {how}, with the ledger "
        f"the live query would have left: batches of {seeded['batch_trades']:,} trades, "
        f"{seeded['ledger_rows']:,} rows.", "",
        "```", *lines, "```", "",
        "- Over HTTP to the dashboard's own server (create_app, werkzeug, in a thread of the bench's process), "
        f"from request to parsed JSON; each day picked at random, {args.per_day} requests in a row. Cold: the "
        f"server's LatenessReader no longer kept the day (it keeps the last {DAYS_KEPT}), so it read the day's "
        "silver files (event time and offsets), the ledger rows of their offsets, and worked out each trade's "
        "lateness; warm: nothing new in the day, it answered from what it kept (the curve and the bins).",
        f"- What limits it: a cold day ({cold_p50:.0f} ms at the median) is the stages above, each of about the "
        "same weight and each growing with the day's trades, not with the lake's days: a read of the day's "
        "trades (event time and offsets), the ledger rows of their offsets (DataFusion over the ledger's "
        "files), the numpy pass that matches each trade to its batch's range (lateness.trade_lateness) and the "
        "count at each delay. The page asks for a day once when it is picked, then follows the day's new "
        "files; a warm answer is the page's memo, read again only when the day changes.", ""])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # not a line per request

    def work() -> int:
        lake_dir = args.lake or Path(tempfile.mkdtemp(prefix="trade-summary-lateness-"))
        try:
            days, seeded = seeded_lake(lake_dir, args)
            log.info("GET /api/lateness: %d requests ...", args.requests)
            with Server(Lake(lake_dir)) as server:
                cold_ms, warm_ms, counted = measure(server, days, args)
            picked = random.Random(args.seed).sample(days, min(5, len(days)))
            stages = [cold_stages(Lake(lake_dir), day) for day in picked]
            lines = figure_lines(days, cold_ms, warm_ms, counted, stages)
            for line in lines:
                print(line, flush=True)
            print(f"wrote {write_section(args.out, HEADING, section(args, seeded, lines, percentile(cold_ms, 50)))}")
            return 0
        finally:
            if args.lake is None:
                shutil.rmtree(lake_dir, ignore_errors=True)

    return run_tool("lateness bench", work)


if __name__ == "__main__":
    sys.exit(main())
