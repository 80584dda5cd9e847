"""The trade_ids silver has seen: a hashed, sorted index the driver keeps, so that it knows
whether a batch's trade is new to silver without reading silver's ids each micro-batch, and
silver as the guard sees it through that index (silver.guard.EarlierTrades)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from streaming.lake.lookups import rows_of_trade_ids, silver_at_event_times_of
from streaming.lake.store import Lake
from streaming.lake.tables import SILVER

# What the guard compares a trade with its first copy by: its event time and Kafka record.
FIRST_COPY_COLUMNS = ["trade_id", "event_time", "topic", "partition", "offset"]


def trade_id_hashes(ids: pa.ChunkedArray) -> pa.Array:
    """A 64-bit hash per trade_id: enough to find the same trade in two tasks' shares."""
    return pa.array(pd.util.hash_array(ids.to_numpy(zero_copy_only=False)), pa.uint64())


class TradeIds:
    """Hashes of every trade_id silver holds, sorted, so that the driver knows whether a trade
    new to a task's share is new to silver at any event time, without reading silver's ids each
    micro-batch. Read from silver once per sink; new ids join a small sorted run that is merged
    in now and then."""

    MERGE_AT = 65_536

    def __init__(self, lake: Lake):
        self.lake = lake
        self._all: np.ndarray | None = None
        self._recent = np.empty(0, np.uint64)

    def _loaded(self) -> np.ndarray:
        if self._all is None:
            # A batch at a time: silver's ids as strings would take several times their hashes.
            hashes = [trade_id_hashes(batch["trade_id"]).to_numpy() for batch in self.lake.scan(SILVER, ["trade_id"])]
            self._all = np.sort(np.concatenate(hashes)) if hashes else np.empty(0, np.uint64)
        return self._all

    def known(self, hashes: np.ndarray) -> np.ndarray:
        """Per hash: whether silver may hold its trade_id (a 64-bit hash: check before acting)."""
        return _in_sorted(self._loaded(), hashes) | _in_sorted(self._recent, hashes)

    def add(self, hashes: np.ndarray) -> None:
        self._loaded()
        self._recent = np.sort(np.concatenate([self._recent, hashes]))
        if len(self._recent) >= self.MERGE_AT:
            self._all, self._recent = np.sort(np.concatenate([self._all, self._recent])), self._recent[:0]


def _in_sorted(values: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    if len(values) == 0:
        return np.zeros(len(hashes), bool)
    at = np.minimum(np.searchsorted(values, hashes), len(values) - 1)
    return values[at] == hashes


class SilverBefore:
    """Silver before a batch, as the driver's guard asks it (silver.guard.EarlierTrades)."""

    def __init__(self, lake: Lake, trade_ids: TradeIds):
        self.lake = lake
        self.trade_ids = trade_ids

    def first_copies(self, trades: pa.Table) -> pa.Table:
        """Silver's rows of the trades' ids, at any event time: only those the index says silver
        may hold are looked up."""
        known = self.trade_ids.known(trade_id_hashes(trades["trade_id"]).to_numpy())
        return rows_of_trade_ids(self.lake, SILVER, trades["trade_id"].filter(pa.array(known)), FIRST_COPY_COLUMNS)

    def same_trades(self, trades: pa.Table) -> pa.Table:
        return silver_at_event_times_of(self.lake, trades, ["trade_id", "event_time"])
