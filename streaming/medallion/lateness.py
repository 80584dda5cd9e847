"""Which trades were too late for the watermark, derived exactly rather than guessed.

Each micro-batch N of the query runs with one watermark: the latest event time among the
trades silver took from the Kafka records before the batch's, less the delay (Spark's rule, over
the trades that passed every check: a trade quarantined for jumping ahead in time never moves
it; MedallionSink.latest_before in sink/medallion_sink.py). A trade of batch N is too late when
its event time is at or before that watermark (`too_late`, in the sink).

When the input has been quiet for --close-idle-after, the watermark moves up to the latest
event time seen (an idle close, `quiet_close_rows`): from the next batch on, the batch's
watermark is the larger of the rule's and the close's.

The sink records it in the `gold/batch_watermarks` ledger (`ledger_rows`): one row per (query,
batch, topic, partition) with the offset range [start_offset, end_offset) it read from Spark's
offset log, and the watermark. `too_late_trades` derives the same from silver and the ledger
alone; the tests check the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import NamedTuple, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from streaming.lake.checkpoints import OffsetLogEntry
from streaming.lake.tables import BATCH_WATERMARKS, LATE_TRADES, UTC_TIME
from streaming.medallion.gold import window_starts

# Silver columns needed to tell and to describe a too-late trade.
EPOCH = datetime.fromtimestamp(0, tz=timezone.utc)
LATE_CANDIDATE_COLUMNS = ["trade_id", "event_time", "side", "amount", "topic", "partition", "offset"]


def ledger_rows(query_id: str, batch_id: int, read: OffsetLogEntry | None,
                previous: OffsetLogEntry | None, watermark: datetime, front: datetime | None = None,
                closed_to: datetime | None = None) -> pa.Table:
    """The ledger rows of one batch: the offset ranges it read (from the previous batch's ends
    to its own), the watermark it ran with, the front that watermark trails and the idle close
    in force (None: none)."""
    if read is None:
        return BATCH_WATERMARKS.schema.empty_table()
    starts = previous.ends if previous else {}
    rows = [(tp, starts.get(tp, 0), end) for tp, end in sorted(read.ends.items()) if end > starts.get(tp, 0)]
    return _ledger_table(query_id, batch_id, rows, watermark, front, closed_to)


def _ledger_table(query_id: str, batch_id: int, ranges: list[tuple[tuple[str, int], int, int]], watermark: datetime,
                  front: datetime | None, closed_to: datetime | None) -> pa.Table:
    n = len(ranges)
    return pa.table({
        "query_id": [query_id] * n, "batch_id": [batch_id] * n,
        "topic": [tp[0] for tp, _, _ in ranges], "partition": [tp[1] for tp, _, _ in ranges],
        "start_offset": [s for _, s, _ in ranges], "end_offset": [e for _, _, e in ranges],
        "watermark": [watermark] * n, "records_lost": [0] * n, "front": [front] * n, "closed_to": [closed_to] * n,
    }, schema=BATCH_WATERMARKS.schema)


# The writer ids of idle closes in the ledger: rows of their own beside the query's batches (so a
# close never takes the key of the batch after it), found by this prefix.
CLOSER_PREFIX = "closed-when-quiet:"


def quiet_closer(query_id: str) -> str:
    return CLOSER_PREFIX + query_id


def quiet_close_rows(query_id: str, before_batch: int, ends: dict[tuple[str, int], int], front: datetime) -> pa.Table:
    """The ledger rows of an idle close: the watermark moved up to `front` (the latest event time
    seen) once the query had read up to `ends`. One empty range per partition, at those ends:
    they hold no record, so every rule over ranges passes them by, and they say from where in
    the stream the close is in force (close_in_force)."""
    ranges = [(tp, end, end) for tp, end in sorted(ends.items())]
    return _ledger_table(quiet_closer(query_id), before_batch, ranges, front, front, front)


class Close(NamedTuple):
    """An idle close: the query and batch it came before, the ends each partition had been read
    to, and the watermark it set."""

    query_id: str
    batch_id: int
    ends: dict[tuple[str, int], int]
    closed_to: datetime


def closes_of(rows: pa.Table) -> list[Close]:
    """The closers' ledger rows (query_id, batch_id, topic, partition, end_offset, closed_to), a
    close per (query, batch)."""
    grouped: dict[tuple[str, int], Close] = {}
    for closer, batch, topic, partition, end, closed in zip(*(rows[c].to_pylist() for c in (
            "query_id", "batch_id", "topic", "partition", "end_offset", "closed_to"))):
        query = closer.removeprefix(CLOSER_PREFIX)
        grouped.setdefault((query, batch), Close(query, batch, {}, closed)).ends[(topic, partition)] = end
    return list(grouped.values())


def reached_closes(closes: list[Close], query_id: str, batch_id: int, starts: dict[tuple[str, int], int]
                   ) -> tuple[datetime | None, list[Close]]:
    """The latest idle close in force for batch `batch_id` of a query, which reads on from
    `starts` (the ends of the batch before it, per partition), and the closes not in force yet.
    The query's own closes are in force from the batch they came before (made once every batch
    planned was committed, so a batch run again after a crash keeps its watermark); another
    query's (before a replay) once every partition has been read up to where it was made, so a
    replay meets it about where the live query did."""
    def reached(close: Close) -> bool:
        if close.query_id == query_id:
            return close.batch_id <= batch_id
        return bool(starts) and all(starts.get(tp, 0) >= end for tp, end in close.ends.items())

    in_force = [close.closed_to for close in closes if reached(close)]
    return max(in_force, default=None), [close for close in closes if not reached(close)]


def close_in_force(closes: list[Close], query_id: str, batch_id: int,
                   starts: dict[tuple[str, int], int]) -> datetime | None:
    return reached_closes(closes, query_id, batch_id, starts)[0]


def with_close(watermark: datetime, closed_to: datetime | None) -> datetime:
    """A batch's watermark: the rule's, or an idle close's where that is later."""
    return watermark if closed_to is None else max(watermark, closed_to)


