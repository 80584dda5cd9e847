"""Corrections: changes to windows that event time had already passed (pure functions).

A window is past when the largest event time seen in earlier micro-batches was at or beyond
its end; Spark's watermark for a batch is exactly that largest event time minus the watermark
delay, so `window_end <= watermark + delay`. The chart showed such a window as complete, and
late trades changed it. A past window that appears for the first time is a correction from 0.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pandas as pd
import pyarrow as pa

CORRECTIONS_TABLE = "gold/corrections"
CORRECTIONS_KEYS = ("query_id", "batch_id", "window_start")
_UTC_TIME = pa.timestamp("us", tz="UTC")
_MEASURES = ("buy_amount", "sell_amount", "settlement_amount", "trade_count")
CORRECTIONS_SCHEMA = pa.schema([
    ("window_start", _UTC_TIME), ("window_end", _UTC_TIME),
    ("buy_amount_before", pa.float64()), ("buy_amount_after", pa.float64()),
    ("sell_amount_before", pa.float64()), ("sell_amount_after", pa.float64()),
    ("settlement_amount_before", pa.float64()), ("settlement_amount_after", pa.float64()),
    ("trade_count_before", pa.int64()), ("trade_count_after", pa.int64()),
    ("late_trades", pa.int64()), ("corrected_at", _UTC_TIME), ("watermark", _UTC_TIME),
    ("batch_id", pa.int64()), ("query_id", pa.string()),
])


def find_corrections(current: pd.DataFrame, updated: pd.DataFrame, watermark: datetime | None,
                     delay: timedelta, corrected_at: datetime, batch_id: int, query_id: str) -> pa.Table:
    """current: gold rows as they stand; updated: the batch's new rows for some windows."""
    if watermark is None or updated.empty:
        return CORRECTIONS_SCHEMA.empty_table()
    seen_up_to = pd.Timestamp(watermark) + pd.Timedelta(delay)
    past = updated[pd.to_datetime(updated["window_end"], utc=True) <= seen_up_to]
    if past.empty:
        return CORRECTIONS_SCHEMA.empty_table()
    before = current.set_index("window_start")[list(_MEASURES)] if not current.empty else None
    rows = []
    for row in past.itertuples(index=False):
        old = before.loc[row.window_start] if before is not None and row.window_start in before.index else None
        prior = {m: (old[m] if old is not None else 0) for m in _MEASURES}
        after = {m: getattr(row, m) for m in _MEASURES}
        if all(prior[m] == after[m] for m in _MEASURES):
            continue  # rewritten with the same values (e.g. a replay): nothing changed
        rows.append({
            "window_start": row.window_start, "window_end": row.window_end,
            **{f"{m}_before": prior[m] for m in _MEASURES}, **{f"{m}_after": after[m] for m in _MEASURES},
            "late_trades": int(after["trade_count"] - prior["trade_count"]),
            "corrected_at": corrected_at, "watermark": watermark, "batch_id": batch_id, "query_id": query_id,
        })
    return pa.Table.from_pylist(rows, schema=CORRECTIONS_SCHEMA)
