"""What a commit costs once silver is a month old, with and without day partitions.

Every micro-batch commits to bronze and silver, and a delta-rs commit costs in proportion to
the table's live files. This builds silver's Delta log as the pipeline leaves it after an hour,
and at the end of its second and of its `--days`th day at `--rate` trades/s (add actions only:
a commit reads the log, not the data files), in two layouts, and times a batch's commit (one
file added, as `Lake.commit_files` does) on each:

* without days: every file compacted to about 5 MB, as before day partitions;
* with days: the open days (today and yesterday) in files of about 5 MB, each closed day
  rolled into files of about 256 MiB (streaming/lake/partitions.py).

Then it rolls one closed day of `--roll-trades` simulated trades, written as the pipeline's
compaction leaves them, and prints the roll's time and the process's peak memory.

    python -m bench.month_files                    # 30 days at 1,000 trades/s
    python -m bench.month_files --days 90 --rate 2000 --roll-trades 0
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import sys
import tempfile
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import AddAction

from bench import seed
from bench.command_line import require_positive, tool_parser
from bench.report import machine, write_section
from bench.sampling import Poller, proc_kib
from streaming.lake.store import Lake
from streaming.lake.tables import CLOSED_DAY_FILE_BYTES, DAY, OPEN_DAYS, SILVER
from streaming.medallion.silver.arrow import silver_rows

SILVER_BYTES_PER_TRADE = 71  # measured on the long-run benchmark's lakes (docs/long-runs.md#sizing-a-month)
OPEN_FILE_BYTES = 5 * 10**6  # what compaction to STREAM_FILE_BYTES makes of a stream's small files
CLOSED_FILE_BYTES = int(CLOSED_DAY_FILE_BYTES * 0.9)
ACTIONS_PER_COMMIT = 5_000
HEADING = "## Live files: "
STATS = json.dumps({"numRecords": 70_000, "minValues": {}, "maxValues": {}, "nullCount": {}})


def build_parser() -> argparse.ArgumentParser:
    return tool_parser("python -m bench.month_files", __doc__,
                       ("--days", int, 30, "the lake's age in days"),
                       ("--rate", int, 1000, "trades a second, around the clock"),
                       ("--commits", int, 30, "batch commits timed per layout"),
                       ("--roll-trades", int, 5_000_000, "trades of the closed day rolled (0: no roll)"),
                       ("--out", Path, Path("docs"), "where benchmarks.md is"))


def files_per_day(rate: int, file_bytes: int, hours: float = 24) -> int:
    return max(1, math.ceil(rate * 3600 * hours * SILVER_BYTES_PER_TRADE / file_bytes))


def layout(days: int, rate: int, partitioned: bool, hours: float = 24) -> list[tuple[str | None, int]]:
    """(day or None, files) of silver after `days` days (the last one `hours` long)."""
    today = date(2026, 1, 1) + timedelta(days=days - 1)
    parts = []
    for back in range(days):
        day = today - timedelta(days=back)
        open_day = back < OPEN_DAYS or not partitioned
        size = OPEN_FILE_BYTES if open_day else CLOSED_FILE_BYTES
        parts.append((day.isoformat() if partitioned else None, files_per_day(rate, size, hours if back == 0 else 24)))
    return parts


def make_log(location: Path, parts: list[tuple[str | None, int]]) -> DeltaTable:
    partition_by = [DAY] if parts[0][0] is not None else None
    DeltaTable.create(str(location), SILVER.stored_schema, partition_by=partition_by,
                      configuration={"delta.checkpointInterval": "10"})
    table = DeltaTable(str(location))
    actions = [AddAction(f"{DAY}={day}/f-{i}.parquet" if day else f"f-{day}-{n}-{i}.parquet", OPEN_FILE_BYTES,
                         {DAY: day} if day else {}, 0, True, STATS)
               for n, (day, count) in enumerate(parts) for i in range(count)]
    for start in range(0, len(actions), ACTIONS_PER_COMMIT):
        table.create_write_transaction(actions[start:start + ACTIONS_PER_COMMIT], mode="append",
                                       schema=SILVER.stored_schema)
    table.create_checkpoint()
    return DeltaTable(str(location))


def time_commits(table: DeltaTable, partitioned: bool, commits: int) -> list[float]:
    times = []
    for i in range(commits):
        action = AddAction(f"{DAY}=2099-01-01/batch-{i}.parquet" if partitioned else f"batch-{i}.parquet",
                           OPEN_FILE_BYTES, {DAY: "2099-01-01"} if partitioned else {}, 0, True, STATS)
        started = time.perf_counter()
        table.create_write_transaction([action], mode="append", schema=SILVER.stored_schema)
        times.append((time.perf_counter() - started) * 1000)
    return times


class OwnRss(Poller):
    """This process's RSS, every 0.2 s."""

    def __init__(self):
        super().__init__("own-rss", 0.2)
        self.kib = [proc_kib(os.getpid(), "VmRSS")]

    def tick(self) -> None:
        self.kib.append(proc_kib(os.getpid(), "VmRSS"))


