"""A local table's commits written straight into its `_delta_log/`: the writing side of log_tail.py.

A commit through delta-rs costs 13-22 ms of CPU however little it carries: it lists the log three
times and brings its snapshot up to date (docs/live-batch.md). A live batch makes six to eight,
five batches a second. A commit that adds files (an append), or adds one and removes the files
it was made from (gold's rewrite, merges.py), and records the batch, is one small file of JSON
actions, written here as any Delta writer writes it: the next version's file, made only if no
one has made it yet (a hard link, which fails when the name is taken). An append that loses that
race reads what the winner committed and takes the next version, or stops if the winner recorded
the same batch; a rewrite whose table changed since it read it fails (`ConcurrentRewrite`).

For a rewrite the writer keeps the table's live files (`track`: with the min/max of its key),
brought up to date from the log as the page's readers are (log_tail.py).

Checkpoints and the log's cleanup stay delta-rs's, at the versions its own commit would make
them (`delta.checkpointInterval`): the caller asks `checkpoint_due`. What this does not write,
delta-rs does as before: a remote table, a protocol above reader 1 / writer 2 or with table
features, a column invariant, and any table once another writer changed its metadata or
protocol (then the writer is made afresh from delta-rs's view).
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from typing import Callable, Sequence

from deltalake import DeltaTable

from streaming.lake import open_tables
from streaming.lake.files import DataFile, LiveFile, live_files
from streaming.lake.locations import is_remote, local_path
from streaming.lake.log_tail import commit_file, commit_mark, live_file, tail
from streaming.lake.tables import Table

log = logging.getLogger(__name__)

ENGINE = "trade-summary"


class ConcurrentRewrite(RuntimeError):
    """Another writer committed to a table between a rewrite's read of its files and its commit."""


def writable(opened: DeltaTable) -> bool:
    """Whether a writer that knows only add actions and app transactions may append to the open
    table: reader 1 / writer 2 without table features, and no column invariant to enforce."""
    protocol = opened.protocol()
    return (protocol.min_reader_version == 1 and protocol.min_writer_version <= 2
            and not protocol.reader_features and not protocol.writer_features
            and "delta.invariants" not in opened.schema().to_json())


def plain_table(opened: DeltaTable, table: Table) -> bool:
    """Whether the open table is one whose rows a plain Parquet read and an add-and-remove
    commit handle as Delta does: no column mapping, change data feed, constraints, generated
    or identity columns (writer versions above 2, or table features), append-only flag, nor
    columns the catalog lacks."""
    protocol, configuration = opened.protocol(), opened.metadata().configuration
    return (protocol.min_reader_version == 1 and protocol.min_writer_version <= 2
            and not protocol.reader_features and not protocol.writer_features
            and configuration.get("delta.columnMapping.mode", "none") == "none"
            and configuration.get("delta.enableChangeDataFeed", "false") != "true"
            and configuration.get("delta.appendOnly", "false") != "true"
            and opened.schema().to_arrow().names == table.stored_schema.names)


