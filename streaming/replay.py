"""Replay from a Kafka time without partial sums in gold.

A replay reads Kafka from time T with fresh checkpoints, so the gold query starts with empty
aggregation state. A window that already had trades before T (it straddles T) would then be
overwritten with only the replayed part. So, for a replay:

* the baseline of each window is recomputed from silver: the valid trades that reached Kafka
  before T (each trade_id once), less those that were too late for the watermark live
  (lateness.py derives them exactly from the watermark each gold batch used);
* the replayed stream leaves out trade_ids already in that baseline (a redelivery after T
  is not counted twice) and trades that were too late live (a replay keeps those decisions);
* each window the replay updates is written as baseline + replayed sums.

The replay time is kept beside the checkpoints (checkpoints.py), so a replay that is stopped and
restarted half way keeps adding the same baseline.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from streaming.gold import window_sums
from streaming.lake.store import Lake
from streaming.lake.tables import BATCH_WATERMARKS, SILVER
from streaming.lateness import too_late_trades


@dataclass(frozen=True)
class ReplayBaseline:
    since: datetime
    skip_trade_ids: list[str]  # the replayed stream must not count these
    # window_start -> (buy_amount, sell_amount, trade_count) of the trades before `since`
    windows: dict[pd.Timestamp, tuple[float, float, int]]


def baseline_from_silver(silver: pa.Table, since: datetime, window: timedelta,
                         too_late_ids: frozenset[str] = frozenset()) -> ReplayBaseline:
    """silver: trade_id, side, amount, event_time, kafka_timestamp (Arrow)."""
    before = silver.filter(pc.less(silver["kafka_timestamp"], pa.scalar(since, silver["kafka_timestamp"].type)))
    ids = set(before["trade_id"].to_pylist())
    counted = before.filter(pc.invert(pc.is_in(before["trade_id"], pa.array(sorted(too_late_ids), pa.string()))))
    skip = sorted(ids | set(too_late_ids))
    windows = {pd.Timestamp(w["window_start"]): (float(w["buy_amount"]), float(w["sell_amount"]), int(w["trade_count"]))
               for w in window_sums(counted, window).to_pylist()}
    return ReplayBaseline(since, skip, windows)


def load_baseline(lake: Lake, since: datetime | None, window: timedelta) -> ReplayBaseline | None:
    """The baseline of a replay from `since` (None: not a replay)."""
    if since is None:
        return None
    silver = lake.read(SILVER, ["trade_id", "side", "amount", "event_time", "kafka_timestamp",
                                "topic", "partition", "offset"])
    too_late = frozenset(too_late_trades(silver.to_pandas(), lake.read(BATCH_WATERMARKS).to_pandas())["trade_id"])
    return baseline_from_silver(silver, since, window, too_late)


def add_baseline(rows: pa.Table, baseline: ReplayBaseline | None) -> pa.Table:
    """Streamed window sums + the baseline of the same windows."""
    if baseline is None or not baseline.windows or rows.num_rows == 0:
        return rows
    frame = rows.to_pandas()
    extra = frame["window_start"].map(lambda ws: baseline.windows.get(pd.Timestamp(ws)))
    present = extra.notna()
    if present.any():
        add = pd.DataFrame(extra[present].tolist(), index=frame.index[present], columns=["buy", "sell", "count"])
        frame.loc[present, "buy_amount"] += add["buy"]
        frame.loc[present, "sell_amount"] += add["sell"]
        frame.loc[present, "trade_count"] += add["count"]
        frame["settlement_amount"] = frame["buy_amount"] - frame["sell_amount"]
    return pa.Table.from_pandas(frame, schema=rows.schema, preserve_index=False)
