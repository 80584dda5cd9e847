"""Gold's change history: each change of a window as it was made, and gold as it stood at any
instant (pure functions).

Gold holds each window's values now. gold/summary_history holds a row per change of a window:
its values after the change, when the change was made (the `updated_at` gold gives the window
in the same step, taken just before gold's commit), the batch that made it and its cause. A
window rewritten with the values it had (a replay, a recount) has no change. Gold as it stood at
an instant is, for each window, its last change at or before that instant (`as_of`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from streaming.lake.tables import SUMMARY_HISTORY, UTC_TIME
from streaming.medallion.gold import MEASURES, window_measures, window_rows

# Why a window changed.
ON_TIME = "on_time"  # trades of a window the watermark had not yet passed
LATE = "late"  # trades within the watermark of a window already past: a correction
BACKFILL = "backfill"  # a backfill set the window to silver's values (jobs/reconcile.py)
REPLAY = "replay"  # records read again: the window recounted from silver (medallion/replay.py)
CAUSES = (ON_TIME, LATE, BACKFILL, REPLAY)
CARRIED_OVER = "carried-over"  # the writer of the history a lake from before it starts with
BACKFILL_WRITER = "backfill"  # the query id a backfill writes corrections and changes as


def past_windows(windows: pa.Table, watermark: datetime | None, delay: timedelta) -> list[bool]:
    """Which windows the chart already showed as complete: the largest event time seen before
    the batch (the watermark plus its delay) was at or beyond their end. None: no watermark yet."""
    if watermark is None or windows.num_rows == 0:
        return [False] * windows.num_rows
    seen_up_to = watermark + delay
    return [end <= seen_up_to for end in windows["window_end"].cast(UTC_TIME).to_pylist()]


def stream_causes(windows: pa.Table, watermark: datetime | None, delay: timedelta) -> list[str]:
    """The cause of each window's change by a stream batch that adds trades: late for a window
    already past, on time otherwise."""
    return [LATE if past else ON_TIME for past in past_windows(windows, watermark, delay)]


def change_rows(current: pa.Table, changed: pa.Table, cause: str | Sequence[str], changed_at: datetime,
                query_id: str, batch_id: int | Sequence[int]) -> pa.Table:
    """A history row per window of `changed` (its values after the change) whose values differ
    from `current`'s (gold's rows before it; a window gold lacks was 0). cause and batch_id: one
    for all, or one per row of `changed`."""
    count = changed.num_rows
    causes = [cause] * count if isinstance(cause, str) else list(cause)
    batches = [batch_id] * count if isinstance(batch_id, int) else [int(b) for b in batch_id]
    if count == 0:
        return SUMMARY_HISTORY.schema.empty_table()
    before, zero = window_measures(current), (0,) * len(MEASURES)
    after = window_rows(changed)
    values = zip(after["window_start"].to_pylist(), zip(*(after[m].to_pylist() for m in MEASURES)))
    kept = [i for i, (start, measures) in enumerate(values) if before.get(start, zero) != measures]
    rows = after.take(pa.array(kept, pa.int64()))
    return pa.table({
        **{name: rows[name] for name in ("window_start", "window_end", *MEASURES)},
        "changed_at": pa.array([changed_at] * len(kept), UTC_TIME),
        "cause": [causes[i] for i in kept],
        "batch_id": [batches[i] for i in kept],
        "query_id": [query_id] * len(kept),
    }).cast(SUMMARY_HISTORY.schema)


def carried_over(gold: pd.DataFrame, corrections: pd.DataFrame) -> pa.Table:
    """The history a lake from before it starts with, from what it kept: each window as first
    reported (before its first correction, just before it; else as it stands, at its last
    update), then each correction's values after it, as the correction was made."""
    first = corrections.sort_values(["corrected_at", "batch_id"]).drop_duplicates("window_start")
    first = first.set_index("window_start")
    reported = gold.set_index("window_start")[["window_end", *MEASURES, "updated_at"]].copy()
    corrected = reported.index.isin(first.index)
    for measure in MEASURES:
        before = first[f"{measure}_before"].reindex(reported.index[corrected]).to_numpy()
        reported[measure] = reported[measure].astype(float if measure != "trade_count" else "int64")
        reported.loc[corrected, measure] = before
    reported.loc[corrected, "updated_at"] = (first["corrected_at"].reindex(reported.index[corrected])
                                             - pd.Timedelta(microseconds=1)).to_numpy()
    reported = reported[(reported[list(MEASURES)] != 0).any(axis=1)].reset_index()  # a correction from 0
    parts = [pa.table({
        **{name: reported[name].to_numpy() for name in ("window_start", "window_end", *MEASURES)},
        "changed_at": reported["updated_at"].to_numpy(), "cause": [ON_TIME] * len(reported),
        "batch_id": [0] * len(reported), "query_id": [CARRIED_OVER] * len(reported)}).cast(SUMMARY_HISTORY.schema)]
    if not corrections.empty:
        parts.append(pa.table({
            "window_start": corrections["window_start"].to_numpy(), "window_end": corrections["window_end"].to_numpy(),
            **{m: corrections[f"{m}_after"].to_numpy() for m in MEASURES},
            "changed_at": corrections["corrected_at"].to_numpy(),
            "cause": [BACKFILL if q == BACKFILL_WRITER else LATE for q in corrections["query_id"]],
            "batch_id": corrections["batch_id"].to_numpy(), "query_id": corrections["query_id"].to_numpy(),
        }).cast(SUMMARY_HISTORY.schema))
    return pa.concat_tables(parts)


