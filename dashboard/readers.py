"""The page's readers of the lake that follow a table's versions and read only what changed.

Each is built on the lake's `FileIncrements` (streaming/lake/increments.py): when a table's
version changes, only the data files added since are read, the rows of the files removed are
dropped. `DayReader` keeps one UTC day of a table for the last few days asked,
`SilverFilterValues` the channels and symbols of a day of silver, `HistoryReader` a day of
gold's change history (data.TableReader, a whole
small table, is built the same way). Each hands
back the same object until what it keeps has changed, so what is worked out from it can be kept
too. Shared by every page: a lock lets one request read while the others wait for its answer.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import timedelta
from typing import Callable, Generic, Iterable, Sequence, TypeVar

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from streaming.lake.increments import WHOLE_READ, FileIncrements, Span, newest
from streaming.lake.sql import equals, quote
from streaming.lake.store import Lake
from streaming.lake.tables import BATCH_WATERMARKS, QUARANTINE, SILVER, SUMMARY_HISTORY, Table
from streaming.medallion.history import by_window, in_change_order
from streaming.medallion.lateness import LATENESS, LATENESS_COLUMNS, NOT_JUDGED, LatenessTally, trade_lateness

T = TypeVar("T")
FEED_ROWS = 25  # the newest bad records shown, of one reason or of all
QUARANTINE_READ = ["reason", "topic", "partition", "offset", "kafka_timestamp", "ingested_at", "value"]
VALUE_CHARS = 200  # a bad record's raw value is shown up to this many characters
NEWEST_FIRST = [("ingested_at", "descending"), ("partition", "descending"), ("offset", "descending")]
DAYS_KEPT = 2  # the live day and one more (a day picked, the time machine's)
HISTORY_DAYS_KEPT = 4  # the history of the live day, the day played back and a few asked by /api/summary


def frame_of(parts: Iterable[pa.Table], schema: pa.Schema) -> pd.DataFrame:
    """The rows of these parts as one frame, in the table's types (typed and empty without any)."""
    return pa.concat_tables([schema.empty_table(), *parts]).to_pandas()


def valid_day(day) -> bool:
    """Whether `day` is a YYYY-MM-DD day (the picker's value and the store's are only text)."""
    try:
        return isinstance(day, str) and len(day) == 10 and Span.utc_day("t", day) is not None
    except (ValueError, OverflowError):  # 9999-12-31 has no day after it
        return False


class _Days(Generic[T]):
    """What a reader keeps per UTC day, for the last `size` days asked (an LRU)."""

    def __init__(self, make: Callable[[str], T], size: int):
        self.make, self.size = make, size
        self.kept: OrderedDict[str, T] = OrderedDict()

    def of(self, day: str) -> T:
        kept = self.kept.get(day)
        if kept is None:
            kept = self.kept[day] = self.make(day)
        self.kept.move_to_end(day)
        while len(self.kept) > self.size:
            self.kept.popitem(last=False)
        return kept


class _DayFrame:
    def __init__(self, increments: FileIncrements[pa.Table], schema: pa.Schema):
        self.increments, self.frame = increments, frame_of((), schema)


class DayReader:
    """A table's rows (these columns) whose `column` falls on one UTC day: only the data files
    whose statistics overlap the day are read, and of them only the day's rows, so the memory and
    the cost of a read are those of a day however many days the table holds."""

    def __init__(self, lake: Lake, table: Table, columns: Sequence[str], column: str = "window_start",
                 days: int = DAYS_KEPT):
        self.lake, self.table, self.column = lake, table, column
        self.schema = table.schema_of(columns)
        self._lock = threading.Lock()
        self._days: _Days[_DayFrame] = _Days(self._follow, days)

    def _follow(self, day: str) -> _DayFrame:
        span = Span.utc_day(self.column, day)
        return _DayFrame(FileIncrements(self.lake, self.table, self.schema.names, span), self.schema)

    def increments(self, day: str) -> FileIncrements[pa.Table]:
        """The day's follower (for the tests and the benchmark)."""
        with self._lock:
            return self._days.of(day).increments

    def read(self, day: str | None) -> pd.DataFrame:
        """The day's rows (any order); empty for no day."""
        if not valid_day(day):
            return frame_of((), self.schema)
        assert day is not None
        with self._lock:
            kept = self._days.of(day)
            if kept.increments.refresh():
                kept.frame = frame_of(kept.increments.parts.values(), self.schema)
            return kept.frame


