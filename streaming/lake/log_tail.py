"""A local table's newest commits read straight from its `_delta_log/` JSON, for a reader that
follows the table version by version (increments.FileIncrements).

Bringing an open table up to date through delta-rs lists the whole log directory and replays it
from its checkpoint: about 11 ms a table on the 2-core machine, at every version, for each table a
push reads (docs/page-paint.md). A follower that already holds version V only needs what commits
V+1, V+2, ... added and removed: each is one small file of JSON actions, written whole at once.

Anything this does not follow gives None, and the reader asks delta-rs as before: a remote table,
a version whose file is gone (log cleanup) or changed, a commit that changes the table's
metadata or protocol, a deletion vector, a file outside the table's directory, a log that does
not parse.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa

from streaming.lake.files import LiveFile
from streaming.lake.locations import is_remote, local_path

# Actions that neither add nor remove data files nor change how they are read.
PASSED_OVER = frozenset({"commitInfo", "cdc", "domainMetadata", "checkpointMetadata", "sidecar"})


def commit_file(location: str, version: int) -> Path:
    return local_path(location) / "_delta_log" / f"{version:020d}.json"


def commit_mark(location: str, version: int) -> tuple[int, int] | None:
    """What tells a commit file apart from another of the same version (a table made anew):
    its inode and modification time; None for a remote table or no such file."""
    if is_remote(location):
        return None
    try:
        stat = os.stat(commit_file(location, version))
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns


@dataclass(frozen=True)
class Tail:
    """The commits after a version: the files they added (of those, the ones still live at its
    end) and the paths they removed, the batches they recorded (app id -> the newest), and the
    version they end at."""

    version: int
    added: list[LiveFile]
    removed: set[str]
    txns: dict[str, int]


def tail(location: str, version: int, mark: tuple[int, int] | None, column: str | None,
         partition_types: dict[str, pa.DataType]) -> Tail | None:
    """The commits of a local table after `version` (whose file had `mark`), each data file's
    min/max of `column` and its partition values in `partition_types`; None when delta-rs must
    say (see the module's docstring). A Tail of `version` itself when there is no newer commit."""
    if mark is None or commit_mark(location, version) != mark:
        return None
    added: dict[str, LiveFile] = {}
    removed: set[str] = set()
    txns: dict[str, int] = {}
    newest = version
    while True:
        try:
            text = commit_file(location, newest + 1).read_text()
        except FileNotFoundError:
            break
        except OSError:
            return None
        try:
            actions = [json.loads(line) for line in text.splitlines() if line.strip()]
            for action in actions:
                (kind, body), = action.items()
                if kind == "add":
                    file = live_file(body, column, partition_types)
                    if file is None:
                        return None
                    added[file.path] = file
                    removed.discard(file.path)
                elif kind == "remove":
                    if added.pop(body["path"], None) is None:
                        removed.add(body["path"])
                elif kind == "txn":
                    txns[body["appId"]] = max(int(body["version"]), txns.get(body["appId"], -1))
                elif kind not in PASSED_OVER:
                    return None  # metaData, protocol, or an action this does not know
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
        newest += 1
    return Tail(newest, list(added.values()), removed, txns)


def live_file(add: dict, column: str | None, partition_types: dict[str, pa.DataType]) -> LiveFile | None:
    """An add action's file with the min/max of `column`; None for one a plain read gets wrong."""
    path = add["path"]
    if add.get("deletionVector") or "://" in path or path.startswith("/"):
        return None  # a deletion vector hides rows; a file outside the table's directory
    values = add.get("partitionValues") or {}
    if set(values) != set(partition_types):
        return None
    partition = tuple((name, None if values[name] is None else pa.scalar(values[name], pa.string()).cast(kind).as_py())
                      for name, kind in partition_types.items())
    stats = json.loads(add["stats"]) if add.get("stats") else {}
    low = _time((stats.get("minValues") or {}).get(column)) if column else None
    high = _time((stats.get("maxValues") or {}).get(column)) if column else None
    return LiveFile(path, low, high, partition)


def _time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    stamp = datetime.fromisoformat(value)
    return stamp.replace(tzinfo=timezone.utc) if stamp.tzinfo is None else stamp.astimezone(timezone.utc)
