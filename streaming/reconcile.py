"""Reconciliation: the streaming gold against a batch recompute from silver, and a backfill
that makes chosen windows match silver.

Silver holds every valid trade once, including those too late for the watermark, which the
streaming aggregate left out. So for each window, silver minus gold is exactly the window's
too-late trades (gold/late_trades), and `compare` says whether it is.

The recompute is the streaming logic itself (`gold.trade_summary`) run on a batch of silver,
cut at the Kafka offsets gold has read (from the batch-watermark ledger, read under the gold
lock), and only once the bronze/silver query has committed up to them: the two queries run
at their own pace, and comparing them at different offsets would show differences that are
only timing.

A backfill writes silver's values into gold, only for final windows (window_end <= the gold
query's watermark): Spark has dropped their state, so the stream never rewrites them. Each
backfilled window gets a row in gold/corrections (query_id 'backfill'), and its too-late
trades get `backfilled_at` in gold/late_trades, so later differences are explained by the
trades still outside gold. It is idempotent: a window that already matches silver is skipped,
and a retried backfill writes the same correction key (backfill, the window's revision
before, window_start).
"""

from __future__ import annotations

import functools
import operator
import time
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
from pyspark.sql import SparkSession

from streaming import gold, silver
from streaming.corrections import CORRECTIONS_KEYS, CORRECTIONS_SCHEMA, CORRECTIONS_TABLE
from streaming.delta_sink import checkpoint_query_id, open_table, publish
from streaming.lateness import (
    BATCH_WATERMARKS_TABLE, LATE_TRADES_KEYS, LATE_TRADES_SCHEMA, LATE_TRADES_TABLE, committed_offsets,
)
from streaming.pipeline import BRONZE_SILVER_QUERY, GOLD_QUERY
from streaming.settings import Settings
from streaming.sinks import GOLD_WRITE_LOCK, LATE_TRADES_LOCK

BACKFILL_QUERY_ID = "backfill"
MEASURES = ["buy_amount", "sell_amount", "settlement_amount", "trade_count"]
_UTC = pa.timestamp("us", tz="UTC")
_CENT = 0.005  # amounts are money: closer than half a cent is equal (float sums differ in order)


def _utc(moment) -> pa.Scalar:
    return pa.scalar(pd.Timestamp(moment).to_pydatetime(), _UTC)


def read_before(offsets: dict[tuple[str, int], int]) -> pads.Expression:
    """Rows whose Kafka record lies before `offsets` in its partition (none if it is empty)."""
    return functools.reduce(operator.or_, [
        (pads.field("topic") == topic) & (pads.field("partition") == partition) & (pads.field("offset") < end)
        for (topic, partition), end in offsets.items()])


def compare(streamed: pd.DataFrame, recomputed: pd.DataFrame, too_late: pd.DataFrame,
            watermark: datetime | None) -> pd.DataFrame:
    """Per window: gold ('_gold'), silver ('_silver'), their difference ('diff_'), the too-late
    trades ('late_'), and whether the difference is exactly those trades and the window final."""
    keys = ["window_start", "window_end"]
    merged = streamed[keys + MEASURES].merge(recomputed[keys + MEASURES], on=keys, how="outer",
                                             suffixes=("_gold", "_silver"))
    late = too_late.assign(
        buy=too_late["amount"].where(too_late["side"] == "BUY", 0.0),
        sell=too_late["amount"].where(too_late["side"] == "SELL", 0.0),
    ).groupby("window_start").agg(late_trades=("trade_id", "size"), late_buy=("buy", "sum"), late_sell=("sell", "sum"))
    merged = merged.merge(late.reset_index(), on="window_start", how="left")
    numbers = [c for c in merged.columns if c not in keys]
    merged[numbers] = merged[numbers].astype(float).fillna(0.0)
    for m in MEASURES:
        merged[f"diff_{m}"] = merged[f"{m}_silver"] - merged[f"{m}_gold"]
    close = lambda a, b: np.abs(a - b) < _CENT  # noqa: E731
    merged["matches"] = (close(merged["diff_buy_amount"], 0) & close(merged["diff_sell_amount"], 0)
                         & (merged["diff_trade_count"] == 0))
    merged["explained"] = (close(merged["diff_buy_amount"], merged["late_buy"])
                           & close(merged["diff_sell_amount"], merged["late_sell"])
                           & (merged["diff_trade_count"] == merged["late_trades"]))
    ends = pd.to_datetime(merged["window_end"], utc=True)
    merged["final"] = (ends <= pd.Timestamp(watermark)) if watermark is not None else False
    for c in ("trade_count_gold", "trade_count_silver", "diff_trade_count", "late_trades"):
        merged[c] = merged[c].astype(int)
    return merged.sort_values("window_start").reset_index(drop=True)


