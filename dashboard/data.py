"""The dashboard's data: Delta tables read through the lake (never Spark), and the snapshot built from them."""

from __future__ import annotations

import threading
from typing import Iterable

import numpy as np
import pandas as pd
import pyarrow as pa

from dashboard.readers import frame_of
from streaming.config import Settings
from streaming.lake.increments import FileIncrements
from streaming.lake.page_reads import exactly_once_counts, silver_day
from streaming.lake.store import Lake
from streaming.lake.tables import Table
from streaming.medallion import history
from streaming.medallion.gold import MEASURES, window_sums

GOLD_COLUMNS = ["window_start", "window_end", "buy_amount", "sell_amount", "settlement_amount",
                "trade_count", "revision", "updated_at"]
CORRECTION_COLUMNS = ["window_start", "buy_amount_before", "buy_amount_after", "sell_amount_before",
                      "sell_amount_after", "settlement_amount_before", "settlement_amount_after",
                      "trade_count_before", "trade_count_after", "late_trades", "corrected_at", "batch_id"]
LATE_TRADE_COLUMNS = ["trade_id", "event_time", "window_start", "watermark", "late_by_seconds", "side", "amount",
                      "detected_at", "backfilled_at"]
SILVER_DRILL_COLUMNS = ["trade_id", "side", "amount", "event_time", "channel", "symbol"]
FEED_ROWS = 25  # the newest rows on the page; the tables hold them all


class TableReader:
    """A whole (small) table's rows, these columns, as a frame: when the table's version changes,
    only the data files added since are read and the rows of those removed dropped
    (streaming/lake/increments.py). The same frame is handed back until the rows change.
    Shared by every page: a lock lets one request read while the others wait for its answer."""

    def __init__(self, lake: Lake, table: Table, columns: list[str]):
        self.increments: FileIncrements[pa.Table] = FileIncrements(lake, table, columns)
        self.schema = table.schema_of(columns)
        self._lock = threading.Lock()
        self._frame = frame_of((), self.schema)

    def read(self) -> pd.DataFrame:
        with self._lock:
            if self.increments.refresh():
                self._frame = frame_of(self.increments.parts.values(), self.schema)
            return self._frame


def as_of(frame: pd.DataFrame, column: str, until: pd.Timestamp) -> pd.DataFrame:
    """The rows whose `column` is at or before `until` (UTC): what had happened by then."""
    if frame.empty:
        return frame
    return frame[utc_micros(frame[column]) <= np.datetime64(until.tz_convert("UTC").tz_localize(None), "us")]


def trading_days(gold: pd.DataFrame) -> list[str]:
    """The days (YYYY-MM-DD, UTC) that gold has windows for, newest first."""
    if gold.empty:
        return []
    days = np.unique(utc_micros(gold["window_start"]).astype("datetime64[D]"))
    return [str(day) for day in days[::-1]]


def utc_micros(values: pd.Series) -> np.ndarray:
    """Times as naive UTC datetime64[us] (numpy compares them far faster than pandas)."""
    if not isinstance(values.dtype, pd.DatetimeTZDtype):
        values = pd.to_datetime(values, utc=True)
    return values.to_numpy(dtype="datetime64[us]")


def on_day(frame: pd.DataFrame, day: str | None, column: str = "window_start") -> pd.DataFrame:
    """The rows whose `column` falls on `day` (YYYY-MM-DD, UTC), oldest first."""
    if frame.empty or day is None:
        return frame.iloc[0:0] if day is None else frame
    times = utc_micros(frame[column])
    start = np.datetime64(day, "us")
    rows = np.flatnonzero((times >= start) & (times < start + np.timedelta64(1, "D")))
    rows = rows[np.argsort(times[rows], kind="stable")]
    return frame.iloc[rows].reset_index(drop=True)


def read_silver_day(lake: Lake, day: str, channel: str | None, symbol: str | None) -> pd.DataFrame:
    """The valid trades of one day from silver, optionally of one channel and/or symbol."""
    start = pd.Timestamp(day, tz="UTC").to_pydatetime()
    return silver_day(lake, start, SILVER_DRILL_COLUMNS, channel, symbol).to_pandas()


def window_length(gold: pd.DataFrame) -> pd.Timedelta:
    """The pipeline's window, as gold shows it (the default window before any window exists)."""
    if gold.empty:
        return pd.Timedelta(Settings.window)
    row = gold.iloc[0]
    return pd.Timestamp(row["window_end"]) - pd.Timestamp(row["window_start"])


