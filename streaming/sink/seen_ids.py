"""The trade_ids silver has seen, by event day: an index the driver keeps of the few days that
trades arrive for, so that it knows whether a batch's trade is new to silver without reading
silver each micro-batch; and silver as the guard sees it through that index
(silver.guard.EarlierTrades)."""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from streaming.lake.lookups import rows_of_trade_ids, silver_at_event_times_of, trade_ids_between
from streaming.lake.store import Lake
from streaming.lake.tables import SILVER

# What the guard compares a trade with its first copy by: its event time and Kafka record.
FIRST_COPY_COLUMNS = ["trade_id", "event_time", "topic", "partition", "offset"]
# The days whose ids the driver holds: today's, yesterday's (trades late across midnight) and
# one more (a late trade's, a replay's). A trade of another day has its day read from silver.
DAYS_HELD = 3
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
MICROS_A_DAY = 86_400_000_000
NOT_FOUND = np.iinfo(np.int64).min


def trade_id_hashes(ids: pa.ChunkedArray | pa.Array) -> pa.Array:
    """A 64-bit hash per trade_id: enough to find the same trade in two tasks' shares."""
    return pa.array(pd.util.hash_array(ids.to_numpy(zero_copy_only=False)), pa.uint64())


def event_days(times: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Each event time's UTC day, as days since 1970-01-01 (a duplicate carries its trade's day)."""
    micros = pc.cast(times, pa.int64()).to_numpy(zero_copy_only=False)
    return pa.array(np.floor_divide(micros, MICROS_A_DAY).astype(np.int32))


class _SortedRuns:
    """Hashes in a large sorted run and a small one that is merged in now and then."""

    MERGE_AT = 65_536

    def __init__(self, hashes: np.ndarray):
        self.main = np.sort(hashes)
        self.recent = np.empty(0, np.uint64)

    def __len__(self) -> int:
        return len(self.main) + len(self.recent)

    def contains(self, hashes: np.ndarray) -> np.ndarray:
        return _in_sorted(self.main, hashes) | _in_sorted(self.recent, hashes)

    def add(self, hashes: np.ndarray) -> None:
        self.recent = np.sort(np.concatenate([self.recent, hashes]))
        if len(self.recent) >= self.MERGE_AT:
            # Both runs are sorted: inserting the small one in place beats sorting them together.
            self.main = np.insert(self.main, np.searchsorted(self.main, self.recent), self.recent)
            self.recent = self.recent[:0]


class TradeIds:
    """Hashes of silver's trade_ids by event day, for the days trades arrive for. A day is read
    from silver when a trade of it first comes (so a restart reads today's ids, not the lake's),
    and the day used least recently is let go past `days_held`: memory follows the days in play,
    never the lake's age. Exact for a duplicate at any age (it has its trade's event time, so its
    day); a record that reuses a known id with another event time is found when that id's day is
    held (silver.guard quarantines it as a conflict)."""

    def __init__(self, lake: Lake, days_held: int = DAYS_HELD):
        self.lake = lake
        self.days_held = days_held
        self._days: OrderedDict[int, _SortedRuns] = OrderedDict()
        self.days_read = 0  # how many days were read from silver (a restart, an old day's trade)

    def known(self, hashes: np.ndarray, days: np.ndarray) -> np.ndarray:
        """Per (hash, event day): whether silver may hold its trade_id (a 64-bit hash: check
        before acting), on that day or on any other day held."""
        return self.found_on(hashes, days) != NOT_FOUND

    def found_on(self, hashes: np.ndarray, days: np.ndarray) -> np.ndarray:
        """Per (hash, event day): the day silver may hold its trade_id on (its own first), or
        NOT_FOUND."""
        found = np.full(len(hashes), NOT_FOUND, np.int64)
        for day in np.unique(days).tolist():
            on_day = days == day
            found[on_day] = np.where(self._day(day).contains(hashes[on_day]), np.int64(day), found[on_day])
        for day, held in list(self._days.items()):
            rest = found == NOT_FOUND
            if not rest.any():
                break
            found[rest] = np.where(held.contains(hashes[rest]), np.int64(day), found[rest])
        return found

    def add(self, hashes: np.ndarray, days: np.ndarray) -> None:
        """Silver's new trades (after their commit): their hashes and event days."""
        for day in np.unique(days).tolist():
            self._day(day).add(hashes[days == day])

    @property
    def ids_held(self) -> int:
        return sum(len(runs) for runs in self._days.values())

    def _day(self, day: int) -> _SortedRuns:
        runs = self._days.get(day)
        if runs is not None:
            self._days.move_to_end(day)
            return runs
        start = EPOCH + timedelta(days=day)
        hashes = [trade_id_hashes(ids).to_numpy() for ids in trade_ids_between(self.lake, start, start + timedelta(1))]
        runs = self._days[day] = _SortedRuns(np.concatenate(hashes) if hashes else np.empty(0, np.uint64))
        self.days_read += 1
        while len(self._days) > self.days_held:
            self._days.popitem(last=False)
        return runs


def _in_sorted(values: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    if len(values) == 0:
        return np.zeros(len(hashes), bool)
    at = np.minimum(np.searchsorted(values, hashes), len(values) - 1)
    return values[at] == hashes


def id_keys(trades: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """The index's keys of these trades: (trade_id hashes, event days)."""
    return (trade_id_hashes(trades["trade_id"]).to_numpy(),
            event_days(trades["event_time"]).to_numpy(zero_copy_only=False))


class SilverBefore:
    """Silver before a batch, as the driver's guard asks it (silver.guard.EarlierTrades)."""

    def __init__(self, lake: Lake, trade_ids: TradeIds):
        self.lake = lake
        self.trade_ids = trade_ids

    def first_copies(self, trades: pa.Table) -> pa.Table:
        """Silver's rows of the trades' ids, at any event time: only those the index says silver
        may hold are looked up, on the days it says."""
        found_on = self.trade_ids.found_on(*id_keys(trades))
        known = found_on != NOT_FOUND
        if not known.any():
            return SILVER.schema_of(FIRST_COPY_COLUMNS).empty_table()
        days = found_on[known]
        low, high = EPOCH + timedelta(days=int(days.min())), EPOCH + timedelta(days=int(days.max()) + 1)
        return rows_of_trade_ids(self.lake, SILVER, trades["trade_id"].filter(pa.array(known)), FIRST_COPY_COLUMNS,
                                 between=(low, high))

    def same_trades(self, trades: pa.Table) -> pa.Table:
        return silver_at_event_times_of(self.lake, trades, ["trade_id", "event_time"])
