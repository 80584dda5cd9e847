"""Reads that follow a table from version to version and read only what changed.

A Delta version is a list of live data files (add actions, each with its min/max statistics).
`FileIncrements` keeps what it made of each file it read; when the table's version changes it
diffs the new list against the one it holds: it reads the files added (only those whose
statistics overlap its `Span`, and of them only the span's rows), drops what came from the files
removed (a compaction or a MERGE rewrites rows as remove + add), and keeps the rest. So a reader
of one day pays for that day's new files, not for the table, however old the lake is.

Files are read as plain Parquet through pyarrow, from a local disk or through deltalake's own
object store (`locations.arrow_filesystem`), a partition column's value taken from the log. What a
plain Parquet read would get wrong (deletion vectors, files outside the table's directory) is read
whole instead, through delta-rs's engine, bounded by the span all the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Callable, Generic, Sequence, TypeVar, cast

import pyarrow as pa
import pyarrow.compute as pc

from streaming.lake.files import STATS_SLACK, FilesRoot, LiveFile, files_root, live_files, read_live_file
from streaming.lake.log_tail import commit_mark, tail
from streaming.lake.sql import in_time_range
from streaming.lake.store import Lake
from streaming.lake.tables import Table

T = TypeVar("T")
WHOLE_READ = ""  # the key of the one part a table read whole has (no data file has an empty path)


@dataclass(frozen=True)
class Span:
    """The rows whose `column` (a UTC time) lies in [start, end)."""

    column: str
    start: datetime
    end: datetime

    @classmethod
    def utc_day(cls, column: str, day: str) -> Span:
        """The UTC day `day` (YYYY-MM-DD); ValueError for anything else."""
        start = datetime.combine(date.fromisoformat(day), datetime.min.time(), timezone.utc)
        return cls(column, start, start + timedelta(days=1))

    def overlaps(self, low: datetime | None, high: datetime | None) -> bool:
        """Whether a file whose statistics are [low, high] may hold rows of the span (a bound
        the file does not state could be anything)."""
        return (low is None or low < self.end) and (high is None or high + STATS_SLACK >= self.start)

    def holds(self, low: datetime | None, high: datetime | None) -> bool:
        """Whether every row of a file whose statistics are [low, high] lies in the span (a file
        of one day of a table partitioned by it): read without a filter, or the span's column."""
        return low is not None and high is not None and low >= self.start and high + STATS_SLACK < self.end

    def where(self) -> str:
        return in_time_range(self.column, self.start, self.end, high_inclusive=False)

    def rows(self, kind: pa.DataType) -> pc.Expression:
        column = pc.field(self.column)
        return (column >= pa.scalar(self.start, kind)) & (column < pa.scalar(self.end, kind))


def newest(lake: Lake, table: Table, column: str) -> datetime | None:
    """The largest `column` value the table's file statistics state (None without any): a
    look at the log, no data file read."""
    opened = lake.open(table)
    files = live_files(opened, column) if opened is not None else None
    return max((f.high for f in files or () if f.high is not None), default=None)


