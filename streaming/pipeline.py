"""Query starters: source -> transformations -> sink, checkpoint and trigger. Kept thin; the
logic lives in silver.py and gold.py, the writing in delta_sink.py."""

from __future__ import annotations

import functools
import logging
import operator
import shutil
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from streaming import bronze, gold, silver
from streaming.corrections import CORRECTIONS_KEYS, CORRECTIONS_SCHEMA, CORRECTIONS_TABLE, find_corrections
from streaming.delta_sink import checkpoint_query_id, ensure_table, open_table, publish, same_values
from streaming.lateness import (
    BATCH_WATERMARKS_KEYS, BATCH_WATERMARKS_SCHEMA, BATCH_WATERMARKS_TABLE, LATE_CANDIDATE_COLUMNS, LATE_TRADES_KEYS,
    LATE_TRADES_SCHEMA, LATE_TRADES_TABLE, batch_ledger, late_trade_rows, read_offset_log, too_late_trades,
)
from streaming.replay import ReplayBaseline, add_baseline, load_baseline, remember_replay
from streaming.kafka_source import SOURCE_NAME, spark_kafka_options
from streaming.settings import LoadSettings, Settings, format_duration

log = logging.getLogger(__name__)

BRONZE_SILVER_QUERY = "bronze_silver"
GOLD_QUERY = "gold_trade_summary"
TABLES = {
    bronze.BRONZE_TABLE: bronze.BRONZE_SCHEMA,
    silver.SILVER_TABLE: silver.SILVER_SCHEMA,
    silver.QUARANTINE_TABLE: silver.QUARANTINE_SCHEMA,
    gold.GOLD_TABLE: gold.GOLD_SCHEMA,
    BATCH_WATERMARKS_TABLE: BATCH_WATERMARKS_SCHEMA,
    CORRECTIONS_TABLE: CORRECTIONS_SCHEMA,
    LATE_TRADES_TABLE: LATE_TRADES_SCHEMA,
}
# Both sinks add to gold/late_trades (whichever sees a trade's record and its batch watermark
# second); concurrent MERGEs into one Delta table would conflict, so they take turns.
_LATE_TRADES_LOCK = threading.Lock()


def read_kafka(spark: SparkSession, settings: Settings) -> DataFrame:
    reader = (
        spark.readStream.format(SOURCE_NAME)
        .option("subscribe", settings.topic)
        # A new query starts at the earliest retained offset, so trades produced while
        # Spark was starting are not missed. A restart resumes from its checkpoint instead.
        .option("startingOffsets", "earliest")
    )
    reader = reader.options(**spark_kafka_options(settings.kafka_client_config()))
    if settings.replay_from is not None:
        reader = reader.option("startingTimestamp", str(int(settings.replay_from.timestamp() * 1000)))
    if settings.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(settings.max_offsets_per_trigger))
    return reader.load()


class BatchSink:
    """A foreachBatch function writing Delta tables idempotently for one checkpoint."""

    def __init__(self, settings: Settings, checkpoint: Path):
        self.settings = settings
        self.checkpoint = checkpoint

    @functools.cached_property
    def query_id(self) -> str:
        return checkpoint_query_id(self.checkpoint)  # the metadata file exists once the query runs

    def publish(self, table: str, rows: pa.Table, keys, batch_id: int, **options) -> bool:
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
        with _LATE_TRADES_LOCK:
            self.publish(LATE_TRADES_TABLE, rows, LATE_TRADES_KEYS, batch_id, insert_only=True)


class MedallionSink(BatchSink):
    """One collected micro-batch -> bronze, silver and quarantine.

    The batch is collected to Arrow once (one Spark job) and split on the driver. Each table
    records the batch id in its own Delta transaction, so after a crash between two of the
    writes, the replayed batch skips the tables that have it and completes the others.
    """

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        rows = batch.toArrow()
        if rows.num_rows == 0:
            return
        self.publish(bronze.BRONZE_TABLE, bronze.bronze_rows(rows), bronze.BRONZE_KEYS, batch_id, insert_only=True)
        # The first copy of a trade wins; the same record read again (a replay after a fix)
        # replaces its own row with the new parse.
        self.publish(silver.SILVER_TABLE, silver.silver_rows(rows), silver.SILVER_KEYS, batch_id,
                     insert_only=True, update_when=same_values(silver.QUARANTINE_KEYS))
        self.publish(silver.QUARANTINE_TABLE, silver.quarantine_rows(rows), silver.QUARANTINE_KEYS, batch_id)
        trades = silver.silver_rows(rows)
        if trades.num_rows:
            ledger = open_table(self.settings.table_path(BATCH_WATERMARKS_TABLE))
            if ledger is not None:
                first = pc.min(trades["offset"]).as_py()
                ranges = ledger.to_pyarrow_dataset().to_table(filter=pads.field("end_offset") > first).to_pandas()
                self.record_late_trades(trades.select(LATE_CANDIDATE_COLUMNS).to_pandas(), ranges, batch_id)


