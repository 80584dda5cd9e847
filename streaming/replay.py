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

The replay time is kept beside the checkpoints (`replay.json`), so a replay that is stopped and
restarted half way keeps adding the same baseline.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

import pandas as pd
import pyarrow as pa

from streaming.delta_sink import open_table
from streaming.lateness import BATCH_WATERMARKS_TABLE, too_late_trades
from streaming.settings import Settings, parse_instant
from streaming.silver import SILVER_TABLE

REPLAY_FILE = "replay.json"


@dataclass(frozen=True)
class ReplayBaseline:
    since: datetime
    skip_trade_ids: list[str]  # the replayed stream must not count these
    # window_start -> (buy_amount, sell_amount, trade_count) of the trades before `since`
    windows: dict[pd.Timestamp, tuple[float, float, int]]


def remember_replay(settings: Settings) -> None:
    settings.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    (settings.checkpoint_dir / REPLAY_FILE).write_text(json.dumps({"since": settings.replay_from.isoformat()}))


def replay_since(settings: Settings) -> datetime | None:
    """The replay time of the current checkpoints, if they were started by --replay-from."""
    if settings.replay_from is not None:
        return settings.replay_from
    marker = settings.checkpoint_dir / REPLAY_FILE
    return parse_instant(json.loads(marker.read_text())["since"]) if marker.exists() else None


def window_starts(event_times: pd.Series, window: timedelta) -> pd.Series:
    """Spark's tumbling window start: the event time floored to the window, epoch-aligned."""
    return pd.to_datetime(event_times, utc=True).dt.floor(pd.Timedelta(window))


def baseline_from_silver(silver: pd.DataFrame, since: datetime, window: timedelta,
                         too_late_ids: frozenset[str] = frozenset()) -> ReplayBaseline:
    before = silver[silver["kafka_timestamp"] < pd.Timestamp(since)]
    before = before.drop_duplicates("trade_id")
    before = before[~before["trade_id"].isin(too_late_ids)]
    skip = sorted(set(before["trade_id"]) | set(too_late_ids))
    if before.empty:
        return ReplayBaseline(since, skip, {})
    starts = window_starts(before["event_time"], window)
    frame = pd.DataFrame({
        "window_start": starts,
        "buy": before["amount"].where(before["side"] == "BUY", 0.0),
        "sell": before["amount"].where(before["side"] == "SELL", 0.0),
    })
    sums = frame.groupby("window_start").agg(buy=("buy", "sum"), sell=("sell", "sum"), trades=("buy", "size"))
    windows = {pd.Timestamp(ws): (float(r.buy), float(r.sell), int(r.trades)) for ws, r in sums.iterrows()}
    return ReplayBaseline(since, skip, windows)


def load_baseline(settings: Settings) -> ReplayBaseline | None:
    since = replay_since(settings)
    if since is None:
        return None
    table = open_table(settings.table_path(SILVER_TABLE))
    if table is None:
        return ReplayBaseline(since, [], {})
    silver = table.to_pandas(columns=["trade_id", "side", "amount", "event_time", "kafka_timestamp",
                                      "topic", "partition", "offset"])
    ledger_table = open_table(settings.table_path(BATCH_WATERMARKS_TABLE))
    ledger = ledger_table.to_pandas() if ledger_table is not None else pd.DataFrame()
    too_late = frozenset(too_late_trades(silver, ledger)["trade_id"])
    return baseline_from_silver(silver, since, settings.window, too_late)


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
