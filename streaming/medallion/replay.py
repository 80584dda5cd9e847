"""Records read again: a replay (`--replay-from`), a fresh checkpoint over offsets silver already
has, or a micro-batch that Spark runs again after a crash.

Gold's windows are running totals that each batch adds its new trades to (sink/gold_step.py).
Adding trades that may already be counted would count them twice, so when a batch's records were
in silver before, the windows its trades fall in are recounted from silver instead: every
trade silver holds in them, each trade_id once, less those listed as too late (a replay
keeps the live run's lateness decisions). A recount sets the windows, so it gives the same
totals however often it runs, and a replay that is stopped half way needs no state of its own.
"""

from __future__ import annotations

from datetime import timedelta

import pyarrow as pa
import pyarrow.compute as pc

from streaming.medallion.gold import window_sums


def recount(trades: pa.Table, too_late_ids: pa.Array | pa.ChunkedArray, window_starts: pa.Array,
            window: timedelta) -> pa.Table:
    """window_sums() of the windows starting at `window_starts`, from `trades` (trade_id, side,
    amount, event_time: all of silver's trades in those windows, and perhaps others) less the
    too-late ones."""
    if isinstance(too_late_ids, pa.ChunkedArray):
        too_late_ids = too_late_ids.combine_chunks()
    counted = trades.filter(pc.invert(pc.is_in(trades["trade_id"], too_late_ids.cast(pa.string()))))
    sums = window_sums(counted, window)
    return sums.filter(pc.is_in(sums["window_start"], window_starts.cast(sums["window_start"].type)))
