"""The foreachBatch sinks: each micro-batch -> Delta tables, through the lake.

MedallionSink writes bronze, silver and quarantine; GoldSink writes the trade summary, its
corrections and the batch-watermark ledger. Both add to gold/late_trades (see lateness.py).
"""

from __future__ import annotations

import functools
from datetime import datetime, timezone

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from streaming import bronze, silver
from streaming.config import Settings
from streaming.corrections import find_corrections
from streaming.lake.checkpoints import QueryCheckpoint
from streaming.lake.store import Batch, Lake, quote, sql_literal
from streaming.lake.tables import BATCH_WATERMARKS, CORRECTIONS, GOLD, LATE_TRADES, QUARANTINE, SILVER, UTC_TIME
from streaming.lateness import LATE_CANDIDATE_COLUMNS, late_trade_rows, ledger_rows, too_late_trades
from streaming.replay import ReplayBaseline, add_baseline

# The tables the gold sink writes as one step: a reader holding their locks (a backfill) sees
# them all at the same batch.
GOLD_WRITES = (GOLD, CORRECTIONS, BATCH_WATERMARKS)


def use_pool(batch: DataFrame, pool: str) -> None:
    """Run this thread's Spark jobs (the micro-batch itself) in a FAIR scheduler pool."""
    batch.sparkSession.sparkContext.setLocalProperty("spark.scheduler.pool", pool)


def in_offset_ranges(ranges: pa.Table) -> str:
    """SQL: records in any of these (topic, partition, start_offset, end_offset) ranges."""
    return " OR ".join(
        f"({quote('topic')} = {sql_literal(topic)} AND {quote('partition')} = {int(partition)} "
        f"AND {quote('offset')} >= {int(start)} AND {quote('offset')} < {int(end)})"
        for topic, partition, start, end in zip(*(ranges[c].to_pylist() for c in
                                                  ("topic", "partition", "start_offset", "end_offset"))))


def offset_ranges(records: pa.Table) -> pa.Table:
    """Per topic partition, [first offset, last offset + 1) of these records."""
    spans = records.group_by(["topic", "partition"], use_threads=False).aggregate(
        [("offset", "min"), ("offset", "max")])
    return pa.table({"topic": spans["topic"], "partition": spans["partition"], "start_offset": spans["offset_min"],
                     "end_offset": pc.add(spans["offset_max"], 1)})


class BatchSink:
    """A foreachBatch function writing Delta tables idempotently for one checkpoint."""

    def __init__(self, settings: Settings, lake: Lake, checkpoint: QueryCheckpoint):
        self.settings = settings
        self.lake = lake
        self.checkpoint = checkpoint

    @functools.cached_property
    def query_id(self) -> str:
        return self.checkpoint.query_id

    def batch(self, batch_id: int) -> Batch:
        return Batch(self.query_id, batch_id)

    def record_late_trades(self, candidates: pd.DataFrame, ledger: pd.DataFrame, batch_id: int) -> None:
        """Add the candidates that were too late for their gold batch to gold/late_trades.

        Each sink writes its own table first and then reads the other's (silver, or the
        watermark ledger), so whichever runs second sees both and no late trade is missed.
        """
        late = too_late_trades(candidates, ledger)
        if not late.empty:
            rows = late_trade_rows(late, self.settings.window, datetime.now(timezone.utc))
            self.lake.publish(LATE_TRADES, rows, self.batch(batch_id))

    def silver_records_in(self, ranges: pa.Table, up_to: datetime) -> pd.DataFrame:
        """The silver trades whose Kafka records lie in these offset ranges (topic, partition,
        start_offset, end_offset) and whose event time is at or before `up_to`: the only ones
        a watermark up to then can have left out."""
        if ranges.num_rows == 0:
            return pd.DataFrame(columns=LATE_CANDIDATE_COLUMNS)
        return self.lake.read(SILVER, LATE_CANDIDATE_COLUMNS, f"({in_offset_ranges(ranges)}) "
                                                              f"AND {quote('event_time')} <= {sql_literal(up_to)}"
                              ).to_pandas()

    def silver_has_records_in(self, ranges: pa.Table) -> bool:
        """Whether silver already holds a trade from these offset ranges: the records are being
        read again (a replay, or a fresh checkpoint over the same offsets)."""
        if ranges.num_rows == 0:
            return False
        found = self.lake.query(SILVER, f"SELECT {quote('offset')} FROM t WHERE {in_offset_ranges(ranges)} LIMIT 1")
        return found is not None and found.num_rows > 0


