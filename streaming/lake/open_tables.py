"""Delta tables kept open between reads and commits (store.Lake.open, open_version).

Opening a table reads its log from the last checkpoint; bringing an open one up to date reads
only the commits since. A DeltaTable is not meant to be shared between threads, so each thread
keeps its own, and the writers of a table (whoever holds its lock) share one copy of it.
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
        self.tables: OrderedDict[str, DeltaTable] = OrderedDict()
        self.pinned: dict[str, DeltaTable] = {}  # read at a given version, moved forward as asked


_open_tables = _OpenTables()
# Each table's copy open for its writers, used only under the table's lock: a micro-batch's
# commits run on any of the writer threads, and a copy of each thread's own would be as many
# versions behind, each replayed at the next commit.
_writers_tables: OrderedDict[str, DeltaTable] = OrderedDict()


def latest(location: str, storage_options: dict[str, str] | None, for_writers: bool) -> DeltaTable | None:
    """The table at its latest version, or None if it does not exist yet: the writers' one copy
    (for_writers, under the table's lock), else this thread's own."""
    kept = _writers_tables if for_writers else _open_tables.tables
    opened = kept.pop(location, None)
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
    kept[location] = opened
    while len(kept) > _open_tables.limit:
        kept.popitem(last=False)
    return opened


def at_version(location: str, storage_options: dict[str, str] | None, version: int) -> DeltaTable | None:
    """The table as it stood at `version`, or None if there is no such version (or a VACUUM
    removed what it needs)."""
    pinned = _open_tables.pinned.pop(location, None)
    try:
        if pinned is not None and pinned.version() <= version and still_there(location, pinned):
            pinned.load_as_version(version)  # reads only the commits in between
        else:
            pinned = DeltaTable(location, version=version, storage_options=storage_options)
    except Exception:  # noqa: BLE001 - no table, or a version out of range or vacuumed away
        return None
    _open_tables.pinned[location] = pinned
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