def silver_windows(trades: pd.DataFrame, window: pd.Timedelta) -> pd.DataFrame:
    """Trades -> gold-shaped windows (buy, sell, settlement, count), by gold.window_sums."""
    columns = ["trade_id", "side", "amount", "event_time"]
    sums = window_sums(pa.Table.from_pandas(trades[columns], preserve_index=False), window).to_pandas()
    sums["revision"], sums["updated_at"] = 1, pd.NaT
    return sums


def _iso(value) -> str | None:
    if isinstance(value, pd.Timestamp):  # NaT is not one
        return value.isoformat()
    return None if value is None or pd.isna(value) else pd.Timestamp(value).isoformat()


def _plain(value):
    return None if value is None or (isinstance(value, float) and value != value) else value  # NaN -> None


def json_records(frame: pd.DataFrame, time_columns: tuple[str, ...]) -> list[dict]:
    """Rows as plain JSON values: times as ISO strings, NaN/NaT as None, Python numbers."""
    columns = [[_iso(v) for v in frame[name]] if name in time_columns else [_plain(v) for v in frame[name].tolist()]
               for name in frame.columns]
    return [dict(zip(frame.columns, row)) for row in zip(*columns)]


def first_values(ordered: pa.Table) -> dict[str, dict]:
    """window_start (ISO) -> its MEASURES as the chart first showed the window complete, for the
    windows corrected since (history.first_reported); `ordered`: a day's history in change order."""
    return {pd.Timestamp(row["window_start"]).isoformat(): row for row in history.first_reported(ordered).to_pylist()}


def history_windows(ordered: pa.Table, instant: pd.Timestamp | None = None) -> pd.DataFrame:
    """Gold as it stood at `instant`, gold-shaped (GOLD_COLUMNS), from a day's history in change
    order: each window's last change by then; its revision, the number of its changes by then."""
    known = history.made_by(ordered, instant)
    latest = history.as_of(known, None)
    _, counts = np.unique(known["window_start"].to_numpy(), return_counts=True)  # by window, as `latest`
    frame = latest.select(["window_start", "window_end", *MEASURES, "changed_at"]).to_pandas()
    frame["revision"] = counts.astype("int64")
    return frame.rename(columns={"changed_at": "updated_at"})[GOLD_COLUMNS]