class _DayHistory:
    def __init__(self, increments: FileIncrements[dict[int, pa.Table]]):
        self.increments = increments
        self.windows: dict[int, pa.Table] = {}  # window start -> its changes in change order
        self.ordered = SUMMARY_HISTORY.schema.empty_table()


class HistoryReader:
    """Gold's change history of one UTC day (by window_start) at a time, in change order
    (medallion.history.in_change_order), for the last `days` days asked: a day's partition is
    read once, then only its new files. The same table is handed back until the day changes.

    A day holds a row per change of a window, some 5 a second back to back: sorted whole at
    each new file, a full day took half a second. Each window's changes are kept in order
    apart, and a new file sorts again only the windows it has (docs/page-paint.md)."""

    def __init__(self, lake: Lake, days: int = HISTORY_DAYS_KEPT):
        self.lake = lake
        self._lock = threading.Lock()
        self._days: _Days[_DayHistory] = _Days(self._follow, days)

    def _follow(self, day: str) -> _DayHistory:
        span = Span.utc_day("window_start", day)
        return _DayHistory(FileIncrements(self.lake, SUMMARY_HISTORY, SUMMARY_HISTORY.columns, span, by_window))

    def read(self, day: str | None) -> pa.Table:
        """The day's changes, by window and then in the order they were made; empty for no day."""
        return self.read_windows(day)[0]

    def read_windows(self, day: str | None) -> tuple[pa.Table, dict[int, pa.Table]]:
        """The day's changes (as read) and the same rows window by window (its start in epoch
        microseconds -> its changes in order; a window's table is the same object until it
        changes, the dict a new one when any does)."""
        if not valid_day(day):
            return SUMMARY_HISTORY.schema.empty_table(), {}
        assert day is not None
        with self._lock:
            kept = self._days.of(day)
            before = kept.increments.parts
            if kept.increments.refresh():
                after = kept.increments.parts
                touched: set[int] = set()
                for path in before.keys() | after.keys():
                    if before.get(path) is not after.get(path):  # added, removed, or read whole again
                        touched.update(before.get(path, {}), after.get(path, {}))
                windows = dict(kept.windows)
                for start in touched:
                    pieces = [part[start] for part in after.values() if start in part]
                    if pieces:
                        windows[start] = in_change_order(pa.concat_tables(pieces))
                    else:
                        windows.pop(start, None)
                kept.windows = dict(sorted(windows.items()))
                kept.ordered = pa.concat_tables([SUMMARY_HISTORY.schema.empty_table(), *kept.windows.values()])
            return kept.ordered, kept.windows


@dataclass(frozen=True)
class _FileLateness:
    """A silver file's trades of the day: the tally of those stamped with their lateness, and how
    many were written before lateness was stamped."""

    stamped: LatenessTally
    unstamped: int


class _DayLateness:
    def __init__(self, increments: FileIncrements[_FileLateness], points_us: tuple[int, ...]):
        self.increments = increments
        self.unstamped_files: tuple[frozenset[tuple[str, int]], int | None] = (frozenset(), None)
        self.unstamped = LatenessTally.empty(points_us)  # the tally of their trades, from the ledger
        self.ledger_version: int | None = None
        self.tally = LatenessTally.empty(points_us)