class LogWriter:
    """One local table's appends, written as its log's next versions. Used under the table's
    lock (store.Lake.writing); other writers' commits (another process, delta-rs, delta-spark)
    are read from the log as they come."""

    def __init__(self, table: Table, location: str, opened: DeltaTable, track: str | None = None):
        self.table, self.location, self.track = table, location, track
        self.version = opened.version()
        self.mark = commit_mark(location, self.version)
        self.checkpoint_every = int(opened.metadata().configuration.get("delta.checkpointInterval", "100"))
        self._base, self._base_in = opened, open_tables.generation(location)  # for an app id not yet seen
        self._txns: dict[str, int] = {}  # app id -> its newest recorded batch, once asked or seen
        self._partition_types = {name: table.stored_schema.field(name).type for name in table.partition_by}
        self.wrote_last = False  # whether the version held is this writer's
        # The live files by path, with the min/max of `track`; None untracked, or if a plain read
        # of them would be wrong (files.live_files).
        listed = live_files(opened, track) if track is not None and plain_table(opened, table) else None
        self.files = None if listed is None else {f.path: f for f in listed}

    @classmethod
    def of(cls, table: Table, location: str, opened: DeltaTable, track: str | None = None) -> LogWriter | None:
        """A writer for the open table, or None when delta-rs must write it (see the module).
        track: keep its live files, with this column's min/max, for a rewrite."""
        if is_remote(location) or not writable(opened):
            return None
        writer = cls(table, location, opened, track)
        return writer if writer.mark is not None else None

    def checkpoint_due(self) -> bool:
        """Whether the version this writer just wrote is one delta-rs's commit would checkpoint."""
        return self.wrote_last and self.version % self.checkpoint_every == 0

    def caught_up(self) -> bool:
        """Read the commits others made since the version held; False when this writer may no
        longer write the table (a new metadata or protocol, the table made anew, a log that does
        not parse): the caller drops it."""
        found = tail(self.location, self.version, self.mark, self.track, self._partition_types)
        if found is None:
            return False
        if found.version != self.version:
            self.wrote_last = False
            for app_id, batch_id in found.txns.items():  # the tail's is the newest
                self._txns[app_id] = max(batch_id, self._txns.get(app_id, -1))
            if self.files is not None:
                files = {path: f for path, f in self.files.items() if path not in found.removed}
                self.files = files | {f.path: f for f in found.added}
            self.version, self.mark = found.version, commit_mark(self.location, found.version)
        return self.mark is not None

    def recorded(self, app_id: str) -> int:
        """The newest batch `app_id` recorded in the table (-1 for none), as of the version held
        or a later one."""
        if app_id not in self._txns:
            if self._base_in != open_tables.generation(self.location):  # its checkpoint may be gone
                self._base, self._base_in = DeltaTable(self.location), open_tables.generation(self.location)
            recorded = self._base.transaction_version(app_id)
            self._txns[app_id] = -1 if recorded is None else recorded
        return self._txns[app_id]

    def commit(self, files: Sequence[DataFile], app_id: str, batch_id: int, replaced: Sequence[LiveFile] = (),
               read_at: int | None = None) -> bool | None:
        """Commit `files` (written into the table's location) as the next version, removing
        `replaced` (live files of version `read_at`, which the caller read), and recording the
        batch: True once committed, False if another writer recorded the batch first, None if
        delta-rs must commit them (`caught_up` failed). ConcurrentRewrite: the table has changed
        since `read_at`."""
        if not self.caught_up():
            return None
        if replaced and self.version != read_at:
            raise ConcurrentRewrite(f"{self.table.name} changed from version {read_at} to {self.version} while "
                                    f"its files were rewritten")
        now = int(time.time() * 1000)
        added = [{"path": f.path, "partitionValues": f.partition_values, "size": f.size, "modificationTime": now,
                  "dataChange": True, "stats": f.stats} for f in files]
        actions = [
            {"commitInfo": {"timestamp": now, "operation": "WRITE", "operationParameters": {"mode": "Append"},
                            "engineInfo": ENGINE, "clientVersion": ENGINE}},
            *({"add": add} for add in added),
            *({"remove": {"path": f.path, "deletionTimestamp": now, "dataChange": True,
                          "partitionValues": {name: None if value is None else str(value)
                                              for name, value in f.partition}}} for f in replaced),
            {"txn": {"appId": app_id, "version": int(batch_id), "lastUpdated": now}},
        ]
        log_dir = local_path(self.location) / "_delta_log"
        written = log_dir / f"_commit_{uuid.uuid4()}.json.tmp"
        written.write_text("".join(json.dumps(action, separators=(",", ":")) + "\n" for action in actions))
        try:
            while True:
                try:
                    os.link(written, commit_file(self.location, self.version + 1))
                    break
                except FileExistsError:  # another writer took the version: see what it did
                    if replaced:
                        raise ConcurrentRewrite(f"another writer committed {self.table.name}'s version "
                                                f"{self.version + 1} while its files were rewritten") from None
                    if not self.caught_up():
                        return None
                    if self.recorded(app_id) >= batch_id:
                        return False
                except OSError as exc:  # a file system without hard links: delta-rs commits there
                    log.warning("committing %s through delta-rs: its log takes no hard link (%s)", self.table.name, exc)
                    _without_links.add(self.location)
                    return None
        finally:
            written.unlink(missing_ok=True)
        self.version += 1
        self.mark = commit_mark(self.location, self.version)
        self._txns[app_id] = max(int(batch_id), self._txns.get(app_id, -1))
        if self.files is not None:
            kept = {path: f for path, f in self.files.items() if path not in {r.path for r in replaced}}
            made = [live_file(add, self.track, self._partition_types) for add in added]
            self.files = None if None in made else kept | {f.path: f for f in made if f is not None}
        self.wrote_last = True
        return True


# Each local table's writer, by location, used only under the table's lock (store.Lake.writing).
_writers: dict[str, LogWriter] = {}
_without_links: set[str] = set()  # locations whose file system refused a hard link


def writer_for(table: Table, location: str, open_table: Callable[[], DeltaTable | None],
               track: str | None = None) -> LogWriter | None:
    """The table's writer, caught up with its log: made anew from delta-rs's view of the table
    (`open_table`) when there is none yet or the last had to give way; None when delta-rs must
    write the table. track: as LogWriter.of."""
    writer = _writers.get(location)
    if writer is not None and writer.caught_up():
        return writer
    if is_remote(location) or location in _without_links:
        return None
    opened = open_table()
    writer = LogWriter.of(table, location, opened, track) if opened is not None else None
    if writer is None:
        _writers.pop(location, None)
    else:
        _writers[location] = writer
    return writer


def checkpoint_if_due(writer: LogWriter, open_table: Callable[[], DeltaTable | None]) -> None:
    """What delta-rs does after its own commit, for the writer's: a checkpoint every so many
    versions, and the log files older than the table's history removed."""
    opened = open_table() if writer.checkpoint_due() else None
    if opened is not None:
        opened.create_checkpoint()
        opened.cleanup_metadata()


def held(location: str) -> LogWriter | None:
    """The table's writer as it stands (not caught up with the log), if there is one."""
    return _writers.get(location)


def forget(location: str) -> None:
    _writers.pop(location, None)