def judged_watermark(ledger: pa.Table) -> datetime:
    """The watermark a batch's trades are judged against, from its ledger rows (the epoch
    before the first watermark)."""
    if ledger.num_rows == 0:
        return EPOCH
    return ledger["watermark"][0].as_py()


def judged_close(ledger: pa.Table) -> datetime | None:
    """The idle close in force for a batch, from its ledger rows (None: none)."""
    if ledger.num_rows == 0 or "closed_to" not in ledger.column_names:
        return None
    return ledger["closed_to"][0].as_py()


def judged_delay(ledger: pa.Table, delay: timedelta) -> timedelta:
    """How far a batch's watermark trails its front, from its ledger rows: `delay` (the rule's),
    less while an idle close holds the watermark nearer (0 when it is at the front); `delay` for
    rows written before fronts were."""
    if ledger.num_rows == 0 or "front" not in ledger.column_names or ledger["front"][0].as_py() is None:
        return delay
    return min(delay, ledger["front"][0].as_py() - judged_watermark(ledger))


def too_late(trades: pa.Table, watermark: datetime) -> pa.ChunkedArray:
    """Per trade of a batch: whether its event time is at or before the batch's watermark."""
    if watermark <= EPOCH:
        return pa.chunked_array([pa.array([False] * trades.num_rows, pa.bool_())])
    return pc.less_equal(trades["event_time"], pa.scalar(watermark, trades["event_time"].type))


def too_late_trades(silver: pd.DataFrame, ledger: pd.DataFrame) -> pd.DataFrame:
    """Silver trades whose gold batch had a watermark at or after their event time.

    silver: trade_id, event_time, topic, partition, offset (+ any other columns, kept).
    ledger: the batch_watermarks table. A trade read under several checkpoints (a replay)
    is too late if it was too late in any of them: a replay keeps the decisions made live.
    Adds `watermark` and `late_by` (watermark - event_time) columns.
    """
    if silver.empty or ledger.empty:
        return silver.iloc[0:0].assign(watermark=pd.Series(dtype="datetime64[us, UTC]"),
                                       late_by=pd.Series(dtype="timedelta64[us]"))
    found = []
    records = silver.sort_values("offset")
    for (query_id, topic, partition), ranges in ledger.groupby(["query_id", "topic", "partition"]):
        mine = records[(records["topic"] == topic) & (records["partition"] == partition)]
        if mine.empty:
            continue
        matched = pd.merge_asof(mine, ranges.sort_values("start_offset")[["start_offset", "end_offset", "watermark"]],
                                left_on="offset", right_on="start_offset", direction="backward")
        inside = matched["offset"] < matched["end_offset"]
        event_time = pd.to_datetime(matched["event_time"], utc=True)
        watermark = pd.to_datetime(matched["watermark"], utc=True)
        late = inside & (watermark > pd.Timestamp(0, tz="UTC")) & (event_time <= watermark)
        found.append(matched[late].drop(columns=["start_offset", "end_offset"]))
    if not found:
        return too_late_trades(silver.iloc[0:0], ledger.iloc[0:0])
    late = pd.concat(found).drop_duplicates("trade_id")
    late["late_by"] = pd.to_datetime(late["watermark"], utc=True) - pd.to_datetime(late["event_time"], utc=True)
    return late.reset_index(drop=True)