class MedallionSink(BatchSink):
    """One collected micro-batch -> bronze, silver and quarantine.

    The batch is collected to Arrow once (one Spark job) and split on the driver. Each table
    records the batch id in its own Delta transaction, so after a crash between two of the
    writes, the replayed batch skips the tables that have it and completes the others.
    """

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        use_pool(batch, "medallion")
        rows = batch.toArrow()
        if rows.num_rows == 0:
            return
        ingested_at = pa.scalar(datetime.now(timezone.utc), UTC_TIME)
        rows = rows.append_column("ingested_at", pa.repeat(ingested_at, rows.num_rows))
        trades = silver.silver_rows(rows)
        this = self.batch(batch_id)
        self.lake.publish(bronze.BRONZE, bronze.bronze_rows(rows), this)
        # Records read again may have a new event time (a parser fixed since): they are matched
        # on trade_id over all of silver, not only among the batch's event times.
        read_again = trades.num_rows > 0 and self.silver_has_records_in(offset_ranges(trades))
        self.lake.publish(SILVER, trades, this, narrow=not read_again)
        self.lake.publish(QUARANTINE, silver.quarantine_rows(rows), this)
        if trades.num_rows:
            self.find_late_trades(trades, batch_id)

    def find_late_trades(self, trades: pa.Table, batch_id: int) -> None:
        """Those of the batch's trades that a gold batch which already read them left out."""
        first = pc.min(trades["offset"]).as_py()
        ranges = self.lake.read(BATCH_WATERMARKS, where=f"{quote('end_offset')} > {int(first)}")
        latest = pc.max(ranges["watermark"]).as_py() if ranges.num_rows else None
        if latest is None:
            return
        # Only a trade at or before some batch's watermark can have been too late.
        candidates = trades.filter(pc.less_equal(trades["event_time"], pa.scalar(latest, trades["event_time"].type)))
        if candidates.num_rows:
            # Only the copies silver kept: a redelivered copy of a counted trade, arriving
            # after the watermark, was not too late; its first copy was counted.
            kept = self.silver_records_in(offset_ranges(candidates), latest)
            self.record_late_trades(kept, ranges.to_pandas(), batch_id)


class GoldSink(BatchSink):
    """The updated windows of one micro-batch -> MERGE into gold/trade_summary."""

    def __init__(self, settings: Settings, lake: Lake, checkpoint: QueryCheckpoint,
                 baseline: ReplayBaseline | None = None):
        super().__init__(settings, lake, checkpoint)
        self.baseline = baseline

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        use_pool(batch, "gold")
        now = datetime.now(timezone.utc)
        updated = self.summary_rows(batch.toArrow(), batch_id, now)
        this = self.batch(batch_id)
        # All writes as one step, so that a reader holding these locks (reconcile.py) finds the
        # ledger and gold at the same batch. Gold first: it is what the chart waits for.
        with self.lake.writing(*GOLD_WRITES):
            if updated.num_rows:
                # Corrections before gold: they need the windows as they stood before this batch.
                corrections = find_corrections(
                    self.lake.read(GOLD).to_pandas(), updated.to_pandas(),
                    self.checkpoint.batch_watermark(batch_id), self.settings.watermark, now, batch_id, self.query_id)
                self.lake.publish(CORRECTIONS, corrections, this)
                self.lake.publish(GOLD, updated, this)
            # Every batch that read records leaves its offset ranges and watermark in the ledger,
            # even when all its trades were too late and it changes no window.
            ledger = ledger_rows(self.query_id, batch_id, self.checkpoint.offset_log(batch_id),
                                 self.checkpoint.offset_log(batch_id - 1))
            self.lake.publish(BATCH_WATERMARKS, ledger, this)
            watermark = pc.max(ledger["watermark"]).as_py() if ledger.num_rows else None
            if watermark is not None and watermark.timestamp() > 0:
                late_candidates = self.silver_records_in(ledger, watermark)
                if not late_candidates.empty:
                    self.record_late_trades(late_candidates, ledger.to_pandas(), batch_id)

    def summary_rows(self, rows: pa.Table, batch_id: int, now: datetime) -> pa.Table:
        """The batch's updated windows as gold rows (plus a replay's baseline)."""
        if rows.num_rows == 0:
            return GOLD.schema.empty_table()
        n = rows.num_rows
        rows = pa.table({
            **{name: rows[name] for name in ("window_start", "window_end", "buy_amount", "sell_amount",
                                             "settlement_amount", "trade_count")},
            "revision": pa.array([1] * n, pa.int64()),
            "updated_at": pa.array([now] * n, UTC_TIME),
            "batch_id": pa.array([batch_id] * n, pa.int64()),
        }).cast(GOLD.schema)
        return add_baseline(rows, self.baseline)
