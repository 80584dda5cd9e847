"""How fast GET /api/lateness answers on a month-old lake (issue 48).

It seeds a lake as the long run does (seed.py: `--days` days of `--trades` trades in bronze,
silver and gold; no change history), judged as the live query would have judged them
(`SeededQuery`: batches of `--batch-trades` trades, each partition read a little behind the
others, their ledger rows and each trade's lateness in silver). Then the dashboard's server
(dashboard.dash_app.create_app on the lake, werkzeug on 127.0.0.1 and a free port, in a thread of this
process) answers `--requests` GET /api/lateness?day=D over HTTP, `--per-day` in a row per day D
picked at random. A request is cold when the server's LatenessReader no longer keeps the day
(it keeps the last DAYS_KEPT days asked): it reads the day's silver files (their lateness column)
and tallies them; warm, it answers from what it kept.

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
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from bench import seed
from bench.command_line import DOCS, require_positive, run_tool, tool_parser
from bench.report import machine, write_section
from bench.results import percentile
from bench.time_machine import Server, colds, spread, verdict, visits
from dashboard.api import lateness_json, lateness_points
from dashboard.readers import DAYS_KEPT, LatenessReader
from streaming.config import Settings
from streaming.lake.increments import FileIncrements, Span
from streaming.lake.store import Lake
from streaming.lake.tables import BATCH_WATERMARKS, DAY, SILVER
from streaming.medallion.lateness import (
    EPOCH,
    LATENESS,
    LATENESS_COLUMNS,
    MICROSECOND,
    NOT_JUDGED,
    LatenessTally,
    trade_lateness,
)

log = logging.getLogger("bench")
COMMAND = "python -m bench.lateness_api"
HEADING = "## Lateness: "
TARGET_MS = 100.0
LEDGER_WRITER = "bench-seed-query"  # the query id of the seeded ledger
MEAN_ARRIVAL_LAG = timedelta(seconds=10)  # how long after its event time a seeded trade reaches the query, on average
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
                 delay: timedelta, lag_us: np.ndarray | None = None) -> tuple[pd.DataFrame, pd.Timestamp | None]:
    """Trades (LATENESS_COLUMNS) cut into batches of `batch_trades` in the order they reached the
    query, as ledger rows: per batch and partition its offset range, the front of the trades before
    it (`front`: those before these) and the watermark it trails by `delay`. Also the new front.
    lag_us: per trade, how long after its event time it reached the query at the soonest (none:
    in event-time order)."""
    lag = pd.to_timedelta(lag_us if lag_us is not None else np.zeros(len(trades), np.int64), unit="us")
    trades = trades.assign(arrival=pd.to_datetime(trades["event_time"], utc=True) + lag).sort_values(
        ["topic", "partition", "offset"])
    # A record reaches the query no sooner than the one before it in its partition.
    trades["arrival"] = trades.groupby(["topic", "partition"], sort=False)["arrival"].cummax()
    trades = trades.sort_values(["arrival", "partition", "offset"], kind="stable").reset_index(drop=True)
    batch = first_batch + np.arange(len(trades)) // batch_trades
    trades = trades.assign(batch_id=batch)
    ranges = (trades.groupby(["batch_id", "topic", "partition"], sort=True)["offset"]
              .agg(start_offset="min", last="max").reset_index())
    latest = trades.groupby("batch_id")["event_time"].max().cummax()
    if front is not None:
        latest = latest.clip(lower=front)
    fronts = latest.shift(1)
    fronts.iloc[0] = front if front is not None else pd.NaT
    ranges["front"] = pd.to_datetime(ranges["batch_id"].map(fronts), utc=True)
    ranges["watermark"] = (ranges["front"] - pd.Timedelta(delay)).where(
        ranges["front"] - pd.Timedelta(delay) > pd.Timestamp(EPOCH), pd.Timestamp(EPOCH))
    ranges = ranges.assign(query_id=LEDGER_WRITER, end_offset=ranges["last"] + 1, records_lost=0,
                           closed_to=pd.NaT)
    return ranges, latest.iloc[-1] if len(latest) else front


class SeededQuery:
    """Judges each chunk of the seeded silver as the live query would have (seed.seed_lake's
    `judge`): appends the chunk's ledger rows (batches of `batch_trades` in the order the trades
    reached the query, each an exponentially drawn lag after its event time, MEAN_ARRIVAL_LAG on
    average) and stamps its trades with the lateness that ledger gives (lateness.trade_lateness,
    which the sink's stamp agrees with)."""

    def __init__(self, lake: Lake, batch_trades: int, delay: timedelta = Settings.watermark, seed_: int = 5):
        self.lake, self.batch_trades, self.delay = lake, batch_trades, delay
        self.rng = np.random.default_rng(seed_)
        self.front: pd.Timestamp | None = None
        self.next_batch = self.ledger_rows = self.trades = self.trades_behind = 0
        lake.ensure(BATCH_WATERMARKS)

    @property
    def behind(self) -> float:
        """The share of the trades judged so far that came behind their batch's front."""
        return self.trades_behind / self.trades if self.trades else 0.0

    def __call__(self, silver: pa.Table, chunk: int) -> pa.Table:
        trades = silver.select(LATENESS_COLUMNS).to_pandas()
        lags = self.rng.exponential(MEAN_ARRIVAL_LAG / MICROSECOND, len(trades)).astype(np.int64)
        ranges, self.front = batch_ranges(trades, self.next_batch, self.batch_trades, self.front, self.delay, lags)
        self.next_batch = int(ranges["batch_id"].max()) + 1
        table = pa.Table.from_pandas(ranges[BATCH_WATERMARKS.schema.names], schema=BATCH_WATERMARKS.schema,
                                     preserve_index=False)
        seed.append_chunk(self.lake, BATCH_WATERMARKS, table, chunk, writer=LEDGER_WRITER)
        self.ledger_rows += table.num_rows
        lateness = trade_lateness(trades, ranges, self.delay).to_numpy(dtype="int64", na_value=NOT_JUDGED)
        self.trades, self.trades_behind = self.trades + len(lateness), self.trades_behind + int((lateness > 0).sum())
        return silver.set_column(silver.schema.get_field_index(LATENESS), LATENESS,
                                 pa.array(lateness, mask=lateness == NOT_JUDGED))


def column_bytes(lake: Lake, day: str, column: str = LATENESS) -> int:
    """The bytes silver's `column` takes in the day's files, compressed (from their Parquet footers)."""
    opened = lake.open(SILVER)
    assert opened is not None
    actions = pa.table(opened.get_add_actions(flatten=True))
    root = Path(lake.location(SILVER))
    total = 0
    for path, of_day in zip(actions["path"].to_pylist(), actions[f"partition.{DAY}"].to_pylist()):
        if str(of_day) == day:
            footer = pq.ParquetFile(root / unquote(path)).metadata
            total += sum(footer.row_group(g).column(c).total_compressed_size for g in range(footer.num_row_groups)
                         for c in range(footer.num_columns) if footer.row_group(g).column(c).path_in_schema == column)
    return total


def seeded_lake(lake_dir: Path, args: argparse.Namespace) -> tuple[list[str], dict]:
    """The lake's days and what its seeding took: seeded now, or read from its manifest."""
    manifest = lake_dir / MANIFEST
    if manifest.exists():
        found = json.loads(manifest.read_text())
        if not found.get("stamped"):
            raise SystemExit(f"{lake_dir} was seeded before silver stored each trade's lateness: remove it, or "
                             "pass another --lake")
        log.info("reusing the lake seeded before in %s", lake_dir)
        return found["days"], {**found, "reused": True}
    plan = seed.SeedPlan(args.trades, args.days, "trades", seed.wall_now())
    log.info("seeding %s trades over %d days into %s ...", f"{args.trades:,}", args.days, lake_dir)
    began = time.perf_counter()
    query = SeededQuery(Lake(lake_dir), args.batch_trades)
    result = seed.seed_lake(lake_dir, plan, args.chunk, history=None, judge=query)
    days = [(plan.first_day + timedelta(days=i)).isoformat() for i in range(args.days)]
    found = {"days": days, "trades": result.trades, "ledger_rows": query.ledger_rows,
             "batch_trades": args.batch_trades, "seconds": time.perf_counter() - began, "stamped": True,
             "behind": query.behind, "column_bytes": column_bytes(Lake(lake_dir), days[len(days) // 2])}
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

    reader = LatenessReader(lake, Settings.watermark, lateness_points(Settings.watermark))
    files: FileIncrements[pa.Table] = FileIncrements(lake, SILVER, [LATENESS], Span.utc_day("event_time", day))
    files.refresh()
    lap("silver read")
    tally = sum((reader._tallied(part).stamped for part in files.parts.values()), LatenessTally.empty(reader.points_us))
    lap("tally")
    lateness_json(tally, day, Settings.watermark)
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
        "silver files (the one column of each trade's lateness, stamped by the batch that kept it) and "
        "tallied them at the what-if's points; warm: nothing new in the day, it answered from what it kept.",
        f"- Each seeded trade reached the seeded query a lag after its event time ({MEAN_ARRIVAL_LAG.seconds} s "
        f"on average, exponential), so a batch holds trades behind its front: {seeded['behind']:.0%} of them "
        f"are, and a day's lateness column takes {seeded['column_bytes'] / 2**20:.1f} MiB in Parquet (a column "
        "of zeros would take a few KiB).",
        f"- What limits it: a cold day ({cold_p50:.0f} ms at the median) is the stages above, each growing with "
        "the day's trades, not with the lake's days: a Parquet read of the day's one lateness column "
        "(its files lie wholly in the day, so no event time is read to filter them), a pass of the figures "
        "against the what-if's points (lateness.LatenessTally) and the JSON; the rest is what a warm answer "
        "costs too (about 10 ms: a look at silver's log for a new version, and the HTTP round trip). The page "
        "asks for a day once when it is picked, then tallies only the day's new files; a warm answer is the "
        "page's memo, worked out again only when the day's tally changes.",
        "- A day written before silver stored lateness (a lake from before 9c04e84) is judged from the ledger "
        "instead: its trades, the ledger rows of their offsets and lateness.trade_lateness, about 460 ms cold "
        "for a day of 1,000,000 trades (this bench at 6bb38b3), again each time its files change.", ""])


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
