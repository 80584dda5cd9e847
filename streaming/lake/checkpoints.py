"""Spark's checkpoint directory: the one module that reads or writes it.

Per query, Spark keeps `metadata` (the query id, for the checkpoint's life), `offsets/N` (what
batch N read) and `commits/N` (batch N is done). Beside the queries' checkpoints we keep
`replay.json`, the time a --replay-from started these checkpoints at, and a replay moves the
old ones aside (never deletes them).

The directory is a local path (or a shared mount), or a Hadoop URI (`hdfs://`, `s3a://`) read
and written through the Spark session's own Hadoop file system, as Spark itself does. Only
the driver writes it: the pipeline keeps no state store, so executors never touch it.
"""

from __future__ import annotations

import functools
import json
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from streaming.lake.locations import is_remote, local_path

REPLAY_FILE = "replay.json"


@dataclass(frozen=True)
class OffsetLogEntry:
    ends: dict[tuple[str, int], int]  # (topic, partition) -> the offset batch N read up to


class LocalFiles:
    """The few file operations checkpoints need, on the local disk."""

    def exists(self, path: str) -> bool:
        return Path(path).exists()

    def read_text(self, path: str) -> str:
        return Path(path).read_text()

    def write_text(self, path: str, text: str) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)

    def names(self, path: str) -> list[str]:
        return [p.name for p in Path(path).iterdir()] if Path(path).is_dir() else []

    def move(self, source: str, target: str) -> None:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        shutil.move(source, target)


class HadoopFiles:
    """The same operations through the Spark session's Hadoop file system (any URI Spark's
    checkpointLocation takes)."""

    def __init__(self, spark):
        self._jvm = spark.sparkContext._jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()

    def _fs(self, path: str):
        hadoop_path = self._jvm.org.apache.hadoop.fs.Path(path)
        return hadoop_path.getFileSystem(self._conf), hadoop_path

    def exists(self, path: str) -> bool:
        fs, hadoop_path = self._fs(path)
        return bool(fs.exists(hadoop_path))

    def read_text(self, path: str) -> str:
        fs, hadoop_path = self._fs(path)
        stream = fs.open(hadoop_path)
        try:
            return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)).decode()
        finally:
            stream.close()

    def write_text(self, path: str, text: str) -> None:
        fs, hadoop_path = self._fs(path)
        stream = fs.create(hadoop_path, True)
        try:
            stream.write(bytearray(text.encode()))
        finally:
            stream.close()

    def names(self, path: str) -> list[str]:
        fs, hadoop_path = self._fs(path)
        if not fs.exists(hadoop_path):
            return []
        return [status.getPath().getName() for status in fs.listStatus(hadoop_path)]

    def move(self, source: str, target: str) -> None:
        fs, source_path = self._fs(source)
        _, target_path = self._fs(target)
        fs.mkdirs(target_path.getParent())
        if not fs.rename(source_path, target_path):
            raise OSError(f"could not move {source} to {target}")


def files_for(root: str | Path, spark=None) -> LocalFiles | HadoopFiles:
    if not is_remote(root):
        return LocalFiles()
    if spark is None:
        raise ValueError(f"checkpoints at {root} are read through Spark: no session was given")
    return HadoopFiles(spark)


def _join(root: str, *names: str) -> str:
    return "/".join([root.rstrip("/"), *names])


class QueryCheckpoint:
    """One streaming query's checkpoint."""

    def __init__(self, path: str | Path, files: LocalFiles | HadoopFiles | None = None):
        self.location = str(local_path(path)) if not is_remote(path) else str(path).rstrip("/")
        self.files = files or LocalFiles()

    @property
    def path(self) -> Path:
        """The local directory (for a local checkpoint)."""
        return Path(self.location)

    def __str__(self) -> str:
        return self.location

    @property
    def started(self) -> bool:
        return self.files.exists(_join(self.location, "metadata"))

    @functools.cached_property
    def query_id(self) -> str:
        """Spark's query id: it lasts as long as the checkpoint (the file exists once the query runs)."""
        return json.loads(self.files.read_text(_join(self.location, "metadata")).splitlines()[0])["id"]

    def offset_log(self, batch_id: int) -> OffsetLogEntry | None:
        """What batch `batch_id` read, or None if Spark has not planned it."""
        path = _join(self.location, "offsets", str(batch_id))
        if batch_id < 0 or not self.files.exists(path):
            return None
        lines = self.files.read_text(path).splitlines()
        offsets = json.loads(lines[2]) if len(lines) > 2 and lines[2].strip() else {}
        ends = {(topic, int(p)): int(o) for topic, parts in offsets.items() for p, o in parts.items()}
        return OffsetLogEntry(ends)

    def last_planned_batch(self) -> int | None:
        """The newest batch in the offset log (it may not have run yet)."""
        planned = [int(name) for name in self.files.names(_join(self.location, "offsets")) if name.isdigit()]
        return max(planned) if planned else None

    def last_committed_batch(self) -> int | None:
        done = [int(name) for name in self.files.names(_join(self.location, "commits")) if name.isdigit()]
        return max(done) if done else None

    def committed_offsets(self) -> dict[tuple[str, int], int]:
        """End offsets of the last committed batch: everything before them is fully written."""
        last = self.last_committed_batch()
        entry = self.offset_log(last) if last is not None else None
        return entry.ends if entry else {}


class Checkpoints:
    """The checkpoints of a run's queries, under one directory (a local path or a Hadoop URI;
    a URI needs the Spark session)."""

    def __init__(self, root: str | Path, spark=None):
        self.location = str(local_path(root)) if not is_remote(root) else str(root).rstrip("/")
        self.files = files_for(root, spark)

    @property
    def root(self) -> Path:
        return Path(self.location)

    def query(self, name: str) -> QueryCheckpoint:
        return QueryCheckpoint(_join(self.location, name), self.files)

    @property
    def set_aside_location(self) -> str:
        """Where replaced checkpoints go: beside them (<checkpoints>.replaced/)."""
        return self.location + ".replaced"

    @property
    def set_aside_root(self) -> Path:
        return Path(self.set_aside_location)

    def set_aside(self) -> str | None:
        """Move every query's checkpoint into <checkpoints>.replaced/<UTC time> (for
        --replay-from: the queries start afresh, and the old checkpoints are kept, never deleted)."""
        if not self.files.exists(self.location):
            return None
        target = _join(self.set_aside_location, datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ"))
        self.files.move(self.location, target)
        return target

    def remember_replay(self, since: datetime) -> None:
        """Note the time a --replay-from started these checkpoints at (for the operator)."""
        self.files.write_text(_join(self.location, REPLAY_FILE), json.dumps({"since": since.isoformat()}))
