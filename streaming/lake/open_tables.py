"""Delta tables kept open between reads and commits (store.Lake.open, open_version).

Opening a table reads its log from the last checkpoint; bringing an open one up to date reads
only the commits since. A DeltaTable is not meant to be shared between threads, so each thread
keeps its own, and the writers of a table (whoever holds its lock) share one copy of it.

A copy only brought up to date keeps reading the checkpoint it was opened at; once the log's
cleanup may have removed it (upkeep.py, `rebase`), each copy is opened afresh at its next use.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from streaming.lake.locations import is_remote, local_path


class _OpenTables(threading.local):
    """Each thread's open tables, newest use last."""

    limit = 32

    def __init__(self):
        self.tables: OrderedDict[str, _Copy] = OrderedDict()
        self.pinned: dict[str, _Copy] = {}  # read at a given version, moved forward as asked


_Copy = tuple[DeltaTable, int]  # a copy, and its location's rebase count when it was opened
_open_tables = _OpenTables()
# Each table's copy open for its writers, used only under the table's lock: a micro-batch's
# commits run on any of the writer threads, and a copy of each thread's own would be as many
# versions behind, each replayed at the next commit.
_writers_tables: OrderedDict[str, _Copy] = OrderedDict()
_rebased: dict[str, int] = {}  # location -> how many times its log was cleaned up behind the copies


def rebase(location: str, kept: DeltaTable | None = None) -> None:
    """The table's log was cleaned up: every copy open now is opened afresh at its next use,
    but `kept`, this thread's, through which the cleanup ran (it reads from the checkpoint the
    cleanup kept)."""
    _rebased[location] = _rebased.get(location, 0) + 1
    if kept is not None:
        _open_tables.tables[location] = (kept, _rebased[location])


def generation(location: str) -> int:
    """How many times the table's copies were made stale (`rebase`): a copy opened at another
    count must be opened afresh."""
    return _rebased.get(location, 0)


def latest(location: str, storage_options: dict[str, str] | None, for_writers: bool) -> DeltaTable | None:
    """The table at its latest version, or None if it does not exist yet: the writers' one copy
    (for_writers, under the table's lock), else this thread's own."""
    kept = _writers_tables if for_writers else _open_tables.tables
    now = generation(location)
    opened, opened_in = kept.pop(location, (None, now))
    if opened_in != now:
        opened = None
    if opened is not None and not no_newer_commit(location, opened):
        try:
            opened.update_incremental()
        except Exception:  # noqa: BLE001 - an unreadable log: open it afresh (and say why if that fails too)
            opened = None
    if opened is not None and not still_there(location, opened):
        opened = None
    if opened is None:
        try:
            opened = DeltaTable(location, storage_options=storage_options)
        except TableNotFoundError:
            return None
    kept[location] = (opened, now)
    while len(kept) > _open_tables.limit:
        kept.popitem(last=False)
    return opened


def at_version(location: str, storage_options: dict[str, str] | None, version: int) -> DeltaTable | None:
    """The table as it stood at `version`, or None if there is no such version (or a VACUUM
    removed what it needs)."""
    now = generation(location)
    pinned, opened_in = _open_tables.pinned.pop(location, (None, now))
    try:
        if (pinned is not None and opened_in == now and pinned.version() <= version
                and still_there(location, pinned)):
            pinned.load_as_version(version)  # reads only the commits in between
        else:
            pinned = DeltaTable(location, version=version, storage_options=storage_options)
    except Exception:  # noqa: BLE001 - no table, or a version out of range or vacuumed away
        return None
    _open_tables.pinned[location] = (pinned, now)
    return pinned


def no_newer_commit(location: str, opened: DeltaTable) -> bool:
    """True when a local table has no commit after the open version: each Delta commit is the
    next numbered file in _delta_log, so one stat says so, where bringing the table up to date
    lists and reads the log (milliseconds, per table, per refresh and per batch)."""
    return not is_remote(location) and not (local_path(location) / "_delta_log"
                                            / f"{opened.version() + 1:020d}.json").exists()


def still_there(location: str, opened: DeltaTable) -> bool:
    """False if the table was removed (and perhaps made anew) since it was opened."""
    return is_remote(location) or (local_path(location) / "_delta_log" / f"{opened.version():020d}.json").exists()
