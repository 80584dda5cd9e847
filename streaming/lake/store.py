"""The lake: where the tables of the catalog live, and the one way they are written and read.

`Lake(root)` turns a catalog `Table` into a location under the data dir (a string, so the root
may be a local path or an object-store URI), keeps its tables open (open_tables.py), and has:

* `publish(table, rows, batch)`: rows into the table by its write policy, once per batch. The
  batch is recorded in the same Delta commit (an app transaction: table@writer -> batch id), so a
  micro-batch that Spark replays after a crash finds its id recorded and is skipped. A local
  table's appends and rewrites are committed as the log's next JSON file (log_commit.py).
* `read(table, columns, where)` / `query(table, sql)`: reads through delta-rs's SQL engine,
  which opens only the files whose statistics can match (docs/lake.md#reads says why).
* `writing(*tables)`: the tables' locks, for a writer that must read and write several of them
  as one step (the gold sink, a backfill). `publish` takes its table's lock itself.

The conditions it reads by are built in sql.py; the pipeline's reads, by name, are lookups.py.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import logging
import threading
import time
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, QueryBuilder, Transaction, write_deltalake
from deltalake.schema import Field as DeltaField
from deltalake.transaction import AddAction

from streaming.lake import log_commit, merges, midway, open_tables, partitions, tables, upkeep
from streaming.lake.files import DataFile, LiveFile, write_file
from streaming.lake.locations import is_remote, local_path
from streaming.lake.sql import in_time_range, plain_strings, quote
from streaming.lake.tables import DAY, Table, Write
from streaming.rows import one_per_key

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Batch:
    """Who writes (a streaming query's id, which lasts as long as its checkpoint, or
    'backfill') and which of its batches. A fresh checkpoint (a replay) restarts batch ids at
    0 under a new query id, so its batches are never mistaken for the old ones."""

    writer: str
    id: int

    def app_id(self, table: Table) -> str:
        return f"{table.name}@{self.writer}"


class _HeldLocks(threading.local):
    """The table locations whose locks this thread holds through `Lake.writing`, or has been
    lent by the thread that holds them (`Lake.at_once`)."""

    def __init__(self):
        self.locations: frozenset[str] = frozenset()


_held = _HeldLocks()
_CATALOG_ORDER = {table.name: index for index, table in enumerate(tables.ALL)}  # locks are taken in this order


@functools.cache
def _writers() -> concurrent.futures.ThreadPoolExecutor:
    # A live batch's step runs up to nine commits at once, two steps waiting on others meanwhile.
    return concurrent.futures.ThreadPoolExecutor(max_workers=12, thread_name_prefix="lake-writer")
# One lock per table location in this process, whichever Lake object writes it: two MERGEs
# into one Delta table at once would conflict.
_locks: dict[str, threading.RLock] = {}
_locks_guard = threading.Lock()


def _table_lock(location: str) -> threading.RLock:
    with _locks_guard:
        return _locks.setdefault(location, threading.RLock())


class Lake:
    """The tables of the catalog under one root (a data dir)."""

    def __init__(self, root: str | Path, storage_options: Mapping[str, str] | None = None,
                 upkeep_in_background: bool = False):
        """upkeep_in_background: checkpoints and compactions of the tables the log writer
        commits are done by a thread of their own, not in the commit (upkeep.py)."""
        self.root = str(root).rstrip("/") or "/"
        self.storage_options = dict(storage_options) if storage_options else None
        self.upkeep_in_background = upkeep_in_background

    def __repr__(self) -> str:
        return f"Lake({self.root!r})"  # never the storage options: they may hold secrets

    def location(self, table: Table) -> str:
        return f"{self.root}/{table.name}"

    def spark_location(self, table: Table) -> str | None:
        """Where delta-spark finds the table: a local data dir only (Spark's object-store file
        systems need Hadoop jars and settings of their own), else None."""
        location = self.location(table)
        return None if is_remote(location) else local_path(location).resolve().as_uri()

    # -- opening --------------------------------------------------------------------------------
    def open(self, table: Table) -> DeltaTable | None:
        """The table at its latest version, or None if it does not exist yet: the writers' one
        copy for whoever holds the table's lock, else this thread's own (open_tables.py)."""
        location = self.location(table)
        return open_tables.latest(location, self.storage_options, for_writers=location in _held.locations)

    def ensure(self, table: Table) -> None:
        """Create the table empty, so that readers find it from the start; bring a table made by
        an older version up to the catalog: its partitions, the columns it lacks, its properties."""
        wanted = table.delta_properties
        opened = self.open(table)
        if opened is None:
            location = self.location(table)
            if not is_remote(location):
                local_path(location).mkdir(parents=True, exist_ok=True)
            DeltaTable.create(location, table.stored_schema, mode="ignore", partition_by=list(table.partition_by),
                              configuration=wanted, storage_options=self.storage_options)
            return
        if list(opened.metadata().partition_columns) != list(table.partition_by):
            partitions.repartition(table, opened)
            opened = self.open(table)
            assert opened is not None  # just rewritten
        properties = opened.metadata().configuration
        if any(properties.get(key) != value for key, value in wanted.items()):
            opened.alter.set_table_properties(wanted)
        present = set(opened.schema().to_arrow().names)
        missing = [DeltaField.from_arrow(f) for f in table.stored_schema if f.name not in present]
        if missing:
            log.info("adding columns %s to %s", [f.name for f in missing], table.name)
            opened.alter.add_columns(missing)

    def ensure_all(self) -> None:
        for table in tables.ALL:
            self.ensure(table)

    # -- reading --------------------------------------------------------------------------------
    def open_version(self, table: Table, version: int) -> DeltaTable | None:
        """The table as it stood at `version` (Delta keeps every version until a VACUUM removes
        the files it needs), or None if there is no such version."""
        return open_tables.at_version(self.location(table), self.storage_options, version)

    def history(self, table: Table, limit: int | None = None) -> list[dict]:
        """The table's commits, newest first: version, timestamp (ms), operation, ..."""
        opened = self.open(table)
        return [] if opened is None else opened.history(limit)

    def query(self, table: Table, sql: str, version: int | None = None) -> pa.Table | None:
        """Run `sql` on the table (at `version`, or its latest), named `t` in it; None if the
        table (or that version) does not exist. No fragment per file first, unlike a pyarrow
        dataset (docs/lake.md#reads)."""
        opened = self.open(table) if version is None else self.open_version(table, version)
        if opened is None:
            return None
        return plain_strings(pa.table(QueryBuilder().register("t", opened).execute(sql).read_all()))

    def scan(self, table: Table, columns: Sequence[str] | None = None, where: str | None = None,
             version: int | None = None) -> Iterator[pa.RecordBatch]:
        """The rows matching `where` (SQL on the table's columns), or all, at `version` or the
        latest, a record batch at a time (a pass over a large table holds one) in the table's
        schema's types; none when the table does not exist (yet)."""
        names = list(columns) if columns is not None else table.columns
        opened = self.open(table) if version is None else self.open_version(table, version)
        if opened is None:
            return
        sql = f"SELECT {', '.join(quote(c) for c in names)} FROM t" + (f" WHERE {where}" if where else "")
        wanted = table.schema_of(names)
        for batch in QueryBuilder().register("t", opened).execute(sql):
            yield pa.RecordBatch.from_arrays([column.cast(field.type) for column, field in zip(batch.columns, wanted)],
                                             schema=wanted)

    def read(self, table: Table, columns: Sequence[str] | None = None, where: str | None = None,
             version: int | None = None) -> pa.Table:
        """scan()'s rows as one table: empty when the table does not exist (yet)."""
        names = list(columns) if columns is not None else table.columns
        return pa.Table.from_batches(list(self.scan(table, names, where, version)), table.schema_of(names))

    def key_range(self, table: Table, low: datetime, high: datetime) -> pa.Table:
        """The rows whose key (a time) lies in [low, high]. A table merged by rewrite is read
        from the files that may hold them, as plain Parquet: no SQL plan (merges.py)."""
        live = self._live_files(table) if merges.can_rewrite(table) else None
        if live is not None:
            return merges.key_range(table, self.location(table), self.storage_options, live[0], low, high)
        return self.read(table, where=in_time_range(table.keys[0], low, high))

    # -- writing --------------------------------------------------------------------------------
    def _lock(self, table: Table) -> contextlib.AbstractContextManager:
        location = self.location(table)
        if location in _held.locations:
            return contextlib.nullcontext()  # held by this thread, or lent to it (at_once)
        return _table_lock(location)

    def steady(self, *some: Table) -> bool:
        """Whether no writer in this process is midway through these tables: a reader that wants
        them at one step looks again later if not."""
        return midway.steady([self.location(table) for table in some])

    @contextlib.contextmanager
    def writing(self, *some: Table) -> Iterator[midway.Writing]:
        """Hold these tables' locks (in catalog order, so two writers never wait on each other),
        midway through them until the end or `Writing.settle`."""
        ordered = sorted(set(some), key=lambda t: (_CATALOG_ORDER.get(t.name, len(_CATALOG_ORDER)), t.name))
        with contextlib.ExitStack() as stack:
            for table in ordered:
                stack.enter_context(self._lock(table))
            before = _held.locations
            taken = {self.location(table) for table in ordered} - before
            _held.locations = before | taken
            held = midway.Writing(taken, self.location)
            try:
                yield held
            finally:
                held.settle_all()
                _held.locations = before

    def at_once(self, *steps: Callable[[], object]) -> None:
        """Run steps that write different tables in parallel threads (delta-rs does its work
        without Python's lock), and raise the first failure once all have ended. The threads
        share the locks this thread holds (`writing`) while it waits for them."""
        lent = _held.locations

        def run(step: Callable[[], object]) -> None:
            _held.locations = lent
            try:
                step()
            finally:
                _held.locations = frozenset()

        futures = [_writers().submit(run, step) for step in steps]
        concurrent.futures.wait(futures)
        for future in futures:
            future.result()

    def published(self, table: Table, batch: Batch) -> bool:
        """Whether this batch of this writer is already in the table."""
        writer = self._log_writer(table)
        if writer is not None:
            return writer.recorded(batch.app_id(table)) >= batch.id
        opened = self.open(table)
        done = opened.transaction_version(batch.app_id(table)) if opened is not None else None
        return done is not None and done >= batch.id

    def publish(self, table: Table, rows: pa.Table, batch: Batch, *, write: Write | None = None,
                narrow: bool = True) -> bool:
        """Write `rows` by the table's policy (or `write`), recording the batch in the same
        commit; False if there was nothing to write or the batch is there already.
        narrow=False: match on the keys alone, over the whole table (for records read again,
        whose narrowing columns may have changed)."""
        if rows.num_rows == 0:
            return False  # an empty commit would still record the batch, but there is nothing to do
        write = write or table.write
        # MERGE rejects a source with two rows for one key.
        rows = one_per_key(table.stored_rows(rows), table.keys,
                           keep="last" if write in (Write.UPSERT, Write.ADD) else "first")
        commit = CommitProperties(app_transactions=[Transaction(app_id=batch.app_id(table), version=int(batch.id))])
        with self.writing(table):
            if self.published(table, batch):
                log.info("skipping %s batch %d of %s: already committed", table.name, batch.id, batch.writer)
                return False
            own_batch = write is Write.APPEND_ONCE_PER_BATCH and self._own_batch(rows, batch)
            if own_batch and self._log_writer(table) is not None:
                return self._add_files(table, self.write_files(table, rows), batch)
            if not (write in (Write.UPSERT, Write.ADD) and merges.can_rewrite(table)
                    and self._rewrite(table, rows, write, batch, commit)):
                opened = self.open(table)
                if opened is None or own_batch:
                    self._append(table, opened, rows, commit)
                else:
                    may_remove = write in (Write.UPSERT, Write.ADD) or (table.replace_when is not None and not narrow)
                    with (partitions.rewriting(self.location(table))
                          if partitions.must_wait_for_roll(table, rows, may_remove) else contextlib.nullcontext()):
                        merges.engine_merge(table, opened, rows, commit, write, narrow)
            self._after_commit(table)
        return True

    def _rewrite(self, table: Table, rows: pa.Table, write: Write, batch: Batch, commit: CommitProperties) -> bool:
        """A MERGE by rewriting the files its keys fall in (merges.py), committed into the log
        or through delta-rs; False, having done nothing, when the table's files cannot be read
        as plain Parquet (or it does not exist yet)."""
        live = self._live_files(table)
        if live is None:
            return False
        files, writer = live
        if writer is None:
            opened = self.open(table)
            assert opened is not None  # its files were just listed
            replace = merges.replace_by_engine(opened, table, commit)
        else:
            read_at = writer.version

            def replace(written: DataFile, touched: list[LiveFile]) -> None:
                if writer.commit([written], batch.app_id(table), batch.id, touched, read_at) is None:
                    raise log_commit.ConcurrentRewrite(f"{table.name}'s metadata changed while it was rewritten")
        merges.rewrite_merge(table, self.location(table), self.storage_options, files, rows, write, replace)
        return True

    def _live_files(self, table: Table) -> tuple[list[LiveFile], log_commit.LogWriter | None] | None:
        """A table merged by rewrite: its live files with its key's min/max, from its log writer
        for whoever holds its lock, else from delta-rs (with no writer); None when a plain
        Parquet read of them would be wrong, or the table does not exist."""
        writer = self._log_writer(table)
        if writer is not None and writer.files is not None:
            return list(writer.files.values()), writer
        opened = self.open(table)
        live = merges.live_of(opened, table) if opened is not None else None
        return None if live is None else (live, None)

    def write_files(self, table: Table, rows: pa.Table) -> list[DataFile]:
        """Write `rows` (the table's columns) as new Parquet files into the table's location, one
        per partition they fall in, for `commit_files` to add: what a Spark task does."""
        rows = table.stored_rows(rows)
        if not table.day_of:
            return [write_file(self.location(table), rows, self.storage_options)]
        return [write_file(self.location(table), rows.filter(pc.equal(rows[DAY], day)).drop_columns([DAY]),
                           self.storage_options, {DAY: day.as_py().isoformat()})
                for day in pc.unique(rows[DAY])]

    def commit_files(self, table: Table, files: Sequence[DataFile], batch: Batch) -> bool:
        """Add files written into the table's location (files.write_file) in one commit that
        records the batch; False if there are none or the batch is there already. The writer
        vouches that their keys are new to the table."""
        if not files:
            return False
        with self.writing(table):
            if self.published(table, batch):
                log.info("skipping %s batch %d of %s: already committed", table.name, batch.id, batch.writer)
                return False
            return self._add_files(table, files, batch)

    def _add_files(self, table: Table, files: Sequence[DataFile], batch: Batch) -> bool:
        """commit_files' commit, under the table's lock: written into the log (log_commit.py), or
        by delta-rs when the log is not this process's to write."""
        writer = self._log_writer(table)
        appended = writer.commit(files, batch.app_id(table), batch.id) if writer is not None else None
        if appended is False:
            return False  # another writer recorded the batch first
        if appended is None:
            log_commit.forget(self.location(table))
            self.ensure(table)
            opened = self.open(table)
            assert opened is not None  # ensure() created it if it was not there
            commit = CommitProperties(app_transactions=[Transaction(app_id=batch.app_id(table), version=int(batch.id))])
            added_at = int(time.time() * 1000)
            opened.create_write_transaction(
                [AddAction(f.path, f.size, f.partition_values, added_at, True, f.stats) for f in files],
                mode="append", schema=table.stored_schema, commit_properties=commit)
        self._after_commit(table)
        return True

    def _after_commit(self, table: Table) -> None:
        location = self.location(table)
        writer = log_commit.held(location)
        if writer is not None and not writer.caught_up():
            writer = None
        if writer is not None and writer.wrote_last and self.upkeep_in_background:
            upkeep.after_commit(table, writer, _table_lock(location))  # the writer's commit: behind the batch
            return
        if writer is not None:
            log_commit.checkpoint_if_due(writer, lambda: self.open(table))
        partitions.compact_now_and_then(table, location, lambda: self.open(table),
                                        writer.version if writer is not None else None)

    def _log_writer(self, table: Table) -> log_commit.LogWriter | None:
        """The table's writer of its log's JSON for whoever holds its lock; None for anyone
        else, and when delta-rs must write the table (log_commit.py)."""
        location = self.location(table)
        if location not in _held.locations:
            return None
        return log_commit.writer_for(table, location, lambda: self.open(table),
                                     table.keys[0] if merges.can_rewrite(table) else None)

    @staticmethod
    def _own_batch(rows: pa.Table, batch: Batch) -> bool:
        """Whether every row is keyed by this very (writer, batch)."""
        return (pc.all(pc.equal(rows["query_id"], batch.writer)).as_py()
                and pc.all(pc.equal(rows["batch_id"], batch.id)).as_py())

    def _append(self, table: Table, opened: DeltaTable | None, rows: pa.Table, commit: CommitProperties) -> None:
        location = self.location(table)
        if opened is None and not is_remote(location):
            local_path(location).mkdir(parents=True, exist_ok=True)
        write_deltalake(opened if opened is not None else location, rows, mode="append", commit_properties=commit,
                        partition_by=list(table.partition_by) or None,
                        storage_options=None if opened is not None else self.storage_options)

    def roll_closed_days(self, table: Table, today: date | None = None) -> list[date]:
        """Rewrite the closed days' files into large ones now (partitions.py); the days rolled."""
        return partitions.roll_closed_days(table, self.location(table), lambda: self.open(table), today)
