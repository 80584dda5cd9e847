"""Corrections: changes to windows that event time had already passed (pure functions).

A window is past when the largest event time seen in earlier micro-batches was at or beyond
its end; Spark's watermark for a batch is exactly that largest event time minus the watermark
delay, so `window_end <= watermark + delay`. The chart showed such a window as complete, and
late trades changed it. A past window that appears for the first time is a correction from 0.

`correction_rows` is the one builder of gold/corrections rows: the stream's (`find_corrections`)
and a backfill's (reconcile.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Sequence

import pandas as pd
import pyarrow as pa

from streaming.lake.tables import CORRECTIONS
from streaming.medallion.gold import MEASURES
from streaming.medallion.history import past_windows


def correction_rows(current: pd.DataFrame, changed: pd.DataFrame, corrected_at: datetime,
                    watermark: datetime | None, query_id: str, batch_id: int | Sequence[int]) -> pa.Table:
    """A correction per window of `changed` (its new values) whose values differ from
    `current`'s (gold's rows as they stand; a window gold lacks was 0). batch_id: the writer's
    batch, or one per row of `changed`."""
    before = current.set_index("window_start")[list(MEASURES)] if not current.empty else None
    batch_ids = [batch_id] * len(changed) if isinstance(batch_id, int) else list(batch_id)
    rows = []
    for row, batch in zip(changed.itertuples(index=False), batch_ids):
        old = before.loc[row.window_start] if before is not None and row.window_start in before.index else None
        prior = {m: (old[m] if old is not None else 0) for m in MEASURES}
        after = {m: getattr(row, m) for m in MEASURES}
        if all(prior[m] == after[m] for m in MEASURES):
            continue  # rewritten with the same values (e.g. a replay): nothing changed
        rows.append({
            "window_start": row.window_start, "window_end": row.window_end,
            **{f"{m}_before": prior[m] for m in MEASURES}, **{f"{m}_after": after[m] for m in MEASURES},
            "late_trades": int(after["trade_count"] - prior["trade_count"]),
            "corrected_at": corrected_at, "watermark": watermark, "batch_id": int(batch), "query_id": query_id,
        })
    return pa.Table.from_pylist(rows, schema=CORRECTIONS.schema)


def find_corrections(current: pd.DataFrame, updated: pd.DataFrame, watermark: datetime | None,
                     delay: timedelta, corrected_at: datetime, batch_id: int, query_id: str) -> pa.Table:
    """current: gold rows as they stand; updated: the batch's new rows for some windows."""
    if watermark is None or updated.empty:
        return CORRECTIONS.schema.empty_table()
    past = updated[past_windows(updated, watermark, delay)]
    return correction_rows(current, past, corrected_at, watermark, query_id, batch_id)
