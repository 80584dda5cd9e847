"""The query starter: source -> transformations -> sink, checkpoint and trigger. Kept thin; the
rules live in medallion/ (silver/, gold.py, lateness.py), the writing in sink/ and the lake."""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from streaming.config import LoadSettings, Settings, format_duration, status_time
from streaming.jobs.bronze_replay import ReplayPlan, plan_replay, replay_from_bronze, said_where_from
from streaming.jobs.spark_job import SparkJob
from streaming.kafka.options import explain_kafka_failure, source_options
from streaming.lake import upkeep
from streaming.lake.partitions import finish_rolls
from streaming.lake.store import Lake
from streaming.lake.tables import SUMMARY_HISTORY
from streaming.sink.gold_step import carry_over_history
from streaming.sink.medallion_sink import MedallionSink
from streaming.sink.task_writes import MAX_RECORDS_PER_SHARE, nothing

log = logging.getLogger(__name__)

MEDALLION_QUERY = "medallion"  # reads Kafka and writes every table


def kafka_source_options(spark: SparkSession, settings: Settings,
                         starting_offsets: dict[tuple[str, int], int] | None = None) -> dict[str, str]:
    """Spark's format("kafka") options for the trades topic. A new query starts at the earliest
    retained offset, so trades produced while Spark was starting are not missed, or at a
    --replay-from time, or where a replay's part from bronze ends; a restart resumes from its
    checkpoint instead."""
    return source_options(
        settings.kafka_client_config(), settings.topic,
        fail_on_data_loss=settings.fail_on_data_loss, ride_out=settings.kafka_retry_timeout,
        starting_timestamp_ms=None if settings.replay_from is None else int(settings.replay_from.timestamp() * 1000),
        starting_offsets=starting_offsets,
        max_offsets_per_trigger=settings.max_offsets_per_trigger,
        # Spark cuts each partition's range of a catch-up batch into one share per core, so the
        # shares fill whole waves (3 partitions on 2 cores would leave one running alone); a live
        # batch is one share (task_writes.ONE_SHARE_UP_TO).
        min_partitions=spark.sparkContext.defaultParallelism * settings.topic_partitions,
        max_records_per_partition=MAX_RECORDS_PER_SHARE)


def read_kafka(spark: SparkSession, settings: Settings,
               starting_offsets: dict[tuple[str, int], int] | None = None) -> DataFrame:
    return spark.readStream.format("kafka").options(**kafka_source_options(spark, settings, starting_offsets)).load()


def with_trigger(writer, settings: Settings | LoadSettings):
    """--available-now, else a processing-time trigger of --trigger."""
    if settings.available_now:
        return writer.trigger(availableNow=True)
    return writer.trigger(processingTime=format_duration(settings.trigger))


def start_medallion_query(spark: SparkSession, settings: Settings, sink: MedallionSink,
                          starting_offsets: dict[tuple[str, int], int] | None = None) -> StreamingQuery:
    """The one query: Kafka is read and parsed once, and each micro-batch feeds every table. The
    source plans each batch's offset ranges (kept in the checkpoint); the sink's tasks parse and
    write what it reads."""
    writer = (
        read_kafka(spark, settings, starting_offsets).writeStream.queryName(MEDALLION_QUERY)
        .outputMode("append")
        .option("checkpointLocation", sink.checkpoint.location)
        .foreachBatch(sink)
    )
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
    restarts: int = 0  # times restarted from its checkpoint after a failure
    last_restart_error: str | None = None  # the short cause of the last failure it was restarted after
    data_loss: str | None = None  # the last time Kafka no longer held offsets it had read (failOnDataLoss=false)
    records_lost: int = 0  # records Kafka removed before they were read, as the ledger counts them
    last_trade_at: str | None = None  # when the last batch with new trades ended (at first: the query's start)
    # While no trade has come since an idle close: {"windows_up_to": its watermark, "quiet_s": the
    # quiet it followed} (health.quiet_close_line says it)
    closed_when_quiet: dict | None = None


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


