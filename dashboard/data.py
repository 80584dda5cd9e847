"""Data access for the dashboard: Delta tables read with deltalake (never through Spark)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

GOLD_COLUMNS = ["window_start", "window_end", "buy_amount", "sell_amount", "settlement_amount",
                "trade_count", "revision", "updated_at"]
CORRECTION_COLUMNS = ["window_start", "buy_amount_before", "buy_amount_after", "sell_amount_before",
                      "sell_amount_after", "settlement_amount_before", "settlement_amount_after",
                      "trade_count_before", "trade_count_after", "late_trades", "corrected_at", "batch_id"]
LATE_TRADE_COLUMNS = ["trade_id", "event_time", "window_start", "watermark", "late_by_seconds", "side", "amount",
                      "detected_at", "backfilled_at"]
FEED_ROWS = 50


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


def _iso(value) -> str | None:
    return None if value is None or pd.isna(value) else pd.Timestamp(value).isoformat()


def json_records(frame: pd.DataFrame, time_columns: tuple[str, ...]) -> list[dict]:
    """Rows as plain JSON values: times as ISO strings, numpy scalars as Python numbers."""
    return [{k: _iso(v) if k in time_columns else v.item() if hasattr(v, "item") else v for k, v in row.items()}
            for row in frame.to_dict("records")]


MEASURES = ("buy_amount", "sell_amount", "settlement_amount", "trade_count")


def first_reported(corrections: pd.DataFrame) -> dict[pd.Timestamp, pd.Series]:
    """window_start -> its earliest correction: the '_before' values are what the chart first
    showed as the complete window."""
    if corrections.empty:
        return {}
    earliest = corrections.sort_values(["corrected_at", "batch_id"]).drop_duplicates("window_start")
    return {pd.Timestamp(row["window_start"]): row for _, row in earliest.iterrows()}


def snapshot_from(gold: pd.DataFrame, corrections: pd.DataFrame | None = None,
                  late_trades: pd.DataFrame | None = None) -> dict:
    """The JSON-able snapshot kept in the browser's dcc.Store: the current day's windows, the
    corrections and too-late trades (newest first) and their counters."""
    day = trading_day(gold)
    corrections = corrections if corrections is not None else pd.DataFrame(columns=CORRECTION_COLUMNS)
    first = first_reported(corrections)
    records = []
    for row in day.itertuples(index=False):
        record = {
            "window_start": pd.Timestamp(row.window_start).isoformat(),
            "window_end": pd.Timestamp(row.window_end).isoformat(),
            "buy_amount": float(row.buy_amount),
            "sell_amount": float(row.sell_amount),
            "settlement_amount": float(row.settlement_amount),
            "trade_count": int(row.trade_count),
            "revision": int(row.revision),
        }
        before = first.get(pd.Timestamp(row.window_start))
        for measure in MEASURES:
            value = before[f"{measure}_before"] if before is not None else record[measure]
            record[f"{measure}_first"] = int(value) if measure == "trade_count" else float(value)
        records.append(record)
    late_trades = late_trades if late_trades is not None else pd.DataFrame(columns=LATE_TRADE_COLUMNS)
    newest = corrections.sort_values(["corrected_at", "window_start"], ascending=False).head(FEED_ROWS)
    latest_late = late_trades.sort_values("detected_at", ascending=False).head(FEED_ROWS)
    return {
        "windows": records,
        "last_update": None if gold.empty else _iso(gold["updated_at"].max()),
        "corrections": json_records(newest, ("window_start", "corrected_at")),
        "late_trades": json_records(latest_late, ("event_time", "window_start", "watermark", "detected_at", "backfilled_at")),
        "counters": {
            "corrections": int(len(corrections)),
            "late_but_counted": int(corrections["late_trades"].sum()) if not corrections.empty else 0,
            "too_late": int(len(late_trades)),
        },
    }