class LatenessReader:
    """The lateness of a day's silver trades, as a LatenessTally at `points_us` (the what-if's
    delays and bins), for the last few days asked. Each trade's lateness is stored beside it
    (silver's LATENESS, stamped by the batch that kept it): a file of the day is read once, one
    column, and tallied. Trades written before lateness was stamped are judged from the ledger
    (lateness.trade_lateness), again while some had no ledger rows yet and the ledger moved on.
    `delay`: the run's watermark delay, for ledger rows written before fronts were."""

    def __init__(self, lake: Lake, delay: timedelta, points_us: tuple[int, ...], days: int = DAYS_KEPT):
        self.lake, self.delay, self.points_us = lake, delay, points_us
        self._days: _Days[_DayLateness] = _Days(self._follow, days)
        self._lock = threading.Lock()

    def _follow(self, day: str) -> _DayLateness:
        span = Span.utc_day("event_time", day)
        return _DayLateness(FileIncrements(self.lake, SILVER, [LATENESS], span, self._tallied), self.points_us)

    def _tallied(self, rows: pa.Table) -> _FileLateness:
        stamped = pc.drop_null(rows[LATENESS])
        return _FileLateness(LatenessTally.of(stamped.to_numpy(), self.points_us), rows.num_rows - len(stamped))

    def read(self, day: str) -> LatenessTally:
        """The day's tally: the same object until the day's trades or their lateness change."""
        with self._lock:
            kept = self._days.of(day)
            changed = kept.increments.refresh()
            parts = kept.increments.parts
            # The trades without a stored lateness, as files and counts (read whole: any new version).
            unstamped = (frozenset((path, part.unstamped) for path, part in parts.items() if part.unstamped),
                         kept.increments.version if WHOLE_READ in parts else None)
            # Trades judged from the ledger are judged again once its rows may hold those not judged.
            ledger_version = self._ledger_version() if kept.unstamped.not_judged else kept.ledger_version
            if unstamped != kept.unstamped_files or ledger_version != kept.ledger_version:
                ledger_version = self._ledger_version()
                kept.unstamped = self._judged_from_ledger(day, kept.increments) if unstamped[0] else \
                    LatenessTally.empty(self.points_us)
                kept.unstamped_files = unstamped
                kept.ledger_version = ledger_version if kept.unstamped.not_judged else None
                changed = True
            if changed:
                kept.tally = sum((part.stamped for part in parts.values()), kept.unstamped)
            return kept.tally

    def _ledger_version(self) -> int | None:
        ledger = self.lake.open(BATCH_WATERMARKS)
        return ledger.version() if ledger is not None else None

    def _judged_from_ledger(self, day: str, increments: FileIncrements) -> LatenessTally:
        """The tally of the day's trades written before lateness was stamped, at the version followed."""
        if increments.version is None:
            return LatenessTally.empty(self.points_us)
        opened = self.lake.open_version(SILVER, increments.version)
        stamps = opened is not None and LATENESS in opened.schema().to_arrow().names  # (an app's start adds it)
        where = Span.utc_day("event_time", day).where() + (f" AND {quote(LATENESS)} IS NULL" if stamps else "")
        trades = self.lake.read(SILVER, LATENESS_COLUMNS, where, version=increments.version).to_pandas()
        lateness = trade_lateness(trades, self._ledger_of(trades), self.delay)
        return LatenessTally.of(lateness.to_numpy(dtype="int64", na_value=NOT_JUDGED), self.points_us)

    def _ledger_of(self, trades: pd.DataFrame) -> pd.DataFrame:
        """The ledger rows whose ranges may hold these trades' records."""
        if trades.empty:
            return pd.DataFrame()
        bounds = trades.groupby(["topic", "partition"])["offset"].agg(["min", "max"])
        where = " OR ".join(f"({equals('topic', t)} AND {equals('partition', int(p))} AND {quote('end_offset')} > "
                            f"{int(low)} AND {quote('start_offset')} <= {int(high)})"
                            for (t, p), (low, high) in bounds.iterrows())
        return self.lake.read(BATCH_WATERMARKS, where=where).to_pandas()


def channel_symbol_pairs(trades: pa.Table) -> pa.Table:
    """The distinct (channel, symbol) pairs of some trades: all a file's trades come down to."""
    return trades.select(["channel", "symbol"]).group_by(["channel", "symbol"], use_threads=False).aggregate([])


class _DayValues:
    def __init__(self, increments: FileIncrements[pa.Table]):
        self.increments = increments
        self.values: tuple[list[str], list[str]] = ([], [])


class SilverFilterValues:
    """The channels and symbols of silver's trades on one UTC day (by event_time), sorted, for the
    drill-down's options. Per data file of the day only its distinct (channel, symbol) pairs are
    kept; a new version reads only the added files that overlap the day."""

    def __init__(self, lake: Lake, days: int = DAYS_KEPT):
        self.lake = lake
        self._lock = threading.Lock()
        self._days: _Days[_DayValues] = _Days(self._follow, days)

    def _follow(self, day: str) -> _DayValues:
        span = Span.utc_day("event_time", day)
        return _DayValues(FileIncrements(self.lake, SILVER, ["channel", "symbol"], span, channel_symbol_pairs))

    def increments(self, day: str) -> FileIncrements[pa.Table]:
        """The day's follower (for the tests and the benchmark)."""
        with self._lock:
            return self._days.of(day).increments

    def read(self, day: str | None = None) -> tuple[list[str], list[str]]:
        """(channels, symbols) of the day's trades; of silver's newest day (by its files'
        statistics) when no day is given. Both empty while silver has no trades that day."""
        with self._lock:
            if day is None:
                latest = newest(self.lake, SILVER, "event_time")
                day = None if latest is None else latest.date().isoformat()
            if not valid_day(day):
                return [], []
            assert day is not None
            kept = self._days.of(day)
            if kept.increments.refresh():
                pairs = pa.concat_tables([channel_symbol_pairs(SILVER.schema.empty_table()),
                                          *kept.increments.parts.values()])
                kept.values = (_sorted_values(pairs["channel"]), _sorted_values(pairs["symbol"]))
            return kept.values


