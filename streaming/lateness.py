"""Which trades were too late for the watermark, derived exactly rather than guessed.

Spark records, for each micro-batch N of a query, its watermark (`batchWatermarkMs`: the
largest event time of batches before N, less the delay) and the source offsets it ended at,
in `<checkpoint>/offsets/N`. Batch N evicts state with its own watermark but drops late input
rows against the watermark of batch N-1 (with chained stateful operators, Spark judges late
events by the previous batch's watermark). That is the one a trade of batch N can miss.

The gold sink copies it into the `gold/batch_watermarks` ledger (`ledger_rows`): one row per (query, batch,
topic, partition) with the offset range [start_offset, end_offset) and that watermark. A
valid trade is too late when the gold batch that read its Kafka record had a watermark at or
after its event time (the dedup operator's rule, see gold.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pandas as pd
import pyarrow as pa

from streaming.lake.checkpoints import OffsetLogEntry
from streaming.lake.tables import BATCH_WATERMARKS, LATE_TRADES

# Silver columns needed to tell and to describe a too-late trade.
LATE_CANDIDATE_COLUMNS = ["trade_id", "event_time", "side", "amount", "topic", "partition", "offset"]


def ledger_rows(query_id: str, batch_id: int, read: OffsetLogEntry | None,
                previous: OffsetLogEntry | None) -> pa.Table:
    """The ledger rows of one batch: the offset ranges it read (from the previous batch's ends
    to its own) and the watermark its late input was judged against (the previous batch's)."""
    if read is None:
        return BATCH_WATERMARKS.schema.empty_table()
    watermark_ms, starts = (previous.watermark_ms, previous.ends) if previous else (0, {})
    watermark = datetime.fromtimestamp(watermark_ms / 1000, tz=timezone.utc)
    rows = [(tp, starts.get(tp, 0), end) for tp, end in sorted(read.ends.items()) if end > starts.get(tp, 0)]
    return pa.table({
        "query_id": [query_id] * len(rows), "batch_id": [batch_id] * len(rows),
        "topic": [tp[0] for tp, _, _ in rows], "partition": [tp[1] for tp, _, _ in rows],
        "start_offset": [s for _, s, _ in rows], "end_offset": [e for _, _, e in rows],
        "watermark": [watermark] * len(rows),
    }, schema=BATCH_WATERMARKS.schema)


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
