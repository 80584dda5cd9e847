"""Data files written where the data is: a Spark task writes a table's Parquet file straight to
the table's location and hands back its description (`DataFile`); the driver commits the
files of a micro-batch in one Delta transaction (`Lake.commit_files`). Until then no reader
sees them, so a crash in between leaves only unreferenced files, which the writer's vacuum
removes once they are older than the table's history (partitions.compact_now_and_then).

The statistics are Delta's (numRecords, minValues, maxValues, nullCount): readers and MERGEs
skip files by them, by offset and event time above all.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Mapping, NamedTuple
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import DeltaTable

from streaming.lake.locations import arrow_filesystem, is_remote, local_path

# The rows of the data files this process wrote lately stay in memory, for a reader of the same
# process (the page's push reads the gold and history files the sink has just written; a rewrite
# reads the file the last one wrote): a data file never changes once written.
KEPT_BYTES = 16 * 2**20
KEPT_FILE_BYTES = 2**20  # a larger file is read from where it is, if at all

# Strings longer than this get no min/max (a truncated max would be wrong, and ids gain nothing).
MAX_STAT_STRING = 32


@dataclass(frozen=True)
class DataFile:
    """A Parquet file written into a table's location, not yet committed."""

    path: str  # relative to the table's location: under `column=value/` for each partition column
    size: int
    rows: int
    stats: str  # Delta's per-file statistics, as JSON

    @property
    def partition_values(self) -> dict[str, str]:
        """The partition the file lies in, as its directories name it (Delta's own layout)."""
        return dict(part.split("=", 1) for part in self.path.split("/")[:-1])


def _iso_ms(value: datetime, round_up: bool) -> str:
    """Delta keeps times in statistics to the millisecond: a minimum rounds down, a maximum up,
    so the bounds still hold."""
    value = value.astimezone(timezone.utc)
    if round_up and value.microsecond % 1000:
        value += timedelta(microseconds=1000 - value.microsecond % 1000)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def file_stats(rows: pa.Table) -> str:
    """Delta's statistics of a file holding these rows."""
    low, high, nulls = {}, {}, {}
    for name, column in zip(rows.column_names, rows.columns):
        kind = column.type
        nulls[name] = column.null_count
        if column.null_count == len(column):
            continue
        if pa.types.is_integer(kind) or pa.types.is_floating(kind):
            least, most = pc.min_max(column).values()
            low[name], high[name] = least.as_py(), most.as_py()
        elif pa.types.is_timestamp(kind):
            least, most = pc.min_max(column).values()
            low[name], high[name] = _iso_ms(least.as_py(), False), _iso_ms(most.as_py(), True)
        elif pa.types.is_string(kind) and pc.max(pc.utf8_length(column)).as_py() <= MAX_STAT_STRING:
            least, most = pc.min_max(column).values()
            low[name], high[name] = least.as_py(), most.as_py()
    return json.dumps({"numRecords": rows.num_rows, "minValues": low, "maxValues": high, "nullCount": nulls},
                      separators=(",", ":"))


# Parquet key-value metadata naming the process that wrote the file (host, pid, working dir:
# on a Spark cluster, the executor's), for whoever traces a file back to a task.
WRITTEN_BY = b"trade_summary.written_by"


def written_by() -> str:
    return json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "cwd": os.getcwd()})


def write_file(location: str, rows: pa.Table, storage_options: Mapping[str, str] | None = None,
               partition: Mapping[str, str] | None = None) -> DataFile:
    """Write `rows` as one new Parquet file under the table's `location`, in the directory of
    `partition` (column -> value, as text) if the table is partitioned; the rows hold the data
    columns only, a partition's value is the log's."""
    name = "".join(f"{column}={value}/" for column, value in (partition or {}).items())
    name += f"part-{uuid.uuid4()}-c000.snappy.parquet"
    filesystem, root = arrow_filesystem(location, storage_options)
    path = f"{root.rstrip('/')}/{name}" if root else name
    if partition and not is_remote(location):
        filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
    metadata = {**(rows.schema.metadata or {}), WRITTEN_BY: written_by().encode()}
    pq.write_table(rows.replace_schema_metadata(metadata), path, filesystem=filesystem, compression="snappy")
    size = filesystem.get_file_info(path).size
    _kept.keep((str(location), name), rows)
    return DataFile(name, size, rows.num_rows, file_stats(rows))