def late_trade_rows(late: pa.Table, watermark: datetime, window: timedelta, detected_at: datetime) -> pa.Table:
    """Too-late trades (LATE_CANDIDATE_COLUMNS) -> gold/late_trades rows: the window each trade
    belonged to, the watermark it missed and by how much. In Arrow: it is on the gold step's path."""
    n = late.num_rows
    event_time = late["event_time"].cast(UTC_TIME)
    start = window_starts(event_time, window)
    late_by = pc.subtract(pa.scalar(watermark, UTC_TIME), event_time).cast(pa.int64())  # microseconds
    columns = {
        "trade_id": late["trade_id"], "event_time": event_time, "window_start": start,
        "window_end": pc.add(start, pa.scalar(window, pa.duration("us"))),
        "watermark": pa.array([watermark] * n, UTC_TIME),
        # A trade dated far ahead has a lateness past float64's exact integers: rounded, as pandas did.
        "late_by_seconds": pc.divide(late_by.cast(pa.float64(), safe=False), 1e6),
        "side": late["side"], "amount": late["amount"],
        "topic": late["topic"], "partition": late["partition"], "offset": late["offset"],
        "detected_at": pa.array([detected_at] * n, UTC_TIME), "backfilled_at": pa.nulls(n, UTC_TIME),
    }
    return pa.table({field.name: columns[field.name].cast(field.type) for field in LATE_TRADES.schema},
                    schema=LATE_TRADES.schema)


# -- lateness: how far behind the stream's front a trade arrived (the what-if of --watermark) -----
# A trade of a batch whose front (the latest event time before it) is F has lateness F - event
# time, or 0 when it moved the front or came before any. With the delay D the batch's watermark is
# F - D, so the trade is too late exactly when its lateness is D or more: one figure per trade
# answers "how many would a delay of D have left out" for every D. A trade at or before an idle
# close in force is too late whatever the delay: its lateness is CLOSED.
LATENESS_COLUMNS = ["event_time", "topic", "partition", "offset"]
CLOSED = np.iinfo(np.int64).max  # lateness of a trade for a window an idle close had made final
NOT_JUDGED = -1  # in an int64 array of lateness: no figure (no ledger range held the trade's record)
NO_TIME = np.iinfo(np.int64).min  # a time in microseconds that is not there (NaT's)
MICROSECOND = timedelta(microseconds=1)
# Silver's column: each trade's lateness, stamped by the batch that kept it (null in rows written
# before it was: trade_lateness derives theirs from the ledger).
LATENESS = "lateness_us"


def ledger_fronts(ledger: pd.DataFrame, delay: timedelta) -> pd.Series:
    """Each ledger row's front: as recorded, or for a row written before fronts were (null
    `front`, a watermark set), its watermark plus `delay`; NaT before the first watermark."""
    watermark = pd.to_datetime(ledger["watermark"], utc=True)
    derived = (watermark + pd.Timedelta(delay)).where(watermark > pd.Timestamp(EPOCH))
    if "front" not in ledger:
        return derived
    return pd.to_datetime(ledger["front"], utc=True).fillna(derived)


def _microseconds(times: pd.Series) -> np.ndarray:
    """Times as int64 microseconds since the epoch, UTC (one without a zone is taken as UTC; NaT:
    the smallest int64)."""
    index = pd.DatetimeIndex(times)
    return (index.tz_localize("UTC") if index.tz is None else index.tz_convert("UTC")).as_unit("us").asi8


