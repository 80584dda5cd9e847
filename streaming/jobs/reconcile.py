"""Reconciliation: the streaming gold against a batch recompute from silver, and a backfill
that makes chosen windows match silver.

Silver holds every valid trade once, including those too late for the watermark, which the
streaming aggregate left out. So for each window, silver minus gold is exactly the window's
too-late trades (gold/late_trades), and `compare` says whether it is.

The recompute is Spark's `gold.trade_summary` on a batch of silver, independent of the Arrow
sums the stream adds to gold, cut at the Kafka offsets gold has counted (from the batch-watermark
ledger, read under gold's locks): a micro-batch writes its ledger rows once silver holds its
trades, so silver may be a batch ahead, never behind.

A backfill writes silver's values into gold, only for final windows (window_end <= the
stream's watermark): any trade of theirs that arrives now is too late, so the stream never
changes them. Each
backfilled window gets a row in gold/corrections (query_id 'backfill'), and its too-late
trades get `backfilled_at` in gold/late_trades, so later differences are explained by the
trades still outside gold. It is idempotent: a window that already matches silver is skipped,
and a retried backfill writes the same correction key (backfill, the window's revision
before, window_start).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from streaming.config import Settings
from streaming.jobs.pipeline import MEDALLION_QUERY
from streaming.jobs.spark_job import SparkJob
from streaming.lake.lookups import idle_closes, latest_watermark_of, ledger_ends, rows_between, rows_written_by
from streaming.lake.spark_delta import SparkLake
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import (
    BATCH_WATERMARKS,
    CORRECTIONS,
    GOLD,
    GOLD_WRITES,
    LATE_TRADES,
    SILVER,
    SUMMARY_HISTORY,
    Table,
    Write,
)
from streaming.medallion import gold
from streaming.medallion.corrections import correction_rows
from streaming.medallion.gold import MEASURES
from streaming.medallion.history import BACKFILL, BACKFILL_WRITER, change_rows
from streaming.medallion.lateness import CLOSER_PREFIX, close_in_force, closes_of

BACKFILL_QUERY_ID = BACKFILL_WRITER
_CENT = 0.005  # amounts are money: closer than half a cent is equal (float sums differ in order)


def compare(streamed: pd.DataFrame, recomputed: pd.DataFrame, too_late: pd.DataFrame,
            watermark: datetime | None) -> pd.DataFrame:
    """Per window: gold ('_gold'), silver ('_silver'), their difference ('diff_'), the too-late
    trades ('late_'), and whether the difference is exactly those trades and the window final."""
    keys = ["window_start", "window_end"]
    merged = streamed[keys + list(MEASURES)].merge(recomputed[keys + list(MEASURES)], on=keys, how="outer",
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
                  now: datetime) -> tuple[pa.Table, pa.Table, pa.Table]:
    """(corrections, history, gold rows) that set each `target` window (silver's values) in gold.
    `current`: gold's rows of those windows (absent = a window gold never had). A correction's
    and a change's batch id is the window's revision before it, so a retried backfill writes the
    same keys."""
    before = current.set_index("window_start") if not current.empty else pd.DataFrame()
    known = [before.loc[start] if start in before.index else None for start in target["window_start"]]
    revisions = [int(old["revision"]) if old is not None else 0 for old in known]
    was, wanted = (pa.Table.from_pandas(frame, preserve_index=False) for frame in (current, target))
    corrections = correction_rows(was, wanted, now, watermark, BACKFILL_QUERY_ID, revisions)
    changes = change_rows(was, wanted, BACKFILL, now, BACKFILL_QUERY_ID, revisions)
    rows = [{"window_start": row.window_start, "window_end": row.window_end, **{m: getattr(row, m) for m in MEASURES},
             "revision": revision + 1, "updated_at": now, "batch_id": int(old["batch_id"]) if old is not None else None}
            for row, old, revision in zip(target.itertuples(index=False), known, revisions)]
    return corrections, changes, pa.Table.from_pylist(rows, schema=GOLD.schema)


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


# Spark keeps the offsets and commits of this many batches in a checkpoint (its default
# spark.sql.streaming.minBatchesToRetain).
KEPT_BATCHES = 100


class Reconciler(SparkJob):
    """Gold against silver for the dashboard, with Spark for the recompute."""

    def __init__(self, spark: SparkSession, settings: Settings, lake: Lake | None = None):
        super().__init__(spark, settings, lake)
        self.spark_lake = SparkLake(self.lake, spark)
        self.checkpoint = self.checkpoints.query(MEDALLION_QUERY)

    def watermark(self) -> datetime | None:
        """The latest watermark of the current query (windows ending by then are final)."""
        if not self.checkpoint.started:
            return None
        # Watermarks only rise: the latest is among the batches Spark still keeps in its
        # checkpoint, so the ledger's older files are not read (a month of them).
        last = self.checkpoint.last_committed_batch()
        latest = latest_watermark_of(self.lake, self.checkpoint.query_id, max(0, (last or 0) - KEPT_BATCHES))
        if latest is None:  # no ledger rows among them (a quiet topic): every batch of the query
            marks = rows_written_by(self.lake, BATCH_WATERMARKS, self.checkpoint.query_id, ["watermark"])["watermark"]
            latest = pc.max(marks).as_py() if len(marks) else None
        # An idle close since the last batch (--close-idle-after) has made windows final too.
        closed = close_in_force(closes_of(idle_closes(self.lake, CLOSER_PREFIX)), self.checkpoint.query_id,
                                (last or 0) + 1, self.checkpoint.committed_offsets())
        latest = max((m for m in (latest, closed) if m is not None), default=None)
        return latest if latest and latest.timestamp() > 0 else None

    def gold_offsets(self) -> dict[tuple[str, int], int]:
        """Per topic partition, the end of what gold has read (call holding gold's locks): the
        query's committed ends, or further where an earlier query (before a replay) read on."""
        return ledger_ends(self.lake, self.checkpoint.committed_offsets())

    def recompute(self, start: datetime, end: datetime, offsets: dict[tuple[str, int], int]) -> pd.DataFrame:
        """Windows from silver's trades with event time in [start, end) and Kafka offsets before
        `offsets`, by the streaming logic."""
        trades = (self.spark_lake.frame_between(SILVER, "event_time", start, end, before=offsets)
                  .select("trade_id", "side", "amount", "event_time"))
        summary = gold.trade_summary(trades, self.settings.window).toArrow()
        if summary.num_rows == 0:
            return gold.WINDOW_SUMS_SCHEMA.empty_table().to_pandas()
        return summary.to_pandas()

    def _read(self, table: Table, start: datetime, end: datetime,
              before: dict[tuple[str, int], int] | None = None) -> pd.DataFrame:
        """The rows of a table keyed by window whose window starts in [start, end) (and whose
        Kafka record lies before `before`'s offsets)."""
        return rows_between(self.lake, table, "window_start", start, end, high_inclusive=False,
                            before=before).to_pandas()

    def _compare(self, start: datetime, end: datetime, streamed: pd.DataFrame, offsets: dict,
                 watermark: datetime | None) -> pd.DataFrame:
        """Gold as read (with the offsets it had read then) against silver cut at those offsets."""
        too_late = self._too_late(start, end, offsets)
        outstanding = too_late[too_late["backfilled_at"].isna()]  # a backfill already put the others in gold
        return compare(streamed, self.recompute(start, end, offsets), outstanding, watermark)

    def _too_late(self, start: datetime, end: datetime, offsets: dict) -> pd.DataFrame:
        if not offsets:
            return LATE_TRADES.schema.empty_table().to_pandas()
        return self._read(LATE_TRADES, start, end, before=offsets)

    def _gold_as_read(self, start: datetime, end: datetime) -> tuple[pd.DataFrame, dict]:
        """Gold's windows and the offsets they include (call holding gold's locks)."""
        return self._read(GOLD, start, end), self.gold_offsets()

    def reconcile(self, day: date) -> pd.DataFrame:
        """compare() for the windows of one trading day."""
        start = datetime.combine(day, datetime.min.time(), tzinfo=timezone.utc)
        end = start + timedelta(days=1)
        with self.lake.writing(*GOLD_WRITES):
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
        with self.lake.writing(*GOLD_WRITES):
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
            corrections, changes, rows = backfill_rows(current, target, watermark, now)
            # A backfill is not a stream batch: any new, larger version.
            batch = Batch(BACKFILL_QUERY_ID, time.time_ns() // 1000)
            # Spark-side work, so delta-spark MERGEs, recording the batch as the stream's writes do.
            self.spark_lake.publish(CORRECTIONS, self.spark.createDataFrame(corrections), batch)
            self.spark_lake.publish(SUMMARY_HISTORY, self.spark.createDataFrame(changes), batch)
            self.spark_lake.publish(GOLD, self.spark.createDataFrame(rows), batch)
            # The too-late trades now in gold: later differences are explained by the others.
            folded = self._too_late(first, last, offsets)
            folded = folded[folded["window_start"].isin(chosen) & folded["backfilled_at"].isna()]
            if not folded.empty:
                folded = pa.Table.from_pandas(folded.assign(backfilled_at=now), schema=LATE_TRADES.schema,
                                              preserve_index=False)
                self.spark_lake.publish(LATE_TRADES, self.spark.createDataFrame(folded), batch, write=Write.UPSERT)
        return report