class _KeptRows:
    """The rows of the newest files written, by (location, path), up to KEPT_BYTES in all."""

    def __init__(self) -> None:
        self._rows: OrderedDict[tuple[str, str], pa.Table] = OrderedDict()
        self._bytes = 0
        self._guard = threading.Lock()

    def keep(self, key: tuple[str, str], rows: pa.Table) -> None:
        size = rows.get_total_buffer_size()
        if size > KEPT_FILE_BYTES:
            return
        with self._guard:
            self._rows[key] = rows
            self._bytes += size
            while self._bytes > KEPT_BYTES:
                self._bytes -= self._rows.popitem(last=False)[1].get_total_buffer_size()

    def get(self, key: tuple[str, str]) -> pa.Table | None:
        with self._guard:
            return self._rows.get(key)

    def forget(self) -> None:
        with self._guard:
            self._rows.clear()
            self._bytes = 0

    @property
    def size(self) -> int:
        return self._bytes


_kept = _KeptRows()


# Delta keeps times in statistics to the millisecond, and delta-rs cuts a compacted file's
# maximum down: its last row may lie up to this much after the statistic.
STATS_SLACK = timedelta(milliseconds=1)


@dataclass(frozen=True)
class LiveFile:
    """A data file of a version: its path as the log has it (relative, URI-encoded) and the
    min/max statistics of one column (None where the log has none)."""

    path: str
    low: datetime | None = None
    high: datetime | None = None
    partition: tuple[tuple[str, object], ...] = ()  # (column, value) of each partition column


def live_files(opened: DeltaTable, column: str | None = None) -> list[LiveFile] | None:
    """The table's data files at its open version, with the min/max of `column`; None when its
    files cannot be read one by one as plain Parquet (a deletion vector hides some of a file's
    rows, or a file lies outside the table's directory)."""
    actions = pa.table(opened.get_add_actions(flatten=True))
    vectors = [name for name in actions.column_names if name.startswith("deletionVector")]
    features = opened.protocol().reader_features or []
    if any(actions[name].null_count < actions.num_rows for name in vectors) or (
            "deletionVectors" in features and not vectors):
        return None  # a deletion vector hides rows of its file: only delta-rs's engine applies it
    paths = actions["path"].to_pylist()
    if any("://" in path or path.startswith("/") for path in paths):
        return None  # a file outside the table's directory (a shallow clone's)
    lows = _stats(actions, f"min.{column}")
    highs = _stats(actions, f"max.{column}")
    partitions = [tuple(zip(opened.metadata().partition_columns, values)) for values in
                  zip(*(actions[f"partition.{c}"].to_pylist() for c in opened.metadata().partition_columns))]
    return [LiveFile(path, low, high, partition) for path, low, high, partition in
            zip(paths, lows, highs, partitions or [()] * len(paths))]


class FilesRoot(NamedTuple):
    """Where a table's live files are read: a pyarrow file system and what goes before a file's
    path as the log has it (a local table's directory, or nothing for deltalake's object store,
    rooted at the table)."""

    filesystem: pafs.FileSystem
    prefix: str
    location: str


def files_root(location: str, storage_options: Mapping[str, str] | None) -> FilesRoot:
    filesystem, _ = arrow_filesystem(location, storage_options)
    prefix = "" if is_remote(location) else str(local_path(location).resolve()).rstrip("/") + "/"
    return FilesRoot(filesystem, prefix, str(location))


def read_live_file(root: FilesRoot, path: str, schema: pa.Schema, columns: list[str] | None = None,
                   filters: pc.Expression | None = None) -> pa.Table:
    """A live file's rows (its path as the log has it: URI-encoded) in `schema`, as pyarrow's
    Parquet read gives them: a column the file lacks (added since it was written) reads as
    nulls. A file this process wrote lately is taken from memory."""
    written = _kept.get((root.location, unquote(path)))
    if written is None:
        return pq.read_table(root.prefix + unquote(path), filesystem=root.filesystem, schema=schema, columns=columns,
                             filters=filters)
    return as_read(written, schema, columns, filters)


def as_read(rows: pa.Table, schema: pa.Schema, columns: list[str] | None = None,
            filters: pc.Expression | None = None) -> pa.Table:
    """Rows as a Parquet file of them reads in `schema` (read_live_file)."""
    arrays = [rows[f.name].cast(f.type) if f.name in rows.column_names else pa.nulls(rows.num_rows, f.type)
              for f in schema]
    read = pa.Table.from_arrays(arrays, schema=schema)
    if filters is not None:
        read = read.filter(filters)
    return read.select(columns) if columns is not None else read


def _stats(actions: pa.Table, name: str) -> list:
    return actions[name].to_pylist() if name in actions.column_names else [None] * actions.num_rows