def in_change_order(history: pa.Table) -> pa.Table:
    """The rows by window, and each window's changes in the order they were made."""
    if history.num_rows == 0:
        return history
    return history.sort_by([("window_start", "ascending"), ("changed_at", "ascending"),
                            ("batch_id", "ascending")])


def by_window(rows: pa.Table) -> dict[int, pa.Table]:
    """History rows split by window: its start (epoch microseconds) -> its rows."""
    if rows.num_rows == 0:
        return {}
    starts = pc.cast(rows["window_start"], pa.int64()).to_numpy()
    order = np.argsort(starts, kind="stable")
    rows, starts = rows.take(pa.array(order)), starts[order]
    cuts = [0, *np.flatnonzero(starts[1:] != starts[:-1]) + 1, len(starts)]
    return {int(starts[low]): rows.slice(low, high - low) for low, high in zip(cuts, cuts[1:])}


def made_by(ordered: pa.Table, instant: datetime | pd.Timestamp | None) -> pa.Table:
    """The changes made at or before `instant` (all of them: None), in the order given."""
    if instant is None or ordered.num_rows == 0:
        return ordered
    return ordered.filter(pa.array(ordered["changed_at"].to_numpy() <= _utc_micros(instant)))


def as_of(ordered: pa.Table, instant: datetime | pd.Timestamp | None) -> pa.Table:
    """Each window's last change at or before `instant` (all of them: None), by window start.
    `ordered`: history rows in_change_order."""
    known = made_by(ordered, instant)
    if known.num_rows == 0:
        return known
    starts = known["window_start"].to_numpy()
    # Within a window the changes are in time order: its last one known is the last of its rows.
    return known.filter(pa.array(np.append(starts[1:] != starts[:-1], True)))


def revisions(ordered: pa.Table, window_start: datetime | pd.Timestamp) -> pa.Table:
    """One window's changes, oldest first. `ordered`: history rows in_change_order."""
    return ordered.filter(pc.equal(ordered["window_start"], pa.scalar(pd.Timestamp(window_start).to_pydatetime(),
                                                                       ordered.schema.field("window_start").type)))


def first_reported(ordered: pa.Table) -> pa.Table:
    """Each corrected window (window_start and MEASURES) as the chart first showed it complete:
    its values before its first change that was not on time (zeros if that was its first).
    `ordered`: history rows in_change_order."""
    if ordered.num_rows == 0:
        return ordered.select(["window_start", *MEASURES])
    starts = ordered["window_start"].to_numpy()
    corrected = pc.not_equal(ordered["cause"], ON_TIME).to_numpy(zero_copy_only=False)
    first_of_window = np.insert(starts[1:] != starts[:-1], 0, True)
    group = np.cumsum(first_of_window) - 1
    rows = np.flatnonzero(corrected)
    _, first = np.unique(group[rows], return_index=True)  # each window's first correction
    rows = rows[first]
    before = rows - 1
    from_zero = first_of_window[rows]
    values = {m: np.where(from_zero, 0, ordered[m].to_numpy()[np.maximum(before, 0)]) for m in MEASURES}
    schema = pa.schema([ordered.schema.field(name) for name in ("window_start", *MEASURES)])
    return pa.table({"window_start": ordered["window_start"].take(pa.array(rows, pa.int64())), **values}).cast(schema)


def _utc_micros(instant: datetime | pd.Timestamp) -> np.datetime64:
    stamp = pd.Timestamp(instant)
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return np.datetime64(stamp.tz_localize(None), "us")
