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

from datetime import datetime, timedelta, timezone
from typing import NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from streaming.lake.checkpoints import OffsetLogEntry
from streaming.lake.tables import BATCH_WATERMARKS, LATE_TRADES

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


def late_trade_rows(late: pd.DataFrame, window: timedelta, detected_at: datetime) -> pa.Table:
    """too_late_trades() output -> gold/late_trades rows: the window each trade belonged to,
    the watermark it missed and by how much."""
    if late.empty:
        return LATE_TRADES.schema.empty_table()
    event_time = pd.to_datetime(late["event_time"], utc=True)
    start = event_time.dt.floor(pd.Timedelta(window))
    return pa.Table.from_pandas(pd.DataFrame({
        "trade_id": late["trade_id"], "event_time": event_time, "window_start": start,
        "window_end": start + pd.Timedelta(window), "watermark": pd.to_datetime(late["watermark"], utc=True),
        "late_by_seconds": late["late_by"].dt.total_seconds(), "side": late["side"], "amount": late["amount"],
        "topic": late["topic"], "partition": late["partition"], "offset": late["offset"],
        "detected_at": pd.Timestamp(detected_at), "backfilled_at": pd.NaT,
    }), schema=LATE_TRADES.schema, preserve_index=False)


# -- lateness: how far behind the stream's front a trade arrived (the what-if of --watermark) -----
# A trade of a batch whose front (the latest event time before it) is F has lateness F - event
# time, or 0 when it moved the front or came before any. With the delay D the batch's watermark is
# F - D, so the trade is too late exactly when its lateness is D or more: one figure per trade
# answers "how many would a delay of D have left out" for every D. A trade at or before an idle
# close in force is too late whatever the delay: its lateness is CLOSED.
LATENESS_COLUMNS = ["event_time", "topic", "partition", "offset"]
MICROSECOND = pd.Timedelta(microseconds=1)
CLOSED = np.iinfo(np.int64).max  # lateness of a trade for a window an idle close had made final


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
    lateness = np.full(len(trades), -1, dtype="int64")  # -1: no range holds the record
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
    return pd.Series(pd.arrays.IntegerArray(lateness, lateness < 0), index=trades.index)


def _judge(lateness: np.ndarray, rows: np.ndarray, ranges: pd.DataFrame, offsets: np.ndarray,
           event_us: np.ndarray) -> None:
    """Sets the lateness of the trades at `rows` that one query's ranges of their partition hold
    (the greatest, where it had one). Capped below the front's distance from the epoch: the sink's
    watermark never goes below the epoch, so no delay that reaches it leaves a trade out."""
    ranges = ranges.sort_values("start_offset")
    starts, ends = ranges["start_offset"].to_numpy("int64"), ranges["end_offset"].to_numpy("int64")
    fronts, known = _microseconds(ranges["front"]), ranges["front"].notna().to_numpy()
    at = np.searchsorted(starts, offsets[rows], side="right") - 1
    inside = (at >= 0) & (offsets[rows] < ends[np.maximum(at, 0)])
    rows, at = rows[inside], at[inside]
    behind = np.where(known[at], np.minimum(fronts[at] - event_us[rows], fronts[at] - 1), 0).clip(min=0)
    if "closed_to" in ranges and ranges["closed_to"].notna().any():
        closed = ranges["closed_to"].notna().to_numpy()[at] & (event_us[rows] <= _microseconds(ranges["closed_to"])[at])
        behind = np.where(closed, CLOSED, behind)
    lateness[rows] = np.maximum(lateness[rows], behind)


def _rows_by_partition(trades: pd.DataFrame) -> dict[tuple[str, int], np.ndarray]:
    """(topic, partition) -> the positions of its trades (one topic, the usual case, costs no
    string grouping)."""
    topics = trades["topic"].unique()
    if len(topics) > 1:
        return {key: rows for key, rows in trades.groupby(["topic", "partition"], sort=False).indices.items()}
    partitions = trades["partition"].to_numpy()
    return {(topics[0], int(p)): np.flatnonzero(partitions == p) for p in np.unique(partitions)}


def too_late_counts(lateness_us: pd.Series, delays: list[timedelta]) -> list[int]:
    """For each delay, how many of these lateness figures (<NA> ignored) are at or above it:
    the trades that delay would have left out."""
    known = np.sort(lateness_us.dropna().to_numpy(dtype="int64"))
    points = np.array([d // timedelta(microseconds=1) for d in delays], dtype="int64")
    return (len(known) - np.searchsorted(known, points, side="left")).tolist()
