"""What follows a table's commits, done behind the batch: checkpoints, the log's cleanup and
compactions.

delta-rs follows its own commits with a checkpoint every `delta.checkpointInterval` versions
and the log's cleanup, and the writer compacts every `Table.compact_every` (partitions.py).
Done in the batch, they were its tail (docs/live-batch.md). For a table whose commits the log
writer makes (log_commit.py), a Lake made with `upkeep_in_background` hands them to one thread
here instead, which does them once the batch has let go of the table:

* a compaction under the table's lock, as the writer's was, so that a MERGE's or gold's
  rewrite's removes never meet a compaction's;
* a checkpoint through the thread's own copy of the table, then the cleanup, without the lock:
  neither changes the table's files. Another copy, only brought up to date, keeps reading the
  checkpoint it was opened at, which the cleanup may remove, so every other copy open before
  is opened afresh at its next use (open_tables.rebase).

A table asked for again before its turn is done once. `settle` waits until nothing is due; a
stop waits for it (`finish`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from deltalake import DeltaTable

from streaming.lake import open_tables, partitions
from streaming.lake.log_commit import LogWriter
from streaming.lake.tables import Table

log = logging.getLogger(__name__)

FINISH_WAIT_S = 30.0  # how long a stop waits for the upkeep under way and due


@dataclass
class _Due:
    """One table's upkeep, due."""

    table: Table
    lock: contextlib.AbstractContextManager  # the table's write lock
    checkpoint: bool
    compaction: bool
    vacuum: bool

    def join(self, other: _Due) -> None:
        self.checkpoint |= other.checkpoint
        self.compaction |= other.compaction
        self.vacuum |= other.vacuum


class _Worker:
    """One thread, doing each table's due upkeep in the order asked."""

    def __init__(self) -> None:
        self._due: OrderedDict[str, _Due] = OrderedDict()
        self._changed = threading.Condition()
        self._working = False
        self._thread: threading.Thread | None = None

    def ask(self, location: str, due: _Due) -> None:
        with self._changed:
            if location in self._due:
                self._due[location].join(due)
            else:
                self._due[location] = due
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="lake-upkeep", daemon=True)
                self._thread.start()
            self._changed.notify_all()

    def settle(self, timeout_s: float) -> bool:
        """Wait until nothing is due nor under way; False if timeout_s ran out first."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while self._due or self._working:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._due:
                    self._working = False
                    self._changed.notify_all()
                    self._changed.wait()
                location, due = self._due.popitem(last=False)
                self._working = True
            _keep(location, due)


def _keep(location: str, due: _Due) -> None:
    def opened() -> DeltaTable | None:  # this thread's copy, brought up to date
        return open_tables.latest(location, None, for_writers=False)

    table = None
    try:
        if due.compaction:
            with due.lock:
                table = opened()
                if table is not None:
                    partitions.compact(due.table, location, table, opened, due.vacuum)
        if due.checkpoint:
            table = opened()
            if table is not None:
                table.create_checkpoint()
                table.cleanup_metadata()
    except Exception as error:  # noqa: BLE001 - upkeep changes no data: the next one tries again
        log.warning("the upkeep of %s failed, to be tried again at its next: %s", due.table.name, error)
        table = None
    finally:
        open_tables.rebase(location, kept=table)


_worker = _Worker()


def after_commit(table: Table, writer: LogWriter, lock: contextlib.AbstractContextManager) -> None:
    """Hand what the writer's last commit makes due (a checkpoint, a compaction) to the thread.
    lock: the table's write lock, which the caller holds now."""
    due = _Due(table, lock, checkpoint=writer.checkpoint_due(),
               compaction=partitions.compaction_due(table, writer.version),
               vacuum=partitions.vacuum_due(table, writer.version))
    if due.checkpoint or due.compaction:
        _worker.ask(writer.location, due)


def settle(timeout_s: float = FINISH_WAIT_S) -> bool:
    """Wait until every table's due upkeep is done; False if timeout_s ran out first."""
    return _worker.settle(timeout_s)


def finish(timeout_s: float = FINISH_WAIT_S) -> None:
    """For a stop: wait for the upkeep under way and due (a process that exits while a thread
    is inside delta-rs may abort)."""
    if not settle(timeout_s):
        log.warning("the tables' upkeep did not finish in %.0f s; the next start does it", timeout_s)