def backfill_rows(current: pd.DataFrame, target: pd.DataFrame, watermark: datetime | None,
                  now: datetime) -> tuple[pa.Table, pa.Table]:
    """(corrections, gold rows) that set each `target` window (silver's values) in gold.
    `current`: gold's rows of those windows (absent = a window gold never had)."""
    before = current.set_index("window_start") if not current.empty else pd.DataFrame()
    corrections, rows = [], []
    for row in target.itertuples(index=False):
        old = before.loc[row.window_start] if row.window_start in before.index else None
        prior = {m: (old[m] if old is not None else 0) for m in MEASURES}
        revision = int(old["revision"]) if old is not None else 0
        after = {m: getattr(row, m) for m in MEASURES}
        corrections.append({
            "window_start": row.window_start, "window_end": row.window_end,
            **{f"{m}_before": prior[m] for m in MEASURES}, **{f"{m}_after": after[m] for m in MEASURES},
            "late_trades": int(after["trade_count"] - prior["trade_count"]), "corrected_at": now,
            "watermark": watermark, "batch_id": revision, "query_id": BACKFILL_QUERY_ID,
        })
        rows.append({"window_start": row.window_start, "window_end": row.window_end, **after,
                     "revision": revision + 1, "updated_at": now,
                     "batch_id": int(old["batch_id"]) if old is not None else None})
    return (pa.Table.from_pylist(corrections, schema=CORRECTIONS_SCHEMA),
            pa.Table.from_pylist(rows, schema=gold.GOLD_SCHEMA))


@dataclass
class BackfillReport:
    backfilled: list[str] = field(default_factory=list)
    already_matching: list[str] = field(default_factory=list)
    still_open: list[str] = field(default_factory=list)

    def message(self) -> str:
        hhmm = lambda starts: ", ".join(s[11:16] for s in starts)  # noqa: E731
        parts = []
        if self.backfilled:
            parts.append(f"Backfilled {hhmm(self.backfilled)} from silver (recorded as corrections).")
        if self.already_matching:
            parts.append(f"Already matching silver: {hhmm(self.already_matching)}.")
        if self.still_open:
            parts.append(f"Still open, not backfilled: {hhmm(self.still_open)} "
                         "(the stream may still change them; try again once the watermark has passed).")
        return " ".join(parts) or "Choose the windows to backfill."


