"""The foreachBatch sinks: each micro-batch -> Delta tables, through delta_sink.publish.

MedallionSink writes bronze, silver and quarantine; GoldSink writes the trade summary, its
corrections and the batch-watermark ledger. Both add to gold/late_trades (see lateness.py).
"""

from __future__ import annotations

import functools
import threading
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from streaming import bronze, gold, silver
from streaming.corrections import CORRECTIONS_KEYS, CORRECTIONS_TABLE, find_corrections
from streaming.delta_sink import checkpoint_query_id, open_table, publish, query, quote, same_values, sql_literal
from streaming.lateness import (
    BATCH_WATERMARKS_KEYS, BATCH_WATERMARKS_TABLE, LATE_CANDIDATE_COLUMNS, LATE_TRADES_KEYS, LATE_TRADES_TABLE,
    batch_ledger, late_trade_rows, read_offset_log, too_late_trades,
)
from streaming.replay import ReplayBaseline, add_baseline
from streaming.settings import Settings

# Both sinks add to gold/late_trades (whichever sees a trade's record and its batch watermark
# second); concurrent MERGEs into one Delta table would conflict, so they take turns.
LATE_TRADES_LOCK = threading.Lock()
# The gold sink and a backfill (reconcile.py) both read gold, then write corrections and gold.
GOLD_WRITE_LOCK = threading.Lock()
# Tables that gain a small file in most micro-batches and are read whole (by the dashboard, the
# sinks): their writer compacts them every so many versions. Bronze and silver are read by range.
READ_WHOLE_TABLES = frozenset({gold.GOLD_TABLE, CORRECTIONS_TABLE, BATCH_WATERMARKS_TABLE, LATE_TRADES_TABLE,
                               silver.QUARANTINE_TABLE})
COMPACT_EVERY = 20


def use_pool(batch: DataFrame, pool: str) -> None:
    """Run this thread's Spark jobs (the micro-batch itself) in a FAIR scheduler pool."""
    batch.sparkSession.sparkContext.setLocalProperty("spark.scheduler.pool", pool)