def roll_figures(scratch: Path, trades: int) -> str:
    """Seed one closed day of silver in the open days' files, then roll it."""
    today = datetime.now(timezone.utc).date()
    plan = seed.SeedPlan(trades, 1, "trades", datetime.now(timezone.utc), last_day=today - timedelta(days=OPEN_DAYS))
    lake, source = Lake(scratch / "roll"), seed.SeedTrades(plan)
    lake.ensure(SILVER)
    for start in range(0, trades, 1_000_000):
        rows = silver_rows(seed.parsed_rows(source.records(start, min(1_000_000, trades - start))))
        write_deltalake(lake.open(SILVER), SILVER.stored_rows(rows), mode="append", target_file_size=OPEN_FILE_BYTES)
    live = silver_rows(seed.parsed_rows(seed.SeedTrades(dataclasses.replace(plan, last_day=today)).records(0, 1)))
    write_deltalake(lake.open(SILVER), SILVER.stored_rows(live), mode="append")  # today's: the day is closed
    opened = lake.open(SILVER)
    files, size = len(opened.file_uris()), sum(opened.get_add_actions(flatten=True).column("size_bytes").to_pylist())
    peak_before = proc_kib(os.getpid(), "VmHWM")
    sampler = OwnRss().start()
    started = time.perf_counter()
    rolled = lake.roll_closed_days(SILVER)
    assert rolled == [plan.last_day], rolled
    seconds = time.perf_counter() - started
    sampler.stop()
    rss = sampler.kib
    after = lake.open(SILVER)
    return (f"roll of a closed day: {trades:,} trades, {files:,} files of {size / files / 1e6:.1f} MB -> "
            f"{len(after.file_uris()) - 1} in {seconds:.1f} s ({size / seconds / 1e6:.0f} MB/s, one thread); "
            f"RSS {rss[0] / 1024:.0f} -> peak {max(rss) / 1024:.0f} MiB (the process's peak before: "
            f"{peak_before / 1024:.0f} MiB)")


def section(lines: list[str], argv: list[str], args: argparse.Namespace) -> str:
    """The page's "## Live files: " section."""
    found = machine()
    return "\n".join([
        f"{HEADING}silver's commits over {args.days} days at {args.rate:,} trades/s", "",
        f"Measured by `python -m bench.month_files{''.join(' ' + a for a in argv)}` on "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC ({found['cpu']}, {found['memory']}). Silver's Delta "
        "log as the pipeline leaves it, add actions only (a commit reads the log, not the files), and a batch's "
        "commit of one file timed on it. Without days every file is about 5 MB; with days the open days (today, "
        "yesterday) are too and each closed day is rolled into files of about 256 MiB. \"The lake's age\" "
        "compares the same hour of the day on day 2 and on the last day.", "",
        "```", *lines, "```", "",
        "- What limits it: a delta-rs commit reads the table's state, whose size is its live files; with days, "
        "most of them are the two open days' (about 1,300 a day at 1,000 trades/s), which a closed day's roll "
        "does not touch.",
        "- The roll runs on one core in a background thread of the driver, under the table's rewrite lock: the "
        "pipeline's appends go on meanwhile.", ""])


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    require_positive(parser, args, "days", "rate", "commits")
    if args.roll_trades < 0:
        parser.error("--roll-trades must be 0 or more")
    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    say(f"silver's log at {args.rate:,} trades/s: a batch's commit (median / p95 of {args.commits})")
    with tempfile.TemporaryDirectory(prefix="month-files-") as scratch:
        figures = {}
        for name, partitioned in (("without days", False), ("with days", True)):
            for age, days, hours in (("first hour", 1, 1.0), ("day 2", 2, 24.0), (f"day {args.days}", args.days, 24.0)):
                parts = layout(days, args.rate, partitioned, hours)
                table = make_log(Path(scratch) / f"{name}-{age}".replace(" ", "-"), parts)
                times = sorted(time_commits(table, partitioned, args.commits))
                median, p95 = statistics.median(times), times[int(0.95 * (len(times) - 1))]
                figures[(name, age)] = median
                say(f"  {name:<13} {age:<11} {sum(n for _, n in parts):>7,} live files: {median:6.1f} / {p95:6.1f} ms")
        for name in ("without days", "with days"):
            month = figures[(name, f"day {args.days}")]
            say(f"  {name}: day {args.days} / day 2 = {month / figures[(name, 'day 2')]:.2f}x (the lake's age), "
                f"/ first hour = {month / figures[(name, 'first hour')]:.2f}x")
        if args.roll_trades:
            say(roll_figures(Path(scratch), args.roll_trades))
    page = write_section(args.out, HEADING, section(lines, argv if argv is not None else sys.argv[1:], args))
    print(f"wrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