class GoldSink(BatchSink):
    """The updated windows of one micro-batch -> MERGE into gold/trade_summary."""

    def __init__(self, settings: Settings, checkpoint: Path, baseline: ReplayBaseline | None = None):
        super().__init__(settings, checkpoint)
        self.baseline = baseline

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        # Every batch that read records leaves its offset ranges and watermark in the ledger,
        # even when all its trades were too late and it changes no window.
        ledger = batch_ledger(self.checkpoint, self.query_id, batch_id)
        self.publish(BATCH_WATERMARKS_TABLE, ledger, BATCH_WATERMARKS_KEYS, batch_id, insert_only=True)
        if ledger.num_rows:
            self.record_late_trades(self.silver_records_in(ledger), ledger.to_pandas(), batch_id)

        rows = batch.toArrow()
        if rows.num_rows == 0:
            return
        n = rows.num_rows
        now = datetime.now(timezone.utc)
        rows = pa.table({
            **{name: rows[name] for name in ("window_start", "window_end", "buy_amount", "sell_amount",
                                             "settlement_amount", "trade_count")},
            "revision": pa.array([1] * n, pa.int64()),
            "updated_at": pa.array([now] * n, pa.timestamp("us", tz="UTC")),
            "batch_id": pa.array([batch_id] * n, pa.int64()),
        }).cast(gold.GOLD_SCHEMA)
        rows = add_baseline(rows, self.baseline)
        # Corrections first: they need the windows as they stood before this batch.
        current = open_table(self.settings.table_path(gold.GOLD_TABLE))
        corrections = find_corrections(
            current.to_pandas() if current is not None else pd.DataFrame(), rows.to_pandas(),
            self.batch_watermark(batch_id), self.settings.watermark, now, batch_id, self.query_id)
        self.publish(CORRECTIONS_TABLE, corrections, CORRECTIONS_KEYS, batch_id, insert_only=True)
        self.publish(gold.GOLD_TABLE, rows, gold.GOLD_KEYS, batch_id, bump=("revision",))

    def batch_watermark(self, batch_id: int) -> datetime | None:
        """The watermark this batch used (None before the first one is set)."""
        entry = read_offset_log(self.checkpoint, batch_id)
        if entry is None or entry[0] <= 0:
            return None
        return datetime.fromtimestamp(entry[0] / 1000, tz=timezone.utc)

    def silver_records_in(self, ledger: pa.Table) -> pd.DataFrame:
        """The silver trades whose Kafka records lie in the ledger's offset ranges."""
        table = open_table(self.settings.table_path(silver.SILVER_TABLE))
        if table is None:
            return pd.DataFrame(columns=LATE_CANDIDATE_COLUMNS)
        in_ranges = functools.reduce(operator.or_, [
            (pads.field("topic") == topic) & (pads.field("partition") == partition)
            & (pads.field("offset") >= start) & (pads.field("offset") < end)
            for topic, partition, start, end in zip(*(ledger[c].to_pylist() for c in
                                                      ("topic", "partition", "start_offset", "end_offset")))
        ])
        return table.to_pyarrow_dataset().to_table(filter=in_ranges, columns=LATE_CANDIDATE_COLUMNS).to_pandas()


def with_trigger(writer, settings: Settings | LoadSettings):
    """--available-now, else the processing-time trigger (both commands have the two flags)."""
    if settings.available_now:
        return writer.trigger(availableNow=True)
    return writer.trigger(processingTime=format_duration(settings.trigger))


def start_bronze_silver_query(spark: SparkSession, settings: Settings) -> StreamingQuery:
    checkpoint = settings.checkpoint_dir / BRONZE_SILVER_QUERY
    parsed = silver.parse_trades(read_kafka(spark, settings)).withColumn("ingested_at", F.current_timestamp())
    writer = (
        parsed.writeStream.queryName(BRONZE_SILVER_QUERY)
        .outputMode("append")
        .option("checkpointLocation", str(checkpoint))
        .foreachBatch(MedallionSink(settings, checkpoint))
    )
    return with_trigger(writer, settings).start()


