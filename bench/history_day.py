"""`python -m bench.history_day`: what a push pays for the live day's change history as the day fills.

Gold's history gains a row per change of a window, about 5 a second with batches back to back at
1,000 trades/s: some 430,000 rows by the end of a UTC day. For each --rows size the tool writes a
day of that many changes into a fresh lake (256 KiB files, as compaction leaves them, then
--files small ones, a batch's each), then --steps times appends one batch's changes (the current
window, now and then an older one late) and times what the push does with them: the page's
HistoryReader reading the new file and `PageContext.day_history` working out the first-reported
values and the span. Prints p50 and p95 per size; the lake stays on this machine's disk.
"""

from __future__ import annotations

import random
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa

from bench.command_line import require_positive, run_tool, tool_parser
from bench.results import percentile, print_taken
from dashboard.context import PageContext, PageReaders
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import DAY_FILE_BYTES, SUMMARY_HISTORY
from streaming.medallion.history import LATE, ON_TIME

COMMAND = "python -m bench.history_day"
DAY_START = datetime(2026, 3, 2, tzinfo=timezone.utc)
WINDOW_US = 15 * 60 * 1_000_000
DAY_US = 86_400 * 1_000_000
LATE_SHARE = 0.05  # of the changes, to a window before the current one
ROW_BYTES = 60  # about what a history row takes in a compacted file


def day_changes(rows: int, seed: int = 1) -> pa.Table:
    """`rows` changes spread over the day in time order: each to the window it falls in, a share
    to the window before."""
    rng = np.random.default_rng(seed)
    changed = np.sort(rng.integers(0, DAY_US, rows))
    window = changed // WINDOW_US
    late = (rng.random(rows) < LATE_SHARE) & (window > 0)
    start_us = int(DAY_START.timestamp() * 1e6)
    return changes_table(start_us + (window - late) * WINDOW_US, start_us + changed, np.where(late, LATE, ON_TIME),
                         np.arange(rows))


def changes_table(starts_us, changed_us, causes, batches) -> pa.Table:
    starts_us = np.asarray(starts_us, dtype="int64")
    starts, ends = (pa.array(us.astype("datetime64[us]")) for us in (starts_us, starts_us + WINDOW_US))
    count = len(batches)
    return pa.table({
        "window_start": starts, "window_end": ends, "buy_amount": np.linspace(1.0, 2.0, count),
        "sell_amount": np.ones(count), "settlement_amount": np.ones(count), "trade_count": np.asarray(batches),
        "changed_at": pa.array(np.asarray(changed_us, dtype="datetime64[us]")), "cause": pa.array(list(causes)),
        "batch_id": np.asarray(batches), "query_id": pa.array(["bench"] * count),
    }).cast(SUMMARY_HISTORY.schema)


def seed_day(lake: Lake, rows: int, small_files: int) -> int:
    """A day of `rows` changes in the lake: files of about DAY_FILE_BYTES, then `small_files` of a
    batch each. The next batch id."""
    changes = day_changes(rows)
    per_file = max(1, DAY_FILE_BYTES // ROW_BYTES)
    large = max(0, rows - small_files)
    batch = 0
    for low in range(0, large, per_file):
        lake.publish(SUMMARY_HISTORY, changes.slice(low, min(per_file, large - low)), Batch("seed", batch))
        batch += 1
    for low in range(large, rows):
        lake.publish(SUMMARY_HISTORY, changes.slice(low, 1), Batch("seed", batch))
        batch += 1
    return batch


def next_batch(batch: int, rng: random.Random) -> pa.Table:
    """One batch's changes at the day's end: the last window, and now and then the one before."""
    start_us = int(DAY_START.timestamp() * 1e6) + DAY_US - WINDOW_US
    changed_us = int(DAY_START.timestamp() * 1e6) + DAY_US - 1_000_000 + batch
    starts, causes = [start_us], [ON_TIME]
    if rng.random() < 0.3:
        starts, causes = [*starts, start_us - WINDOW_US], [*causes, LATE]
    return changes_table(starts, [changed_us] * len(starts), causes, [batch] * len(starts))


def time_pushes(lake: Lake, first_batch: int, steps: int) -> list[float]:
    """ms per new batch of changes: the page's reader and day_history after the file is in."""
    context = PageContext(PageReaders.of(lake), status=dict, lake=lake)
    day = DAY_START.date().isoformat()
    context.day_history(day)  # the day read once, as a page opened before
    rng, taken = random.Random(1), []
    for batch in range(first_batch, first_batch + steps):
        lake.publish(SUMMARY_HISTORY, next_batch(batch, rng), Batch("bench", batch))
        began = time.perf_counter()
        context.day_history(day)
        taken.append((time.perf_counter() - began) * 1000)
    return taken


def report(taken: dict[int, list[float]]) -> list[str]:
    return [f"history-day: {rows:,} rows: p50 {percentile(ms, 50):.1f} ms, p95 {percentile(ms, 95):.1f} ms a new file"
            for rows, ms in taken.items()]


def build_parser():
    parser = tool_parser(COMMAND, "What a push pays for the live day's change history as the day fills.",
                         ("--steps", int, 40, "new files timed per size"),
                         ("--files", int, 60, "small files after the compacted ones"))
    parser.add_argument("--rows", default="25000,100000,430000",
                        help="the day's sizes, comma-separated (default: %(default)s; 430,000 is a day back to back)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    require_positive(parser, args, "steps", "files")
    try:
        sizes = [int(size) for size in args.rows.split(",") if size.strip()]
    except ValueError:
        parser.error("--rows takes whole numbers, comma-separated")
    if not sizes or min(sizes) <= 0:
        parser.error("--rows takes sizes above zero")

    def measure() -> int:
        taken = {}
        for rows in sizes:
            work = Path(tempfile.mkdtemp(prefix="trade-summary-history-day-"))
            try:
                print(f"history-day: a day of {rows:,} changes ...", flush=True)
                lake = Lake(work)
                taken[rows] = time_pushes(lake, seed_day(lake, rows, min(args.files, rows)), args.steps)
            finally:
                shutil.rmtree(work, ignore_errors=True)
        print_taken("history-day", report(taken), taken)
        return 0

    return run_tool("history day", measure)


if __name__ == "__main__":
    sys.exit(main())