def ran_a_batch(progress: dict) -> bool:
    """Whether a progress report is of a batch that ran. With no new data Spark still reports every
    10 s (noDataProgressEventInterval), with the last batch's id and no addBatch."""
    return "addBatch" in (progress.get("durationMs") or {})


def with_records_read(progress: dict, read_by: Callable[[int], tuple[int, float | None] | None] | None) -> dict:
    """Spark counts a batch's input rows in the plan it ran: a live batch whose records the sink
    fetched itself ran none, so its report gets the sink's count and Spark's two rates from it.
    read_by: the sink's (batch id -> records read, seconds since the batch before started)."""
    if progress.get("numInputRows") or not ran_a_batch(progress) or read_by is None:
        return progress
    read = read_by(progress.get("batchId", -1))
    if read is None or read[0] == 0:
        return progress
    records, since_previous_s = read
    took_s = progress["durationMs"].get("triggerExecution", 0) / 1000
    input_rate = records / since_previous_s if since_previous_s else progress.get("inputRowsPerSecond")
    processed_rate = records / took_s if took_s else progress.get("processedRowsPerSecond")
    return {**progress, "numInputRows": records, "inputRowsPerSecond": input_rate,
            "processedRowsPerSecond": processed_rate}


def without_a_batch(progress: dict) -> dict:
    """An idle report before any batch ran, without the report's own time and duration: no batch
    to tell of (its offsets stay: where the query stands)."""
    return {key: value for key, value in progress.items() if key not in ("timestamp", "durationMs")}


def query_status(query: StreamingQuery, restarts: int = 0, last_restart_error: str | None = None,
                 sink: MedallionSink | None = None, progress: dict | None = None) -> QueryStatus:
    """sink: the query's, for the watermark now in effect (from every batch done) and any data loss.
    progress: the report to describe (default: the query's last)."""
    watermark = sink.watermark if sink else None
    if progress is None:
        progress = query.lastProgress or {}  # not recentProgress: two py4j calls per report kept
    exception = query.exception() if not query.isActive else None
    operators = progress.get("stateOperators", [])
    return QueryStatus(
        name=query.name,
        active=query.isActive,
        error=short_error(exception) if exception else None,  # the cause, not the worker's traceback
        batch_id=progress.get("batchId"),
        last_batch_at=progress.get("timestamp"),
        watermark=status_time(watermark),
        input_rows_per_second=progress.get("inputRowsPerSecond"),
        rows_dropped_by_watermark=sum(op.get("numRowsDroppedByWatermark", 0) for op in operators),
        processed_rows_per_second=progress.get("processedRowsPerSecond"),
        batch_duration_ms=(progress.get("durationMs") or {}).get("triggerExecution"),
        state_rows=sum(op.get("numRowsTotal", 0) for op in operators),
        processed_offsets=processed_offsets(progress),
        restarts=restarts,
        last_restart_error=last_restart_error,
        data_loss=sink.data_loss if sink else None,
        records_lost=sink.records_lost if sink else 0,
        last_trade_at=status_time(sink.last_trade_at) if sink else None,
        closed_when_quiet=sink.closed_while_quiet() if sink else None,
    )


# A query that has run this long since its last restart starts counting its restarts afresh.
HEALTHY_AFTER_S = 300.0
WARM_UP_WAIT_S = 30.0  # how long a stop waits for the start's Python workers job (seconds on a busy machine)


@dataclass
class Restarts:
    """A query's restarts after failures: how many so far, how many in a row (what
    --max-query-restarts limits), and when the next may happen (backoff: 1, 2, 4 ... s, at most
    a minute, so a broker that is down is not hammered)."""

    count: int = 0
    in_a_row: int = 0  # since the query last ran HEALTHY_AFTER_S without failing
    last_error: str | None = None
    failed_at: float | None = None  # time.monotonic() when its current failure was first seen
    restarted_at: float | None = None

    def backoff_s(self) -> float:
        return min(2.0 ** self.in_a_row, 60.0)

    def forget_if_healthy(self, now: float) -> None:
        if self.in_a_row and self.restarted_at is not None and now - self.restarted_at >= HEALTHY_AFTER_S:
            self.in_a_row = 0