def start_gold_query(spark: SparkSession, settings: Settings,
                     baseline: ReplayBaseline | None = None) -> StreamingQuery:
    checkpoint = settings.checkpoint_dir / GOLD_QUERY
    trades = silver.valid_trades(silver.parse_trades(read_kafka(spark, settings)))
    if baseline is not None and baseline.skip_trade_ids:
        # A replay: trades in the baseline, or too late live, are not counted again.
        prior = spark.createDataFrame([(t,) for t in baseline.skip_trade_ids], "trade_id string")
        trades = trades.join(F.broadcast(prior), "trade_id", "left_anti")
    summary = gold.trade_summary(trades, settings.window, settings.watermark)
    writer = (
        summary.writeStream.queryName(GOLD_QUERY)
        .outputMode("update")
        .option("checkpointLocation", str(checkpoint))
        .foreachBatch(GoldSink(settings, checkpoint, baseline))
    )
    return with_trigger(writer, settings).start()


def set_aside_checkpoints(settings: Settings) -> Path | None:
    """For --replay-from: move the old checkpoints aside (never deleted) so queries start fresh."""
    if not settings.checkpoint_dir.exists():
        return None
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    target = settings.data_dir / "checkpoints.replaced" / stamp
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(settings.checkpoint_dir), str(target))
    return target


@dataclass(frozen=True)
class QueryStatus:
    name: str
    active: bool
    error: str | None
    batch_id: int | None
    last_batch_at: str | None
    watermark: str | None
    input_rows_per_second: float | None
    rows_dropped_by_watermark: int


def query_status(query: StreamingQuery) -> QueryStatus:
    progress = query.lastProgress or {}
    exception = query.exception() if not query.isActive else None
    watermark = (progress.get("eventTime") or {}).get("watermark")
    dropped = sum(op.get("numRowsDroppedByWatermark", 0) for op in progress.get("stateOperators", []))
    return QueryStatus(
        name=query.name,
        active=query.isActive,
        error=str(exception) if exception else None,
        batch_id=progress.get("batchId"),
        last_batch_at=progress.get("timestamp"),
        watermark=None if watermark in (None, "1970-01-01T00:00:00.000Z") else watermark,
        input_rows_per_second=progress.get("inputRowsPerSecond"),
        rows_dropped_by_watermark=dropped,
    )


class Pipeline:
    """The streaming queries of a run."""

    def __init__(self, spark: SparkSession, settings: Settings):
        self.spark = spark
        self.settings = settings
        self.queries: list[StreamingQuery] = []

    def start(self) -> None:
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        if self.settings.replay_from is not None:
            moved = set_aside_checkpoints(self.settings)
            remember_replay(self.settings)
            log.info("replaying from Kafka time %s with fresh checkpoints%s", self.settings.replay_from.isoformat(),
                     f" (the old ones are kept in {moved})" if moved else "")
        for table, schema in TABLES.items():
            ensure_table(self.settings.table_path(table), schema)
        # Read before any query writes: silver as it stood before the replay time.
        baseline = load_baseline(self.settings)
        if baseline is not None:
            log.info("replay baseline: %d windows from trades before %s; %d trade ids not to count again",
                     len(baseline.windows), baseline.since.isoformat(), len(baseline.skip_trade_ids))
        self.queries.append(start_bronze_silver_query(self.spark, self.settings))
        self.queries.append(start_gold_query(self.spark, self.settings, baseline))

    def status(self) -> list[QueryStatus]:
        return [query_status(q) for q in self.queries]

    def failed(self) -> list[QueryStatus]:
        return [s for s in self.status() if s.error]

    def wait_until_done(self, poll_s: float = 0.5) -> None:
        """For --available-now: block until every query has finished."""
        while any(q.isActive for q in self.queries):
            time.sleep(poll_s)

    def stop(self, grace_s: float = 10.0) -> None:
        stop_queries(self.queries, grace_s)


def stop_queries(queries: list[StreamingQuery], grace_s: float = 10.0) -> None:
    """Stop each query between micro-batches when possible, so no batch is cancelled halfway
    (a cancelled batch is safe, it is redone on restart, but it fills the log with noise)."""
    logging.getLogger("py4j").setLevel(logging.CRITICAL)  # the cancelled callback's traceback
    deadline = time.monotonic() + grace_s
    for query in queries:
        try:
            while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
                time.sleep(0.05)
            query.stop()
        except Exception as exc:  # a failed query may raise again on stop
            log.warning("stopping %s: %s", query.name, exc)