class BatchSink:
    """A foreachBatch function writing Delta tables idempotently for one checkpoint."""

    def __init__(self, settings: Settings, checkpoint: Path):
        self.settings = settings
        self.checkpoint = checkpoint

    @functools.cached_property
    def query_id(self) -> str:
        return checkpoint_query_id(self.checkpoint)  # the metadata file exists once the query runs

    def publish(self, table: str, rows: pa.Table, keys, batch_id: int, **options) -> bool:
        if table in READ_WHOLE_TABLES:
            options.setdefault("compact_every", COMPACT_EVERY)
        return publish(self.settings.table_path(table), rows, keys, f"{table}@{self.query_id}", batch_id, **options)

    def record_late_trades(self, candidates: pd.DataFrame, ledger: pd.DataFrame, batch_id: int) -> None:
        """Add the candidates that were too late for their gold batch to gold/late_trades.

        Each sink writes its own table first and then reads the other's (silver, or the
        watermark ledger), so whichever runs second sees both and no late trade is missed.
        """
        late = too_late_trades(candidates, ledger)
        if late.empty:
            return
        rows = late_trade_rows(late, self.settings.window, datetime.now(timezone.utc))
        with LATE_TRADES_LOCK:
            self.publish(LATE_TRADES_TABLE, rows, LATE_TRADES_KEYS, batch_id, insert_only=True)

    def silver_records_in(self, ranges: pa.Table, up_to: datetime) -> pd.DataFrame:
        """The silver trades whose Kafka records lie in these offset ranges (topic, partition,
        start_offset, end_offset) and whose event time is at or before `up_to`: the only ones
        a watermark up to then can have left out."""
        table = open_table(self.settings.table_path(silver.SILVER_TABLE))
        if table is None or ranges.num_rows == 0:
            return pd.DataFrame(columns=LATE_CANDIDATE_COLUMNS)
        columns = ", ".join(quote(c) for c in LATE_CANDIDATE_COLUMNS)
        return query(table, f"SELECT {columns} FROM t WHERE ({in_offset_ranges(ranges)}) "
                            f"AND {quote('event_time')} <= {sql_literal(up_to)}").to_pandas()

    def silver_has_records_in(self, ranges: pa.Table) -> bool:
        """Whether silver already holds a trade from these offset ranges: the records are being
        read again (a replay, or a fresh checkpoint over the same offsets)."""
        table = open_table(self.settings.table_path(silver.SILVER_TABLE))
        if table is None or ranges.num_rows == 0:
            return False
        return query(table, f"SELECT {quote('offset')} FROM t WHERE {in_offset_ranges(ranges)} LIMIT 1").num_rows > 0


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
        ingested_at = pa.scalar(datetime.now(timezone.utc), bronze.UTC_TIME)
        rows = rows.append_column("ingested_at", pa.repeat(ingested_at, rows.num_rows))
        trades = silver.silver_rows(rows)
        self.publish(bronze.BRONZE_TABLE, bronze.bronze_rows(rows), bronze.BRONZE_KEYS, batch_id, insert_only=True)
        # The first copy of a trade wins; the same record read again (a replay after a fix)
        # replaces its own row with the new parse. A redelivered copy has its first copy's
        # event time too, so the MERGE looks for it only among the batch's event times instead
        # of reading all of silver; records read again may have a new event time (the fix), so
        # they get the MERGE over the whole table.
        read_again = trades.num_rows > 0 and self.silver_has_records_in(offset_ranges(trades))
        self.publish(silver.SILVER_TABLE, trades, silver.SILVER_KEYS, batch_id,
                     insert_only=True, update_when=same_values(silver.QUARANTINE_KEYS),
                     match_also=() if read_again else ("event_time",))
        self.publish(silver.QUARANTINE_TABLE, silver.quarantine_rows(rows), silver.QUARANTINE_KEYS, batch_id)
        if trades.num_rows:
            self.find_late_trades(trades, batch_id)

    def find_late_trades(self, trades: pa.Table, batch_id: int) -> None:
        """Those of the batch's trades that a gold batch which already read them left out."""
        ledger = open_table(self.settings.table_path(BATCH_WATERMARKS_TABLE))
        if ledger is None:
            return
        first = pc.min(trades["offset"]).as_py()
        ranges = query(ledger, f"SELECT * FROM t WHERE {quote('end_offset')} > {int(first)}")
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

    def __init__(self, settings: Settings, checkpoint: Path, baseline: ReplayBaseline | None = None):
        super().__init__(settings, checkpoint)
        self.baseline = baseline

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        use_pool(batch, "gold")
        now = datetime.now(timezone.utc)
        updated = self.summary_rows(batch.toArrow(), batch_id, now)
        # All writes under one lock, so that a reader holding it (reconcile.py) finds the ledger
        # and gold at the same batch. Gold first: it is what the chart waits for.
        with GOLD_WRITE_LOCK:
            if updated.num_rows:
                # Corrections before gold: they need the windows as they stood before this batch.
                current = open_table(self.settings.table_path(gold.GOLD_TABLE))
                corrections = find_corrections(
                    current.to_pandas() if current is not None else pd.DataFrame(), updated.to_pandas(),
                    self.batch_watermark(batch_id), self.settings.watermark, now, batch_id, self.query_id)
                self.publish(CORRECTIONS_TABLE, corrections, CORRECTIONS_KEYS, batch_id, insert_only=True,
                             batch_keyed=True)
                self.publish(gold.GOLD_TABLE, updated, gold.GOLD_KEYS, batch_id, bump=("revision",))
            # Every batch that read records leaves its offset ranges and watermark in the ledger,
            # even when all its trades were too late and it changes no window.
            ledger = batch_ledger(self.checkpoint, self.query_id, batch_id)
            self.publish(BATCH_WATERMARKS_TABLE, ledger, BATCH_WATERMARKS_KEYS, batch_id, insert_only=True,
                         batch_keyed=True)
            watermark = pc.max(ledger["watermark"]).as_py() if ledger.num_rows else None
            if watermark is not None and watermark.timestamp() > 0:
                late_candidates = self.silver_records_in(ledger, watermark)
                if not late_candidates.empty:
                    self.record_late_trades(late_candidates, ledger.to_pandas(), batch_id)

    def summary_rows(self, rows: pa.Table, batch_id: int, now: datetime) -> pa.Table:
        """The batch's updated windows as gold rows (plus a replay's baseline)."""
        if rows.num_rows == 0:
            return gold.GOLD_SCHEMA.empty_table()
        n = rows.num_rows
        rows = pa.table({
            **{name: rows[name] for name in ("window_start", "window_end", "buy_amount", "sell_amount",
                                             "settlement_amount", "trade_count")},
            "revision": pa.array([1] * n, pa.int64()),
            "updated_at": pa.array([now] * n, pa.timestamp("us", tz="UTC")),
            "batch_id": pa.array([batch_id] * n, pa.int64()),
        }).cast(gold.GOLD_SCHEMA)
        return add_baseline(rows, self.baseline)

    def batch_watermark(self, batch_id: int) -> datetime | None:
        """The watermark this batch used (None before the first one is set)."""
        entry = read_offset_log(self.checkpoint, batch_id)
        if entry is None or entry[0] <= 0:
            return None
        return datetime.fromtimestamp(entry[0] / 1000, tz=timezone.utc)