def history_span(ordered: pa.Table) -> list[int] | None:
    """[first, last] change of a day's history in whole epoch seconds (the second each was made
    in); None without any."""
    if ordered.num_rows == 0:
        return None
    micros = ordered["changed_at"].to_numpy().astype("datetime64[us]").astype(np.int64)
    return [int(micros.min() // 1_000_000), int(micros.max() // 1_000_000)]


def window_records(windows: pd.DataFrame, first: dict[str, dict]) -> list[dict]:
    """Gold-shaped rows -> the store's window records, each with its values as first reported
    (`first`, see first_values; the current ones if never corrected)."""
    columns = {
        "window_start": [pd.Timestamp(v).isoformat() for v in windows["window_start"]],
        "window_end": [pd.Timestamp(v).isoformat() for v in windows["window_end"]],
        "buy_amount": windows["buy_amount"].astype(float).tolist(),
        "sell_amount": windows["sell_amount"].astype(float).tolist(),
        "settlement_amount": windows["settlement_amount"].astype(float).tolist(),
        "trade_count": windows["trade_count"].astype("int64").tolist(),
        "revision": windows["revision"].astype("int64").tolist(),
    }
    records = [dict(zip(columns, row)) for row in zip(*columns.values())]
    for record in records:
        before = first.get(record["window_start"])
        for measure in MEASURES:
            value = before[measure] if before is not None else record[measure]
            record[f"{measure}_first"] = int(value) if measure == "trade_count" else float(value)
    return records


def snapshot_from(gold: pd.DataFrame, corrections: pd.DataFrame | None = None,
                  late_trades: pd.DataFrame | None = None, day: str | None = None,
                  drill: pd.DataFrame | None = None, days: list[str] | None = None,
                  late: dict | None = None, first: dict[str, dict] | None = None) -> dict:
    """The JSON-able snapshot kept in the browser's dcc.Store: one trading day's windows (the
    latest unless `day` is given), that day's corrections and too-late trades (newest first),
    its KPIs and counters. `drill`: windows from silver for a channel/symbol, shown instead.
    `days` (trading_days of gold) and `late` (late_data of the shown day) when already known;
    `first`: the day's corrected windows as first reported (first_values of its history)."""
    days = trading_days(gold) if days is None else days
    day = day if day in days else (days[0] if days else None)
    late = late_data(corrections, late_trades, day) if late is None or late["day"] != day else late
    day_windows = on_day(gold, day) if drill is None else drill
    # Corrections describe the streaming totals: a drill-down from silver has no ghost of them.
    records = window_records(day_windows, (first or {}) if drill is None else {})
    return {
        "day": day,
        "days": days,
        "drill_down": drill is not None,
        "kpis": {
            "buy": float(sum(r["buy_amount"] for r in records)),
            "sell": float(sum(r["sell_amount"] for r in records)),
            "settlement": float(sum(r["settlement_amount"] for r in records)),
            "trades": int(sum(r["trade_count"] for r in records)),
            "corrections": late["counters"]["corrections"],
            "too_late": late["counters"]["too_late"],
        },
        "windows": records,
        "last_update": None if gold.empty else _iso(gold["updated_at"].max()),
        "corrections": late["corrections"],
        "late_trades": late["late_trades"],
        "counters": late["counters"],
    }


def late_data(corrections: pd.DataFrame | None, late_trades: pd.DataFrame | None, day: str | None) -> dict:
    """What the snapshot shows of one day's corrections and too-late trades: it changes only
    when those tables do, not with every gold update (the callback keeps it until then)."""
    corrections = on_day(corrections if corrections is not None else pd.DataFrame(columns=CORRECTION_COLUMNS), day)
    late_trades = on_day(late_trades if late_trades is not None else pd.DataFrame(columns=LATE_TRADE_COLUMNS), day)
    newest = corrections.sort_values(["corrected_at", "window_start"], ascending=False).head(FEED_ROWS)
    # A too-late trade that a backfill has since put into gold counts as corrected, not as too late.
    too_late = int(late_trades["backfilled_at"].isna().sum()) if "backfilled_at" in late_trades else len(late_trades)
    latest_late = late_trades.sort_values("detected_at", ascending=False).head(FEED_ROWS)
    return {
        "day": day,
        "corrections": json_records(newest, ("window_start", "corrected_at")),
        "late_trades": json_records(latest_late, ("event_time", "window_start", "watermark", "detected_at",
                                                  "backfilled_at")),
        "counters": {
            "corrections": int(len(corrections)),
            "late_but_counted": int(corrections["late_trades"].sum()) if not corrections.empty else 0,
            "too_late": too_late,
        },
    }


def exactly_once_evidence(lake: Lake, partitions: Iterable[str] = ()) -> dict:
    """What each table holds per Kafka partition (these, e.g. Kafka's, and those read) at one
    point: up to the offsets gold's ledger had recorded at `at` (exactly_once_counts); and
    gold's trade count against silver's on-time trades up to those offsets. Aggregates over the
    key columns only (offsets, ids), read when asked, never per refresh."""
    counts = exactly_once_counts(lake)
    rows = [partition_evidence(tp, counts["counted"].get(tp), counts["bronze"].get(tp), counts["silver"].get(tp, 0),
                               counts["quarantine"].get(tp, 0))
            for tp in sorted(set(partitions) | set(counts["counted"]) | set(counts["bronze"]), key=partition_order)]
    return {"at": counts["at"], "partitions": rows, "gold_trades": counts["gold_trades"],
            "silver_on_time": counts["silver_counted"] - counts["late_counted"],
            "silver_doubled": counts["silver_doubled"]}


def partition_order(tp: str) -> tuple[str, int]:
    topic, partition = tp.rsplit(":", 1)
    return topic, int(partition)


def partition_evidence(tp: str, counted_to: int | None, bronze: dict | None, silver: int, quarantine: int) -> dict:
    """One partition's row, every figure below `counted_to` (the offset read up to): bronze's
    records, those it holds twice (the same offset and Kafka time: never), the offsets Kafka gave
    out again (a broker that lost its tail: new records), silver's trades, quarantine's records,
    the redeliveries silver dropped (the rest) and the offsets below `counted_to` bronze lacks
    (removed by Kafka before they were read or before the first read; transaction markers)."""
    bronze = bronze or {"records": 0, "distinct_records": 0, "offsets": 0}
    return {"partition": tp, "counted_to": counted_to, "bronze": bronze["records"],
            "bronze_doubled": bronze["records"] - bronze["distinct_records"],
            "offsets_reused": bronze["distinct_records"] - bronze["offsets"], "silver": silver,
            "quarantine": quarantine, "redeliveries": bronze["records"] - silver - quarantine,
            "not_in_bronze": (counted_to or 0) - bronze["offsets"]}