class Pipeline(SparkJob):
    """The streaming query of a run (a list: the status, restarts and stops are per query)."""

    def __init__(self, spark: SparkSession, settings: Settings, lake: Lake | None = None):
        super().__init__(spark, settings,
                         lake or Lake(settings.data_dir, settings.storage_options, upkeep_in_background=True))
        self.queries: list[StreamingQuery] = []
        self._starters: dict[str, Callable[[], StreamingQuery]] = {}
        self.sinks: dict[str, MedallionSink] = {}  # each query's current sink (a restart makes a new one)
        self.restarts: dict[str, Restarts] = {}
        self._last_batches: dict[str, dict] = {}  # each query's last progress report of a batch that ran
        self._replay: ReplayPlan | None = None  # a --replay-from's part from bronze, until the query starts
        self._warm_up: threading.Thread | None = None  # start_python_workers' job

    def start(self) -> None:
        if self.settings.data_is_local:
            Path(self.settings.data_dir).mkdir(parents=True, exist_ok=True)
        if self.settings.replay_from is not None:
            moved = self.checkpoints.set_aside()
            self.checkpoints.remember_replay(self.settings.replay_from)
            log.info("replaying from Kafka time %s with fresh checkpoints%s", self.settings.replay_from.isoformat(),
                     f" (the old ones are kept in {moved})" if moved else "")
        self._warm_up = start_python_workers(self.spark)
        history_was_there = self.lake.open(SUMMARY_HISTORY) is not None
        self.lake.ensure_all()
        carry_over_history(self.lake, history_was_there)
        if self.settings.replay_from is not None:
            self._replay = plan_replay(self.lake, self.settings, self.settings.replay_from)
            log.info("%s", said_where_from(self._replay))
        self._starters = {MEDALLION_QUERY: self._start_medallion}
        for name, start in self._starters.items():
            self.queries.append(start())
            self.restarts[name] = Restarts()

    def _start_medallion(self) -> StreamingQuery:
        sink = MedallionSink(self.settings, self.lake, self.checkpoints.query(MEDALLION_QUERY))
        if MEDALLION_QUERY in self.sinks:  # a restart: what the operator was told stays said
            sink.data_loss = self.sinks[MEDALLION_QUERY].data_loss
            sink.carry_quiet_from(self.sinks[MEDALLION_QUERY])
            self.sinks[MEDALLION_QUERY].close()
        self.sinks[MEDALLION_QUERY] = sink
        replay, self._replay = self._replay, None  # a query restarted later resumes its checkpoint
        if replay is None:
            return start_medallion_query(self.spark, self.settings, sink)
        replay_from_bronze(self.lake, sink, replay, writer=f"replay-{uuid.uuid4()}")
        return start_medallion_query(self.spark, self.settings, sink, starting_offsets=replay.kafka_from)

    def progress(self, query: StreamingQuery) -> list[dict]:
        """The query's recent progress reports, with the records of the batches the sink read itself."""
        return [with_records_read(p, self._read_by(query.name)) for p in query.recentProgress]

    def _read_by(self, name: str) -> Callable[[int], tuple[int, float | None] | None] | None:
        sink = self.sinks.get(name)
        return sink.read_by if sink else None

    def status(self) -> list[QueryStatus]:
        return [self._status(q) for q in self.queries]

    def _status(self, query: StreamingQuery) -> QueryStatus:
        restarts = self.restarts.get(query.name, Restarts())
        progress: dict = with_records_read(query.lastProgress or {}, self._read_by(query.name))
        if ran_a_batch(progress):
            self._last_batches[query.name] = progress
        # A quiet query's status stays its last batch's (when it ran, how long it took), so an
        # idle page is pushed nothing.
        return query_status(query, restarts.count, restarts.last_error, self.sinks.get(query.name),
                            self._last_batches.get(query.name) or without_a_batch(progress))

    def restart_failed(self, max_restarts: int) -> list[QueryStatus]:
        """Restart each failed query from its checkpoint once its backoff has passed (a batch it
        had not committed runs again, and lands once). Returns the failed queries that are out
        of restarts: they have failed for good."""
        exhausted = []
        now = time.monotonic()
        for index, query in enumerate(self.queries):
            restarts = self.restarts.setdefault(query.name, Restarts())
            failure = None if query.isActive else query.exception()
            if failure is None:
                restarts.forget_if_healthy(now)
                continue
            error = short_error(failure)
            if restarts.in_a_row >= max_restarts:
                exhausted.append(self._status(query))
                continue
            if restarts.failed_at is None:
                restarts.failed_at = now
                log.error("query '%s' failed: %s; restarting it from its checkpoint in %g s "
                          "(restart %d of %d in a row)", query.name, error, restarts.backoff_s(),
                          restarts.in_a_row + 1, max_restarts)
            if now - restarts.failed_at < restarts.backoff_s():
                continue
            restarts.count, restarts.in_a_row, restarts.last_error = restarts.count + 1, restarts.in_a_row + 1, error
            restarts.failed_at, restarts.restarted_at = None, now
            try:
                self.queries[index] = self._starters[query.name]()
                log.info("query '%s' restarted from its checkpoint", query.name)
            except Exception as exc:  # noqa: BLE001 - it cannot start yet (Kafka still down): next round
                log.error("restarting query '%s' failed: %s", query.name, exc)
        return exhausted

    def hold_quiet(self) -> None:
        """Kafka is unreachable or holds records not read yet: no query's input is quiet."""
        for sink in list(self.sinks.values()):
            sink.hold_quiet()

    def close_quiet_windows(self) -> None:
        """Each query's idle close, once its input has been quiet for --close-idle-after."""
        quiet = self.settings.close_idle_after
        if quiet is None:
            return
        for query in self.queries:
            sink = self.sinks.get(query.name)
            if sink is not None and query.isActive:
                sink.close_when_quiet(quiet)

    def failed(self) -> list[QueryStatus]:
        return [s for s in self.status() if s.error]

    def wait_until_done(self, poll_s: float = 0.5) -> None:
        """For --available-now: block until every query has finished."""
        while any(q.isActive for q in self.queries):
            time.sleep(poll_s)

    def stop(self, grace_s: float = 10.0) -> None:
        if self._warm_up is not None:  # a stop right after the start: Spark must not kill its workers mid-task
            self._warm_up.join(WARM_UP_WAIT_S)
        stop_queries(self.queries, grace_s)
        for sink in self.sinks.values():
            sink.close()
        upkeep.finish()
        for name in finish_rolls():
            log.warning("the roll of %s's closed days did not finish in time; the next start rolls them", name)