def trade_lateness(trades: pd.DataFrame, ledger: pd.DataFrame, delay: timedelta) -> pd.Series:
    """Per trade (LATENESS_COLUMNS, any index), its lateness in whole microseconds (Int64): from
    the front of the batch that read its record; <NA> when no ledger range holds the record (its
    batch's ledger rows not committed yet). A record read under several checkpoints (a replay)
    takes its greatest lateness, as too_late_trades takes the decision made live. CLOSED: too
    late at any delay, for an idle close (the ledger's closed_to)."""
    lateness = np.full(len(trades), NOT_JUDGED, dtype="int64")  # no range holds the record
    if len(trades) and len(ledger):
        ranges = ledger.assign(front=ledger_fronts(ledger, delay))
        event_us = _microseconds(trades["event_time"])
        offsets = trades["offset"].to_numpy(dtype="int64")
        rows_of = _rows_by_partition(trades)
        # A query's first batch starts at 0 in the ledger (the offset log keeps no start for it),
        # so its range may span records another query read first (a replay): its trades are
        # those no other range holds.
        first = (ranges["batch_id"] == 0).to_numpy() if "batch_id" in ranges else np.zeros(len(ranges), bool)
        for fallback in (False, True):
            for (_, topic, partition), mine in ranges[first == fallback].groupby(["query_id", "topic", "partition"],
                                                                                  sort=False):
                rows = rows_of.get((topic, partition))
                if rows is not None:
                    _judge(lateness, rows[lateness[rows] < 0] if fallback else rows, mine, offsets, event_us)
    return pd.Series(pd.arrays.IntegerArray(lateness, lateness == NOT_JUDGED), index=trades.index)


def _judge(lateness: np.ndarray, rows: np.ndarray, ranges: pd.DataFrame, offsets: np.ndarray,
           event_us: np.ndarray) -> None:
    """Sets the lateness of the trades at `rows` that one query's ranges of their partition hold
    (the greatest, where it had one)."""
    ranges = ranges.sort_values("start_offset")
    starts, ends = ranges["start_offset"].to_numpy("int64"), ranges["end_offset"].to_numpy("int64")
    at = np.searchsorted(starts, offsets[rows], side="right") - 1
    inside = (at >= 0) & (offsets[rows] < ends[np.maximum(at, 0)])
    rows, at = rows[inside], at[inside]
    closed = _microseconds(ranges["closed_to"]) if "closed_to" in ranges else np.full(len(ranges), NO_TIME)
    behind = lateness_rule(event_us[rows], _microseconds(ranges["front"])[at], closed[at])
    lateness[rows] = np.maximum(lateness[rows], behind)


def _rows_by_partition(trades: pd.DataFrame) -> dict[tuple[str, int], np.ndarray]:
    """(topic, partition) -> the positions of its trades (one topic, the usual case, costs no
    string grouping)."""
    topics = trades["topic"].unique()
    if len(topics) > 1:
        return {key: rows for key, rows in trades.groupby(["topic", "partition"], sort=False).indices.items()}
    partitions = trades["partition"].to_numpy()
    return {(topics[0], int(p)): np.flatnonzero(partitions == p) for p in np.unique(partitions)}


def lateness_rule(event_us: np.ndarray, front_us: np.ndarray | int, closed_us: np.ndarray | int) -> np.ndarray:
    """The one rule, in whole microseconds: front - event time, or 0 when the trade moved the
    front or came before any (front NO_TIME); CLOSED when it is at or before an idle close in
    force (closed NO_TIME: none). Capped below the front's distance from the epoch: the sink's
    watermark never goes below the epoch, so no delay that reaches it leaves a trade out."""
    front = np.broadcast_to(np.asarray(front_us, dtype="int64"), np.shape(event_us))
    closed = np.broadcast_to(np.asarray(closed_us, dtype="int64"), np.shape(event_us))
    known = front != NO_TIME
    safe_front = np.where(known, front, event_us)  # no arithmetic on the sentinel
    behind = np.where(known, np.minimum(safe_front - event_us, safe_front - 1), 0).clip(min=0)
    return np.where((closed != NO_TIME) & (event_us <= closed), CLOSED, behind)


def stamped(trades: pa.Table, front: datetime | None, closed_to: datetime | None) -> pa.Table:
    """Silver rows of one batch with their lateness (LATENESS) from the batch's front and the
    idle close in force: stored beside each trade, so a day's what-if reads one column."""
    event_us = trades["event_time"].cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).to_numpy()
    lateness = lateness_rule(event_us, _microseconds_of(front), _microseconds_of(closed_to))
    return trades.set_column(trades.schema.get_field_index(LATENESS), LATENESS, pa.array(lateness, pa.int64()))