class FileIncrements(Generic[T]):
    """One table's rows (these columns; of `span`, or all), kept per data file as `derive`
    makes them, and brought up to the table's latest version by `refresh`. A table made anew
    (its id changed, its version went back, or it is gone) is read afresh. Not thread-safe:
    its owner serialises the calls."""

    def __init__(self, lake: Lake, table: Table, columns: Sequence[str], span: Span | None = None,
                 derive: Callable[[pa.Table], T] | None = None):
        self.lake, self.table, self.columns, self.span = lake, table, list(columns), span
        self.derive = derive if derive is not None else cast(Callable[[pa.Table], T], _as_read)
        read = self.columns + ([span.column] if span is not None and span.column not in self.columns else [])
        self.read_schema = table.schema_of(read)
        self.parts: dict[str, T] = {}  # data file path -> what `derive` made of its rows
        self.version: int | None = None
        self.table_id: str | None = None
        self.files_read = self.whole_reads = self.log_follows = 0  # counters, for the tests and the benchmark
        self._root: FilesRoot | None = None  # made once
        self._location = lake.location(table)
        self._partition_types = {name: table.stored_schema.field(name).type for name in table.partition_by}
        self._mark: tuple[int, int] | None = None  # log_tail.commit_mark of the version held

    def refresh(self) -> bool:
        """Follow the table to its latest version; True when `parts` changed."""
        try:
            followed = self._follow_log()
            return followed if followed is not None else self._refresh()
        except FileNotFoundError:
            # A file of the version just listed is gone: a newer version dropped it and a
            # vacuum removed it since. The newest version lists only files that are there.
            self._mark = None
            return self._refresh()

    def _follow_log(self) -> bool | None:
        """The commits since the version held, read from the log's JSON (log_tail.py); None when
        delta-rs must bring the table up to date instead."""
        if self.version is None or WHOLE_READ in self.parts:
            return None
        found = tail(self._location, self.version, self._mark, self.span.column if self.span is not None else None,
                     self._partition_types)
        if found is None:
            return None
        if found.version == self.version:
            return False
        parts = {path: part for path, part in self.parts.items() if path not in found.removed}
        changed = len(parts) != len(self.parts)
        for file in found.added:
            if self.span is None or self.span.overlaps(file.low, file.high):
                parts[file.path] = self.derive(self._read_file(file))
                changed = True
        self.parts, self.version, self._mark = parts, found.version, commit_mark(self._location, found.version)
        self.log_follows += 1
        return changed

    def _refresh(self) -> bool:
        opened = self.lake.open(self.table)
        if opened is None:
            had = bool(self.parts)
            self._forget()
            return had
        version, table_id = opened.version(), str(opened.metadata().id)
        if version == self.version and table_id == self.table_id:
            return False
        made_anew = self.version is not None and (table_id != self.table_id or version < self.version)
        forgotten = made_anew and bool(self.parts)
        if made_anew:
            self._forget()
        files = live_files(opened, self.span.column if self.span is not None else None)
        if files is None:
            self.parts = {WHOLE_READ: self.derive(self._read_whole(version))}
            self.version, self.table_id, self._mark = version, table_id, None
            return True
        wanted = [f for f in files if self.span is None or self.span.overlaps(f.low, f.high)]
        parts = {f.path: self.parts[f.path] for f in wanted if f.path in self.parts}
        changed = forgotten or len(parts) != len(self.parts)
        for file in wanted:
            if file.path not in parts:
                parts[file.path] = self.derive(self._read_file(file))
                changed = True
        self.parts, self.version, self.table_id = parts, version, table_id
        self._mark = commit_mark(self._location, version)
        return changed

    def _forget(self) -> None:
        self.parts, self.version, self.table_id, self._mark = {}, None, None, None

    def _read_whole(self, version: int) -> pa.Table:
        self.whole_reads += 1
        where = self.span.where() if self.span is not None else None
        return self.lake.read(self.table, self.columns, where, version=version)

    def _read_file(self, file: LiveFile) -> pa.Table:
        self.files_read += 1
        span = self.span if self.span is not None and not self.span.holds(file.low, file.high) else None
        partition = dict(file.partition)
        wanted = self.read_schema if span is not None else self.table.schema_of(self.columns)
        in_file = pa.schema([f for f in wanted if f.name not in partition])
        if self._root is None:
            self._root = files_root(self.lake.location(self.table), self.lake.storage_options)
        rows = read_live_file(self._root, file.path, in_file, columns=in_file.names,
                              filters=None if span is None else span.rows(in_file.field(span.column).type))
        for name in wanted.names:
            if name in partition:
                field = wanted.field(name)
                rows = rows.append_column(field, pa.repeat(pa.scalar(partition[name], field.type), rows.num_rows))
        return rows.select(self.columns)


def _as_read(rows: pa.Table) -> pa.Table:
    return rows
