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

import pyarrow as pa

from streaming.lake.tables import CORRECTIONS
from streaming.medallion.gold import MEASURES, window_measures, window_rows
from streaming.medallion.history import past_windows


def correction_rows(current: pa.Table, changed: pa.Table, corrected_at: datetime,
                    watermark: datetime | None, query_id: str, batch_id: int | Sequence[int]) -> pa.Table:
    """A correction per window of `changed` (its new values) whose values differ from
    `current`'s (gold's rows as they stand; a window gold lacks was 0). batch_id: the writer's
    batch, or one per row of `changed`."""
    before, zero = window_measures(current), (0,) * len(MEASURES)
    batch_ids = [batch_id] * changed.num_rows if isinstance(batch_id, int) else list(batch_id)
    rows = []
    for window, batch in zip(window_rows(changed).to_pylist(), batch_ids):
        prior = dict(zip(MEASURES, before.get(window["window_start"], zero)))
        if all(prior[m] == window[m] for m in MEASURES):
            continue  # rewritten with the same values (e.g. a replay): nothing changed
        rows.append({
            "window_start": window["window_start"], "window_end": window["window_end"],
            **{f"{m}_before": prior[m] for m in MEASURES}, **{f"{m}_after": window[m] for m in MEASURES},
            "late_trades": int(window["trade_count"] - prior["trade_count"]),
            "corrected_at": corrected_at, "watermark": watermark, "batch_id": int(batch), "query_id": query_id,
        })
    return pa.Table.from_pylist(rows, schema=CORRECTIONS.schema)


def find_corrections(current: pa.Table, updated: pa.Table, watermark: datetime | None,
                     delay: timedelta, corrected_at: datetime, batch_id: int, query_id: str) -> pa.Table:
    """current: gold rows as they stand; updated: the batch's new rows for some windows."""
    if watermark is None or updated.num_rows == 0:
        return CORRECTIONS.schema.empty_table()
    past = updated.filter(pa.array(past_windows(updated, watermark, delay), pa.bool_()))
    return correction_rows(current, past, corrected_at, watermark, query_id, batch_id)
