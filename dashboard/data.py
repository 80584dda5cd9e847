"""Data access for the dashboard: Delta tables read with deltalake (never through Spark)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

GOLD_COLUMNS = ["window_start", "window_end", "buy_amount", "sell_amount", "settlement_amount",
                "trade_count", "revision", "updated_at"]


class TableReader:
    """Reads one Delta table, re-reading only when its version has changed."""

    def __init__(self, path: Path, columns: list[str]):
        self.path = Path(path)
        self.columns = columns
        self._table: DeltaTable | None = None
        self._version: int | None = None
        self._frame = pd.DataFrame(columns=columns)

    def read(self) -> pd.DataFrame:
        try:
            if self._table is None:
                self._table = DeltaTable(str(self.path))
            else:
                self._table.update_incremental()
        except TableNotFoundError:
            return self._frame  # not written yet: the empty frame
        version = self._table.version()
        if version != self._version:
            self._frame = self._table.to_pandas(columns=self.columns)
            self._version = version
        return self._frame


def trading_day(gold: pd.DataFrame) -> pd.DataFrame:
    """The windows of the latest trading day in `gold`, oldest first."""
    if gold.empty:
        return gold
    starts = pd.to_datetime(gold["window_start"], utc=True)
    day = starts.max().normalize()
    return gold[starts.dt.normalize() == day].sort_values("window_start").reset_index(drop=True)


def snapshot_from(gold: pd.DataFrame) -> dict:
    """The JSON-able snapshot kept in the browser's dcc.Store: the current day's windows."""
    day = trading_day(gold)
    records = []
    for row in day.itertuples(index=False):
        records.append({
            "window_start": pd.Timestamp(row.window_start).isoformat(),
            "window_end": pd.Timestamp(row.window_end).isoformat(),
            "buy_amount": float(row.buy_amount),
            "sell_amount": float(row.sell_amount),
            "settlement_amount": float(row.settlement_amount),
            "trade_count": int(row.trade_count),
            "revision": int(row.revision),
        })
    last_update = None if gold.empty else pd.Timestamp(gold["updated_at"].max()).isoformat()
    return {"windows": records, "last_update": last_update}
