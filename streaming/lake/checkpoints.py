"""Spark's checkpoint directory: the one module that reads or writes it.

Per query, Spark keeps `metadata` (the query id, for the checkpoint's life), `offsets/N` (what
batch N read) and `commits/N` (batch N is done). Beside the queries' checkpoints we keep
`replay.json`, the time a --replay-from started these checkpoints at, and a replay moves the
old ones aside (never deletes them).
"""

from __future__ import annotations

import functools
import json
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

REPLAY_FILE = "replay.json"


@dataclass(frozen=True)
class OffsetLogEntry:
    ends: dict[tuple[str, int], int]  # (topic, partition) -> the offset batch N read up to


class QueryCheckpoint:
    """One streaming query's checkpoint."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __str__(self) -> str:
        return str(self.path)

    @property
    def started(self) -> bool:
        return (self.path / "metadata").exists()

    @functools.cached_property
    def query_id(self) -> str:
        """Spark's query id: it lasts as long as the checkpoint (the file exists once the query runs)."""
        return json.loads((self.path / "metadata").read_text().splitlines()[0])["id"]

    def offset_log(self, batch_id: int) -> OffsetLogEntry | None:
        """What batch `batch_id` read, or None if Spark has not planned it."""
        path = self.path / "offsets" / str(batch_id)
        if batch_id < 0 or not path.exists():
            return None
        lines = path.read_text().splitlines()
        offsets = json.loads(lines[2]) if len(lines) > 2 and lines[2].strip() else {}
        ends = {(topic, int(p)): int(o) for topic, parts in offsets.items() for p, o in parts.items()}
        return OffsetLogEntry(ends)

    def committed_offsets(self) -> dict[tuple[str, int], int]:
        """End offsets of the last committed batch: everything before them is fully written."""
        commits = self.path / "commits"
        done = [int(p.name) for p in commits.iterdir() if p.name.isdigit()] if commits.exists() else []
        entry = self.offset_log(max(done)) if done else None
        return entry.ends if entry else {}


class Checkpoints:
    """The checkpoints of a run's queries, under one directory."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def query(self, name: str) -> QueryCheckpoint:
        return QueryCheckpoint(self.root / name)

    @property
    def set_aside_root(self) -> Path:
        """Where replaced checkpoints go: beside them (<data-dir>/checkpoints.replaced/)."""
        return self.root.with_name(self.root.name + ".replaced")

    def set_aside(self) -> Path | None:
        """Move every query's checkpoint into set_aside_root/<UTC time> (for --replay-from: the
        queries start afresh, and the old checkpoints are kept, never deleted)."""
        if not self.root.exists():
            return None
        target = self.set_aside_root / datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(self.root), str(target))
        return target

    def remember_replay(self, since: datetime) -> None:
        """Note the time a --replay-from started these checkpoints at (for the operator)."""
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / REPLAY_FILE).write_text(json.dumps({"since": since.isoformat()}))
