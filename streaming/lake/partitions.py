"""How the tables' files are laid out and kept few: partitions, compaction, vacuum, the roll of
closed days.

Every table gains a small file in most micro-batches. It is compacted every so many versions
(`Table.compact_every`) into files of `Table.compact_to`, under the table's lock, after the
batch is committed, so none of it conflicts with a write: by its writer, or behind the batch
(upkeep.py). Every VACUUM_EVERY compactions it is vacuumed too.

A table partitioned by day (bronze, silver) is compacted so too, partition by partition. Its
open days (the newest day and the one before, which late trades reach) gain files all day; a
day before them is closed, and *rolled*: its files rewritten into files of
CLOSED_DAY_FILE_BYTES, once, by a background thread, so the table's live files, which
every commit through delta-rs pays for, stay a few per day however old the lake is. A roll
rewrites gigabytes: it holds the table's rewrite lock, not its write lock, so the pipeline's
appends and its MERGEs of open days that only insert (a redelivered trade's) go on meanwhile:
Delta commits them and a compaction of other files in either order. A MERGE that may remove
files (its commit would fail the roll's) or that reads a closed day (the roll's commit would
fail it) takes the rewrite lock and waits, a day's roll at most.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from datetime import date, datetime, timedelta, timezone
from typing import Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from streaming.lake.sql import quote
from streaming.lake.tables import CLOSED_DAY_FILE_BYTES, DAY, OPEN_DAYS, Table

log = logging.getLogger(__name__)

# The writer vacuums every this many compactions.
VACUUM_EVERY = 10
PAUSE_BETWEEN_DAYS = 0.5  # seconds a roll of several days lets go of the rewrite lock
ROLL_STOP_WAIT_S = 60.0  # how long a stop waits for a roll to finish the day it is rewriting
Opener = Callable[[], "DeltaTable | None"]

_rewrite_locks: dict[str, threading.Lock] = {}
_rolls: dict[str, tuple[str, threading.Thread]] = {}  # location -> (table name, its background roll)
_stopping = threading.Event()  # a stop is under way: a roll ends after the day it is rewriting
_guard = threading.Lock()


@contextlib.contextmanager
def rewriting(location: str, wait: bool = True) -> Iterator[bool]:
    """Hold the lock of whoever removes files of the table at `location` (a MERGE, a
    compaction, a roll); yields False, holding nothing, if `wait` is False and it is taken."""
    with _guard:
        lock = _rewrite_locks.setdefault(location, threading.Lock())
    got = lock.acquire(blocking=wait)
    try:
        yield got
    finally:
        if got:
            lock.release()


def first_open_day(newest: date | None, today: date | None = None) -> date:
    """The first day still written to, the days before it closed: the day before the table's
    newest (data from the past, a benchmark's or a load's, stays open while it is written), or
    before today if that is older (one trade dated tomorrow does not close today)."""
    today = today or datetime.now(timezone.utc).date()
    return min(today, newest or today) - timedelta(days=OPEN_DAYS - 1)


def must_wait_for_roll(table: Table, rows: pa.Table, may_remove_files: bool, today: date | None = None) -> bool:
    """Whether a MERGE of these rows (stored_rows) into the table must hold its rewrite lock."""
    if not table.day_of or rows.num_rows == 0:
        return False
    return may_remove_files or pc.min(rows[DAY]).as_py() < first_open_day(None, today)


def compact_now_and_then(table: Table, location: str, open_table: Opener, version: int | None = None) -> None:
    """Every `table.compact_every` versions, rewrite the table's small files (partition by
    partition, if it has days) into files of `table.compact_to`, and vacuum now and then
    (`compact`). Called by the writer, under the table's lock, with the version it just wrote
    if it knows it (else the table is opened to see)."""
    every = table.compact_every
    if not every or (version is not None and version % every):
        return
    opened = open_table()
    version = opened.version() if opened is not None else None
    if opened is None or version is None or version % every:
        return
    compact(table, location, opened, open_table, vacuum=vacuum_due(table, version))


def compaction_due(table: Table, version: int) -> bool:
    return table.compact_every is not None and version % table.compact_every == 0


def vacuum_due(table: Table, version: int) -> bool:
    return table.compact_every is not None and version % (table.compact_every * VACUUM_EVERY) == 0


def compact(table: Table, location: str, opened: DeltaTable, open_table: Opener, vacuum: bool) -> None:
    """Rewrite the open table's small files, under its lock (a MERGE's removes must not meet a
    compaction's). vacuum: then delete the files no version in the log uses that are older than
    the table's history (what compactions replaced, and what a crashed attempt wrote but never
    committed), and start a roll of the closed days."""
    with rewriting(location, wait=False) if table.day_of else contextlib.nullcontext(True) as free:
        if not free:
            log.debug("not compacting %s: a roll of its closed days is rewriting it", table.name)
            return
        metrics = opened.optimize.compact(target_size=table.compact_to)
    log.debug("compacted %s: %s files into %s", table.name, metrics.get("numFilesRemoved"),
              metrics.get("numFilesAdded"))
    if vacuum:
        # Full: a checkpoint drops a replaced file's tombstone once it is older than the
        # history, so a lite vacuum, which deletes only what the log lists, would miss it.
        compacted = open_table()
        assert compacted is not None  # it was there a moment ago, under our lock
        removed = compacted.vacuum(dry_run=False, full=True)
        log.debug("vacuumed %s: %d files", table.name, len(removed))
        if table.day_of:
            roll_in_background(table, location, open_table)


def repartition(table: Table, opened: DeltaTable) -> None:
    """Rewrite a table an older version made without the catalog's partitions, once, in one
    commit that keeps its history and its recorded batches. Its rows stream through, so memory
    does not grow with it; it takes as long as writing the table anew."""
    started = time.perf_counter()
    log.warning("%s is not partitioned by %s (made by an older version): rewriting its %d files so, once",
                table.name, ", ".join(table.partition_by) or "nothing", len(opened.file_uris()))
    present = set(opened.schema().to_arrow().names)
    kept = [c for c in table.columns if c in present]

    def stored(batches: Iterator) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows = pa.table(batch)
            for name in table.columns:
                if name not in present:  # a column added since: nulls, as a read of the old files gives
                    field = table.schema.field(name)
                    rows = rows.append_column(field, pa.nulls(rows.num_rows, field.type))
            yield from table.stored_rows(rows).to_batches()

    sql = f"SELECT {', '.join(quote(c) for c in kept)} FROM t"
    rows = pa.RecordBatchReader.from_batches(table.stored_schema,
                                             stored(QueryBuilder().register("t", opened).execute(sql)))
    write_deltalake(opened, rows, mode="overwrite", schema_mode="overwrite",
                    partition_by=list(table.partition_by) or None)
    log.warning("%s rewritten in %.1f s", table.name, time.perf_counter() - started)


def days_to_roll(files: pa.Table, before: date, file_bytes: int = CLOSED_DAY_FILE_BYTES) -> list[date]:
    """The days before `before`, oldest first, with two files small enough to be one:
    what a compaction into files of `file_bytes` would rewrite. `files`: a version's add
    actions, flattened (a `partition.day` and a `size_bytes` column)."""
    small = files.filter(pc.and_(pc.less(files[f"partition.{DAY}"], pa.scalar(before, pa.date32())),
                                 pc.less(files["size_bytes"], file_bytes)))
    days = []
    for day in sorted(pc.unique(small[f"partition.{DAY}"]).to_pylist()):
        sizes = sorted(small.filter(pc.equal(small[f"partition.{DAY}"], pa.scalar(day, pa.date32())))["size_bytes"]
                       .to_pylist())
        if len(sizes) > 1 and sizes[0] + sizes[1] <= file_bytes:
            days.append(day)
    return days


def roll_closed_days(table: Table, location: str, open_table: Opener, today: date | None = None) -> list[date]:
    """Rewrite the files of each closed day that could be fewer into files of
    CLOSED_DAY_FILE_BYTES, a day per commit, oldest first; the days rolled."""
    if not table.day_of:
        return []
    opened = open_table()
    if opened is None:
        return []
    files = pa.table(opened.get_add_actions(flatten=True))
    newest = pc.max(files[f"partition.{DAY}"]).as_py() if files.num_rows else None
    rolled: list[date] = []
    for day in days_to_roll(files, first_open_day(newest, today)):
        # The pause lets a MERGE waiting for the lock have it first.
        if _stopping.is_set() or (rolled and _stopping.wait(PAUSE_BETWEEN_DAYS)):
            break
        started = time.perf_counter()
        with rewriting(location):
            opened = open_table()
            assert opened is not None  # the roll removes no table
            # One thread: the pipeline's batches keep the other cores.
            metrics = opened.optimize.compact(partition_filters=[(DAY, "=", day.isoformat())],
                                              target_size=CLOSED_DAY_FILE_BYTES, max_concurrent_tasks=1)
        log.info("rolled %s's closed day %s: %s files into %s in %.1f s", table.name, day,
                 metrics.get("numFilesRemoved"), metrics.get("numFilesAdded"), time.perf_counter() - started)
        rolled.append(day)
    return rolled


def roll_in_background(table: Table, location: str, open_table: Opener) -> None:
    """Start a roll of the table's closed days in a thread of its own, unless one is running.
    A stop waits for it to finish the day it is rewriting (finish_rolls)."""
    with _guard:
        if location in _rolls:
            return

        def roll() -> None:
            try:
                roll_closed_days(table, location, open_table)
            except Exception as error:  # noqa: BLE001 - a roll changes no data: the next one tries again
                log.warning("rolling %s's closed days failed, to be tried again later: %s", table.name, error)
            finally:
                with _guard:
                    _rolls.pop(location, None)

        thread = threading.Thread(target=roll, name=f"roll-{table.name}", daemon=True)
        _rolls[location] = (table.name, thread)
        thread.start()


def finish_rolls(timeout_s: float = ROLL_STOP_WAIT_S) -> list[str]:
    """Have the background rolls end after the day each is rewriting, and wait for them, at
    most timeout_s in all: a process that exits while a thread is inside delta-rs may abort.
    Returns the tables still rolling when the time ran out; what they wrote but did not commit,
    a vacuum removes."""
    with _guard:
        running = list(_rolls.values())
    if not running:
        return []
    _stopping.set()
    try:
        log.info("waiting for the roll of %s's closed days to finish the day under way (at most %.0f s) ...",
                 ", ".join(name for name, _ in running), timeout_s)
        deadline = time.monotonic() + timeout_s
        for _, thread in running:
            thread.join(max(0.0, deadline - time.monotonic()))
        return [name for name, thread in running if thread.is_alive()]
    finally:
        _stopping.clear()
