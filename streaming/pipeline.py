"""Query starters: source -> transformations -> sink, checkpoint and trigger. Kept thin; the
logic lives in silver.py and gold.py, the writing in sinks.py and the lake."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from streaming import gold, silver
from streaming.config import LoadSettings, Settings, format_duration
from streaming.kafka.datasource import SOURCE_NAME
from streaming.kafka.options import spark_kafka_options
from streaming.lake.checkpoints import Checkpoints
from streaming.lake.store import Lake
from streaming.replay import ReplayBaseline, load_baseline
from streaming.sinks import GoldSink, MedallionSink
from streaming.spark_session import gold_shuffle_partitions, shuffle_partitions

log = logging.getLogger(__name__)

BRONZE_SILVER_QUERY = "bronze_silver"
GOLD_QUERY = "gold_trade_summary"


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
    # One wave of read tasks: as many as the cores, each reading whole partitions.
    reader = reader.option("maxTasks", str(spark.sparkContext.defaultParallelism))
    return reader.load()


def with_trigger(writer, settings: Settings | LoadSettings, interval: timedelta | None = None):
    """--available-now, else a processing-time trigger: `interval`, or --trigger."""
    if settings.available_now:
        return writer.trigger(availableNow=True)
    return writer.trigger(processingTime=format_duration(interval or settings.trigger))


def start_bronze_silver_query(spark: SparkSession, settings: Settings, lake: Lake) -> StreamingQuery:
    checkpoint = Checkpoints(settings.checkpoint_dir).query(BRONZE_SILVER_QUERY)
    # The sink splits on `reason` and stamps `ingested_at`: a current_timestamp() here would be a new
    # literal in every micro-batch, and Spark would compile the whole parse again each time.
    parsed = silver.parse_trades(read_kafka(spark, settings)).drop("valid")
    writer = (
        parsed.writeStream.queryName(BRONZE_SILVER_QUERY)
        .outputMode("append")
        .option("checkpointLocation", str(checkpoint.path))
        .foreachBatch(MedallionSink(settings, lake, checkpoint))
    )
    return with_trigger(writer, settings, settings.bronze_silver_interval).start()


def start_gold_query(spark: SparkSession, settings: Settings, lake: Lake,
                     baseline: ReplayBaseline | None = None) -> StreamingQuery:
    checkpoint = Checkpoints(settings.checkpoint_dir).query(GOLD_QUERY)
    trades = silver.valid_trades(silver.parse_trades(read_kafka(spark, settings), with_reason=False))
    if baseline is not None and baseline.skip_trade_ids:
        # A replay: trades in the baseline, or too late live, are not counted again.
        prior = spark.createDataFrame([(t,) for t in baseline.skip_trade_ids], "trade_id string")
        trades = trades.join(F.broadcast(prior), "trade_id", "left_anti")
    summary = gold.trade_summary(trades, settings.window, settings.watermark)
    writer = (
        summary.writeStream.queryName(GOLD_QUERY)
        .outputMode("update")
        .option("checkpointLocation", str(checkpoint.path))
        .foreachBatch(GoldSink(settings, lake, checkpoint, baseline))
    )
    with shuffle_partitions(spark, gold_shuffle_partitions(settings.master)):
        return with_trigger(writer, settings).start()


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
    processed_rows_per_second: float | None = None
    batch_duration_ms: int | None = None
    state_rows: int = 0
    # (topic, partition) -> the next offset to process, as "topic:partition" keys for JSON
    processed_offsets: dict[str, int] = field(default_factory=dict)


def processed_offsets(progress: dict) -> dict[str, int]:
    """From a query's progress: the end offset its last batch reached, per topic partition."""
    offsets: dict[str, int] = {}
    for source in progress.get("sources", []):
        end = source.get("endOffset")
        if isinstance(end, str):
            try:
                end = json.loads(end)
            except ValueError:
                continue
        for topic, partitions in (end or {}).items():
            if isinstance(partitions, dict):
                offsets.update({f"{topic}:{p}": int(o) for p, o in partitions.items()})
    return offsets


def query_status(query: StreamingQuery) -> QueryStatus:
    progress = query.lastProgress or {}
    exception = query.exception() if not query.isActive else None
    watermark = (progress.get("eventTime") or {}).get("watermark")
    operators = progress.get("stateOperators", [])
    return QueryStatus(
        name=query.name,
        active=query.isActive,
        error=str(exception) if exception else None,
        batch_id=progress.get("batchId"),
        last_batch_at=progress.get("timestamp"),
        watermark=None if watermark in (None, "1970-01-01T00:00:00.000Z") else watermark,
        input_rows_per_second=progress.get("inputRowsPerSecond"),
        rows_dropped_by_watermark=sum(op.get("numRowsDroppedByWatermark", 0) for op in operators),
        processed_rows_per_second=progress.get("processedRowsPerSecond"),
        batch_duration_ms=(progress.get("durationMs") or {}).get("triggerExecution"),
        state_rows=sum(op.get("numRowsTotal", 0) for op in operators),
        processed_offsets=processed_offsets(progress),
    )


class Pipeline:
    """The streaming queries of a run."""

    def __init__(self, spark: SparkSession, settings: Settings, lake: Lake | None = None):
        self.spark = spark
        self.settings = settings
        self.lake = lake or Lake(settings.data_dir)
        self.checkpoints = Checkpoints(settings.checkpoint_dir)
        self.queries: list[StreamingQuery] = []

    def start(self) -> None:
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        if self.settings.replay_from is not None:
            moved = self.checkpoints.set_aside()
            self.checkpoints.remember_replay(self.settings.replay_from)
            log.info("replaying from Kafka time %s with fresh checkpoints%s", self.settings.replay_from.isoformat(),
                     f" (the old ones are kept in {moved})" if moved else "")
        self.lake.ensure_all()
        # Read before any query writes: silver as it stood before the replay time.
        baseline = load_baseline(self.lake, self.checkpoints.replay_since(), self.settings.window)
        if baseline is not None:
            log.info("replay baseline: %d windows from trades before %s; %d trade ids not to count again",
                     len(baseline.windows), baseline.since.isoformat(), len(baseline.skip_trade_ids))
        self.queries.append(start_bronze_silver_query(self.spark, self.settings, self.lake))
        self.queries.append(start_gold_query(self.spark, self.settings, self.lake, baseline))

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