def start_python_workers(spark: SparkSession) -> threading.Thread:
    """Has Spark start its Python workers and import the tasks' code now, one per core, in the
    background: the first batch written by Spark's tasks (a backlog at a start) would otherwise
    wait seconds for them (docs/live-batch.md). Idle workers end after a minute."""
    def run() -> None:
        cores = spark.sparkContext.defaultParallelism
        try:
            began = time.monotonic()
            spark.range(cores, numPartitions=cores).mapInArrow(nothing, "id long").collect()
            log.debug("%d Python workers started in %.1f s", cores, time.monotonic() - began)
        except Exception as exc:  # noqa: BLE001 - a stop under way; the first batch starts them itself
            log.debug("Python workers not started ahead: %s", exc)

    thread = threading.Thread(target=run, name="python-workers", daemon=True)
    thread.start()
    return thread


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


def short_error(error: BaseException) -> str:
    """A failed query's exception -> the one line that says what went wrong (our own error's
    message when a task raised one; what Kafka lost and what to do), without the worker's
    traceback and the query plan."""
    text = str(error)
    explained = explain_kafka_failure(text)
    if explained:
        return explained
    ours = re.findall(r"^(?:streaming(?:\.\w+)+\.)?\w+(?:Error|Exception): (.+)$", text, re.MULTILINE)
    if ours:
        return ours[-1].strip()
    first = text.strip().splitlines()[0] if text.strip() else repr(error)
    return first