def greatest_lateness(trades: pa.Table, before: pa.Table) -> pa.Table:
    """Silver rows of records read again, each with the greater of its lateness now and the one
    silver's row of the same trade from the same record had (`before`: trade_id, topic,
    partition, offset, LATENESS), as trade_lateness takes a record's greatest over the
    checkpoints that read it. A row silver had without a lateness (written before it was
    stored) stays without: read, it is judged from the ledger over every checkpoint."""
    if before.num_rows == 0:
        return trades
    same = ["trade_id", "topic", "partition", "offset"]  # silver holds a trade_id once: one match at most
    rows = trades.select(same).append_column("row", pa.array(np.arange(trades.num_rows)))
    earlier = before.select([*same, LATENESS]).rename_columns([*same, "before"])
    earlier = earlier.append_column("found", pa.repeat(pa.scalar(True), earlier.num_rows))
    matched = rows.join(earlier, same, join_type="left outer", use_threads=False).sort_by("row")
    assert matched.num_rows == trades.num_rows
    greatest = pc.max_element_wise(trades[LATENESS], matched["before"], skip_nulls=True)
    unjudged = pc.and_(pc.fill_null(matched["found"], False), pc.is_null(matched["before"]))
    greatest = pc.if_else(unjudged, pa.scalar(None, pa.int64()), greatest)
    return trades.set_column(trades.schema.get_field_index(LATENESS), LATENESS, greatest)


def _microseconds_of(moment: datetime | None) -> int:
    return NO_TIME if moment is None else (moment - EPOCH) // MICROSECOND


def too_late_counts(lateness_us: np.ndarray | pd.Series, delays: Sequence[timedelta]) -> list[int]:
    """For each delay, how many of these lateness figures (<NA> or NOT_JUDGED ignored) are at or
    above it: the trades that delay would have left out."""
    if isinstance(lateness_us, pd.Series):
        lateness_us = lateness_us.to_numpy(dtype="int64", na_value=NOT_JUDGED)
    return _at_least(lateness_us, [d // MICROSECOND for d in delays])


def _at_least(lateness_us: np.ndarray, points_us: Sequence[int]) -> list[int]:
    """too_late_counts at points in microseconds: one pass of the figures against the few
    points, no sort of them."""
    points = np.asarray(points_us, dtype="int64")
    order = np.argsort(points, kind="stable")
    slots = np.searchsorted(points[order], lateness_us[lateness_us != NOT_JUDGED], side="right")
    beyond = np.cumsum(np.bincount(slots, minlength=len(points) + 1)[::-1])[::-1]  # figures in slot >= k
    counts = np.empty(len(points), dtype="int64")
    counts[order] = beyond[1:]
    return counts.tolist()


@dataclass(frozen=True)
class LatenessTally:
    """How many of some trades had at least each lateness of `points_us` (too_late_counts), how
    many were judged and how many not: all the what-if needs, the same size for a file or a
    day, and added up over files."""

    points_us: tuple[int, ...]
    at_least: tuple[int, ...]
    judged: int
    not_judged: int

    @classmethod
    def of(cls, lateness_us: np.ndarray | pd.Series, points_us: tuple[int, ...]) -> LatenessTally:
        """lateness_us: int64 figures, NOT_JUDGED (or <NA>) where a trade has none."""
        if isinstance(lateness_us, pd.Series):
            lateness_us = lateness_us.to_numpy(dtype="int64", na_value=NOT_JUDGED)
        missing = int(np.count_nonzero(lateness_us == NOT_JUDGED))
        return cls(points_us, tuple(_at_least(lateness_us, points_us)), len(lateness_us) - missing, missing)

    @classmethod
    def empty(cls, points_us: tuple[int, ...]) -> LatenessTally:
        return cls(points_us, (0,) * len(points_us), 0, 0)

    def __add__(self, other: LatenessTally) -> LatenessTally:
        assert self.points_us == other.points_us
        return LatenessTally(self.points_us, tuple(a + b for a, b in zip(self.at_least, other.at_least)),
                             self.judged + other.judged, self.not_judged + other.not_judged)

    def too_late(self, delay_us: int) -> int:
        """The trades with a lateness of at least `delay_us`, one of the points."""
        return self.at_least[self.points_us.index(delay_us)]