class Reconciler:
    """Gold against silver for the dashboard, with Spark for the recompute."""

    def __init__(self, spark: SparkSession, settings: Settings):
        self.spark = spark
        self.settings = settings
        self.gold_checkpoint = settings.checkpoint_dir / GOLD_QUERY
        self.silver_checkpoint = settings.checkpoint_dir / BRONZE_SILVER_QUERY

    def watermark(self) -> datetime | None:
        """The latest watermark of the current gold query (windows ending by then are final)."""
        ledger = open_table(self.settings.table_path(BATCH_WATERMARKS_TABLE))
        if ledger is None or not (self.gold_checkpoint / "metadata").exists():
            return None
        query_id = checkpoint_query_id(self.gold_checkpoint)
        marks = ledger.to_pyarrow_dataset().to_table(filter=pads.field("query_id") == query_id,
                                                     columns=["watermark"])["watermark"]
        latest = pc.max(marks).as_py() if len(marks) else None
        return latest if latest and latest.timestamp() > 0 else None

    def gold_offsets(self) -> dict[tuple[str, int], int]:
        """Per topic partition, the end of what gold has read (call under GOLD_WRITE_LOCK)."""
        ledger = open_table(self.settings.table_path(BATCH_WATERMARKS_TABLE))
        if ledger is None:
            return {}
        ends = ledger.to_pyarrow_dataset().to_table(columns=["topic", "partition", "end_offset"])
        ends = ends.group_by(["topic", "partition"]).aggregate([("end_offset", "max")]).to_pylist()
        return {(e["topic"], e["partition"]): e["end_offset_max"] for e in ends}

    def wait_for_silver(self, offsets: dict[tuple[str, int], int], timeout_s: float = 15.0) -> bool:
        """Wait until bronze/silver has committed at least up to `offsets`."""
        deadline = time.monotonic() + timeout_s
        while True:
            done = committed_offsets(self.silver_checkpoint)
            if all(done.get(tp, 0) >= end for tp, end in offsets.items()):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)

    def recompute(self, start: datetime, end: datetime, offsets: dict[tuple[str, int], int]) -> pd.DataFrame:
        """Windows from silver's trades with event time in [start, end) and Kafka offsets before
        `offsets`, by the streaming logic."""
        table = open_table(self.settings.table_path(silver.SILVER_TABLE))
        trades = None
        if table is not None and offsets:
            trades = table.to_pyarrow_dataset().to_table(
                filter=(pads.field("event_time") >= _utc(start)) & (pads.field("event_time") < _utc(end))
                & read_before(offsets), columns=["trade_id", "side", "amount", "event_time"])
        if trades is None or trades.num_rows == 0:
            return gold.GOLD_SCHEMA.empty_table().to_pandas()[["window_start", "window_end", *MEASURES]]
        summary = gold.trade_summary(self.spark.createDataFrame(trades), self.settings.window, self.settings.watermark)
        return summary.toArrow().to_pandas()

    def _read(self, table_name: str, schema: pa.Schema, start: datetime, end: datetime,
              extra: pads.Expression | None = None) -> pd.DataFrame:
        """The rows of a table keyed by window whose window starts in [start, end)."""
        table = open_table(self.settings.table_path(table_name))
        if table is None:
            return schema.empty_table().to_pandas()
        in_range = (pads.field("window_start") >= _utc(start)) & (pads.field("window_start") < _utc(end))
        return table.to_pyarrow_dataset().to_table(filter=in_range if extra is None else in_range & extra).to_pandas()

    def _compare(self, start: datetime, end: datetime, streamed: pd.DataFrame, offsets: dict,
                 watermark: datetime | None) -> pd.DataFrame:
        """Gold as read (with the offsets it had read then) against silver cut at those offsets."""
        self.wait_for_silver(offsets)
        too_late = self._too_late(start, end, offsets)
        outstanding = too_late[too_late["backfilled_at"].isna()]  # a backfill already put the others in gold
        return compare(streamed, self.recompute(start, end, offsets), outstanding, watermark)

    def _too_late(self, start: datetime, end: datetime, offsets: dict) -> pd.DataFrame:
        if not offsets:
            return LATE_TRADES_SCHEMA.empty_table().to_pandas()
        return self._read(LATE_TRADES_TABLE, LATE_TRADES_SCHEMA, start, end, read_before(offsets))

    def _gold_as_read(self, start: datetime, end: datetime) -> tuple[pd.DataFrame, dict]:
        """Gold's windows and the offsets they include (call under GOLD_WRITE_LOCK)."""
        return self._read(gold.GOLD_TABLE, gold.GOLD_SCHEMA, start, end), self.gold_offsets()

    def reconcile(self, day: date) -> pd.DataFrame:
        """compare() for the windows of one trading day."""
        start = datetime.combine(day, datetime.min.time(), tzinfo=timezone.utc)
        end = start + timedelta(days=1)
        with GOLD_WRITE_LOCK:
            streamed, offsets = self._gold_as_read(start, end)
            watermark = self.watermark()
        return self._compare(start, end, streamed, offsets, watermark)

    def backfill(self, window_starts: list[str]) -> BackfillReport:
        """Make the chosen windows (ISO window starts) match silver. Final windows only."""
        report = BackfillReport()
        if not window_starts:
            return report
        starts = sorted(pd.Timestamp(s).tz_convert("UTC") for s in window_starts)
        first, last = starts[0].to_pydatetime(), (starts[-1] + pd.Timedelta(self.settings.window)).to_pydatetime()
        with GOLD_WRITE_LOCK:
            watermark = self.watermark()
            current, offsets = self._gold_as_read(first, last)
            state = self._compare(first, last, current, offsets, watermark).set_index("window_start")
            chosen = []
            for start in starts:
                iso = start.isoformat()
                if start in state.index and state.loc[start, "matches"]:
                    report.already_matching.append(iso)
                elif start not in state.index or not state.loc[start, "final"]:
                    report.still_open.append(iso)
                else:
                    report.backfilled.append(iso)
                    chosen.append(start)
            if not chosen:
                return report
            target = state.loc[chosen].reset_index()
            target = target.rename(columns={f"{m}_silver": m for m in MEASURES})
            target["trade_count"] = target["trade_count"].astype(int)
            now = datetime.now(timezone.utc)
            corrections, rows = backfill_rows(current, target, watermark, now)
            version = time.time_ns() // 1000  # a backfill is not a stream batch: any new, larger version
            publish(self.settings.table_path(CORRECTIONS_TABLE), corrections, CORRECTIONS_KEYS,
                    f"{CORRECTIONS_TABLE}@{BACKFILL_QUERY_ID}", version, insert_only=True)
            publish(self.settings.table_path(gold.GOLD_TABLE), rows, gold.GOLD_KEYS,
                    f"{gold.GOLD_TABLE}@{BACKFILL_QUERY_ID}", version)
            # The too-late trades now in gold: later differences are explained by the others.
            folded = self._too_late(first, last, offsets)
            folded = folded[folded["window_start"].isin(chosen) & folded["backfilled_at"].isna()]
            with LATE_TRADES_LOCK:
                publish(self.settings.table_path(LATE_TRADES_TABLE),
                        pa.Table.from_pandas(folded.assign(backfilled_at=now), schema=LATE_TRADES_SCHEMA,
                                             preserve_index=False),
                        LATE_TRADES_KEYS, f"{LATE_TRADES_TABLE}@{BACKFILL_QUERY_ID}", version)
        return report