def _sorted_values(column: pa.ChunkedArray) -> list[str]:
    return sorted(value for value in pc.unique(column.drop_null()).to_pylist() if value)


def _iso(value) -> str | None:
    return None if value is None else pd.Timestamp(value).isoformat()


def shown_value(value: bytes | None, limit: int = VALUE_CHARS) -> str:
    """A raw Kafka value as plain text for the page: bytes that are not UTF-8 as \\xNN escapes
    after a "(binary, N bytes)" note, control characters escaped, cut to `limit` characters.
    Only ever shown as text (Dash escapes it), never as HTML."""
    if value is None:
        return "(no value)"
    value = bytes(value)
    try:
        text, note = value.decode("utf-8"), ""
    except UnicodeDecodeError:
        text, note = value.decode("utf-8", "backslashreplace"), f"(binary, {len(value):,} bytes) "
    if not text.isprintable():
        text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    if len(text) > limit:
        text = text[:limit] + f"… ({len(value):,} bytes)"
    return note + text


def quarantine_record(row: dict) -> dict:
    """A quarantine row as the store's plain JSON: times as ISO strings, the value as text."""
    return {"reason": row["reason"], "topic": row["topic"], "partition": row["partition"], "offset": row["offset"],
            "kafka_timestamp": _iso(row["kafka_timestamp"]), "ingested_at": _iso(row["ingested_at"]),
            "value": shown_value(row["value"])}


class _FileSummary:
    """What the quarantine panel needs of one data file: its count per (reason, UTC day of the
    Kafka time), and its newest FEED_ROWS records of each reason (the newest of all are among them)."""

    def __init__(self, rows: pa.Table):
        days = pc.cast(pc.floor_temporal(rows["kafka_timestamp"], unit="day"), pa.timestamp("us", tz="UTC"))
        keyed = pa.table({"reason": rows["reason"], "day": days})
        self.counts = keyed.group_by(["reason", "day"], use_threads=False).aggregate([([], "count_all")])
        newest = [rows.filter(pc.equal(rows["reason"], reason)).sort_by(NEWEST_FIRST).slice(0, FEED_ROWS)
                  for reason in pc.unique(rows["reason"].drop_null()).to_pylist()]
        self.newest = pa.concat_tables([rows.schema.empty_table(), *newest])


class QuarantineReader:
    """The quarantine panel's counts per reason and day, and its newest records, of one reason
    or of all. The table grows with every bad record for as long as the lake, so each data
    file is summed up once, when it appears (FileIncrements): a new version costs its new
    files, not the table. Shared by every page (a lock)."""

    def __init__(self, lake: Lake):
        self._lock = threading.Lock()
        self.increments: FileIncrements[_FileSummary] = FileIncrements(lake, QUARANTINE, QUARANTINE_READ,
                                                                       derive=_FileSummary)
        self._counts: list[dict] = []
        self._newest: tuple[str | None, list[dict]] | None = None

    def read(self, reason: str | None = None) -> tuple[list[dict], list[dict]]:
        """([{reason, day (YYYY-MM-DD or None), n}], the newest records of `reason` (None: of
        every reason), as the page shows them)."""
        with self._lock:
            if self.increments.refresh():
                self._counts, self._newest = self._sum_counts(), None
            if self._newest is None or self._newest[0] != reason:
                self._newest = (reason, [quarantine_record(row) for row in self._newest_rows(reason).to_pylist()])
            return self._counts, self._newest[1]

    def _sum_counts(self) -> list[dict]:
        parts = [summary.counts for summary in self.increments.parts.values()]
        if not parts:
            return []
        counts = pa.concat_tables(parts).group_by(["reason", "day"], use_threads=False).aggregate(
            [("count_all", "sum")])
        return [{"reason": r["reason"], "day": None if r["day"] is None else r["day"].strftime("%Y-%m-%d"),
                 "n": r["count_all_sum"]} for r in counts.to_pylist()]

    def _newest_rows(self, reason: str | None) -> pa.Table:
        parts = [summary.newest for summary in self.increments.parts.values()]
        rows = pa.concat_tables([QUARANTINE.schema_of(QUARANTINE_READ).empty_table(), *parts])
        if reason is not None:
            rows = rows.filter(pc.equal(rows["reason"], reason))
        return rows.sort_by(NEWEST_FIRST).slice(0, FEED_ROWS)
