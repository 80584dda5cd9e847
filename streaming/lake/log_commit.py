"""A local table's commits written straight into its `_delta_log/`: the writing side of log_tail.py.

A commit through delta-rs costs 13-22 ms of CPU however little it carries: it lists the log three
times and brings its snapshot up to date (docs/live-batch.md). A live batch makes six to eight,
five batches a second. A commit that only adds files, and records the batch, is one small file
of JSON actions, written here as any Delta writer writes it: the next version's file, made only
if no one has made it yet (a hard link, which fails when the name is taken). A writer that loses
that race reads what the winner committed and takes the next version, or stops if the winner
recorded the same batch.

Checkpoints and the log's cleanup stay delta-rs's, at the versions its own commit would make
them (`delta.checkpointInterval`): the caller asks `checkpoint_due`. What this does not write,
delta-rs does as before: a remote table, a protocol above reader 1 / writer 2 or with table
features, a column invariant, and any table once another writer changed its metadata or
protocol (then the writer is made afresh from delta-rs's view).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import Sequence

from deltalake import DeltaTable

from streaming.lake.files import DataFile
from streaming.lake.locations import is_remote, local_path
from streaming.lake.log_tail import commit_file, commit_mark, tail
from streaming.lake.tables import Table

ENGINE = "trade-summary"


def writable(opened: DeltaTable) -> bool:
    """Whether a writer that knows only add actions and app transactions may append to the open
    table: reader 1 / writer 2 without table features, and no column invariant to enforce."""
    protocol = opened.protocol()
    return (protocol.min_reader_version == 1 and protocol.min_writer_version <= 2
            and not protocol.reader_features and not protocol.writer_features
            and "delta.invariants" not in opened.schema().to_json())


class LogWriter:
    """One local table's appends, written as its log's next versions. Used under the table's
    lock (store.Lake.writing); other writers' commits (another process, delta-rs, delta-spark)
    are read from the log as they come."""

    def __init__(self, table: Table, location: str, opened: DeltaTable):
        self.table, self.location = table, location
        self.version = opened.version()
        self.mark = commit_mark(location, self.version)
        self.checkpoint_every = int(opened.metadata().configuration.get("delta.checkpointInterval", "100"))
        self._base = opened  # answers for an app id not recorded since the version above
        self._txns: dict[str, int] = {}  # app id -> its newest recorded batch, once asked or seen
        self._partition_types = {name: table.stored_schema.field(name).type for name in table.partition_by}
        self.commits = 0  # written here, for the tests and the benchmark

    @classmethod
    def of(cls, table: Table, location: str, opened: DeltaTable) -> LogWriter | None:
        """A writer for the open table, or None when delta-rs must write it (see the module)."""
        if is_remote(location) or not writable(opened):
            return None
        writer = cls(table, location, opened)
        return writer if writer.mark is not None else None

    def caught_up(self) -> bool:
        """Read the commits others made since the version held; False when this writer may no
        longer write the table (a new metadata or protocol, the table made anew, a log that does
        not parse): the caller drops it."""
        found = tail(self.location, self.version, self.mark, None, self._partition_types)
        if found is None:
            return False
        if found.version != self.version:
            for app_id, batch_id in found.txns.items():
                self._txns[app_id] = max(batch_id, self.recorded(app_id))
            self.version, self.mark = found.version, commit_mark(self.location, found.version)
        return self.mark is not None

    def recorded(self, app_id: str) -> int:
        """The newest batch `app_id` recorded in the table (-1 for none), as of the version held."""
        if app_id not in self._txns:
            recorded = self._base.transaction_version(app_id)
            self._txns[app_id] = -1 if recorded is None else recorded
        return self._txns[app_id]

    def append(self, files: Sequence[DataFile], app_id: str, batch_id: int) -> bool | None:
        """Commit `files` (written into the table's location) as the next version, recording the
        batch: True once committed, False if another writer recorded the batch first, None if
        delta-rs must commit them (`caught_up` failed)."""
        if not self.caught_up():
            return None
        now = int(time.time() * 1000)
        actions = [
            {"commitInfo": {"timestamp": now, "operation": "WRITE", "operationParameters": {"mode": "Append"},
                            "engineInfo": ENGINE, "clientVersion": ENGINE}},
            *({"add": {"path": f.path, "partitionValues": f.partition_values, "size": f.size,
                       "modificationTime": now, "dataChange": True, "stats": f.stats}} for f in files),
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
                    if not self.caught_up():
                        return None
                    if self.recorded(app_id) >= batch_id:
                        return False
        finally:
            written.unlink(missing_ok=True)
        self.version += 1
        self.mark = commit_mark(self.location, self.version)
        self._txns[app_id] = max(int(batch_id), self._txns.get(app_id, -1))
        self.commits += 1
        return True

    def checkpoint_due(self) -> bool:
        """Whether the version just written is one delta-rs's commit would checkpoint."""
        return self.version % self.checkpoint_every == 0
