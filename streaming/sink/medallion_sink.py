"""The foreachBatch sink of the one streaming query: each micro-batch -> every table, through the lake.

Per micro-batch, in this order:
1. bronze gets every record, silver the valid trades (the first copy of a trade wins), quarantine
   the rest with the reason;
2. the trades silver kept from this batch's records are judged against the watermark the batch
   applies (lateness.py): the too-late ones go to gold/late_trades, the others' window sums are
   added to gold (gold is the stream's state), with a correction for each window already past;
3. the ledger (gold/batch_watermarks) records the offsets the batch read and that watermark.

Between batches, after --close-idle-after with no new trade, `close_when_quiet` moves the
watermark up to the latest event time seen and records it in the ledger for the next batch.

Records read for the first time are parsed and written where they are read, by Spark's tasks
(task_writes.py), or for a live batch of one share on a local master by the same code in the
driver (its records fetched from Kafka here, kafka/range_reader.py: no Spark job), and the
driver commits their files; records that may have been read before (read_before.py) are collected and written
by the driver through MERGEs. The gold step is gold_step.py either way.

Each table records the batch id in its own commit, so a batch that Spark runs again after a
crash skips the tables that have it and completes the others. Adding is only safe for trades
new to silver: when the batch's records were in silver before (a replay, a fresh checkpoint, a
batch run again after a crash), the windows they touch are recounted from silver instead
(replay.py), which gives the same totals however often it runs.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import deque
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from streaming.config import Settings, duration_text, status_time
from streaming.kafka.clients import log_starts
from streaming.kafka.range_reader import RangeReader
from streaming.lake.checkpoints import OffsetLogEntry, QueryCheckpoint
from streaming.lake.lookups import (
    holds_records_of,
    idle_closes,
    latest_event_time_before,
    ledger_watermark,
    offset_ranges,
    records_lost_so_far,
    rows_of_trade_ids,
    silver_rows_of_records,
)
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import BATCH_WATERMARKS, BRONZE, KAFKA_RECORD, QUARANTINE, SILVER, UTC_TIME
from streaming.medallion import losses
from streaming.medallion.bronze import bronze_rows
from streaming.medallion.gold import merge_window_sums
from streaming.medallion.lateness import (
    CLOSER_PREFIX,
    EPOCH,
    LATE_CANDIDATE_COLUMNS,
    LATENESS,
    Close,
    closes_of,
    greatest_lateness,
    judged_close,
    judged_watermark,
    ledger_rows,
    quiet_close_rows,
    quiet_closer,
    reached_closes,
    stamped,
    with_close,
)
from streaming.medallion.silver.arrow import parse_records, quarantine_rows, silver_rows
from streaming.medallion.silver.guard import screened
from streaming.metrics.counters import METRICS, oldest_arrival, quarantine_reasons, reason_counts
from streaming.metrics.phase_times import PhaseTimes
from streaming.sink.gold_step import GoldStep
from streaming.sink.read_before import ReadBefore, rewinds
from streaming.sink.seen_ids import SilverBefore, TradeIds, id_keys
from streaming.sink.task_writes import LATE, ONE_SHARE_UP_TO, SUMS, BatchPlan, ShareWriter, TaskResults

log = logging.getLogger(__name__)


def records_read(ledger: pa.Table) -> int:
    """How many Kafka records the batch's ledger rows span."""
    return pc.sum(pc.subtract(ledger["end_offset"], ledger["start_offset"])).as_py() or 0


def starts_known(ledger: pa.Table, known: frozenset[tuple[str, int]]) -> bool:
    """Whether each of the batch's ranges starts where the batch before ended (else its ledger
    start is a guess: 0)."""
    return all(tp in known for tp in zip(ledger["topic"].to_pylist(), ledger["partition"].to_pylist()))


class MedallionSink:
    """A foreachBatch function writing every table idempotently for one checkpoint."""

    def __init__(self, settings: Settings, lake: Lake, checkpoint: QueryCheckpoint):
        self.settings = settings
        self.lake = lake
        self.checkpoint = checkpoint
        self.last_done = -2  # the last batch this sink has written
        # The latest event time among silver's trades from the records before batch `latest_for`.
        self.latest: datetime | None = None
        self.latest_for: int | None = None
        self.watermark: datetime | None = None  # in effect for the next batch (None before the first is set)
        self.data_loss: str | None = None  # the last time Kafka lost records, said for the operator
        self.records_lost = records_lost_so_far(lake)  # before they were read, ever (the ledger's count)
        self.starts_known: frozenset[tuple[str, int]] = frozenset()  # the current batch's partitions
        self.read_before = ReadBefore(lake)
        self.trade_ids = TradeIds(lake)  # silver's trade_ids, hashed, of the days in play
        self.silver_before = SilverBefore(lake, self.trade_ids)
        self.local_master: bool | None = None  # whether Spark runs in this process (known at the first batch)
        self.phases = PhaseTimes()  # the last live batches' time, phase by phase (the bench reads it)
        self.gold = GoldStep(settings, lake, self.phases)
        self.reader = RangeReader(settings.kafka_client_config())  # a live batch's records, on a local master
        # (batch id, records it read, when it started): Spark counts none for a batch read here.
        self.reads: deque[tuple[int, int, float]] = deque(maxlen=128)
        self._one_at_a_time = threading.Lock()  # a batch, or an idle close between two
        self.last_trade_at = datetime.now(timezone.utc)  # of a batch with new trades (at first: the start)
        self._not_quiet_at = self.last_trade_at  # when Kafka was last unreachable or had records unread
        self.closed: tuple[int, datetime] | None = None  # this sink's latest idle close: (before batch, watermark)
        self.closed_at: datetime | None = None  # when it was made
        self._closes: list[Close] | None = None  # idle closes not in force yet (read from the ledger once)
        self._reached: datetime | None = None  # the latest close in force
        self._nothing_to_close: tuple | None = None  # (last batch, close) when there was nothing to close

    def close(self) -> None:
        self.reader.close()

    def read_by(self, batch_id: int) -> tuple[int, float | None] | None:
        """The records batch `batch_id` read and the seconds since the batch before it started
        (None when not known), if it is among the last ones this sink ran."""
        before = None
        for done, records, started in tuple(self.reads):  # the batch thread appends meanwhile
            if done == batch_id:
                return records, None if before is None else started - before
            before = started
        return None

    @functools.cached_property
    def query_id(self) -> str:
        return self.checkpoint.query_id

    @functools.cached_property
    def query_name(self) -> str:
        return self.checkpoint.location.rstrip("/").rsplit("/", 1)[-1]

    def batch(self, batch_id: int) -> Batch:
        return Batch(self.query_id, batch_id)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        with self._one_at_a_time:
            self._write(batch, batch_id)

    def _write(self, batch: DataFrame, batch_id: int) -> None:
        # The stream's jobs go first, before a reconciliation's (fairscheduler.xml).
        batch.sparkSession.sparkContext.setLocalProperty("spark.scheduler.pool", "stream")
        started = time.perf_counter()
        self.phases.begin()
        with self.phases.timed("offsets"):
            read, previous = self.checkpoint.offset_log(batch_id), self.checkpoint.offset_log(batch_id - 1)
        for said in rewinds(read, previous, datetime.now(timezone.utc)):
            self.data_loss = said
            METRICS.lost(0)
            log.warning("%s", said)
        latest = self.latest_before(batch_id, previous)
        closed = self.closed_for(batch_id, previous)
        watermark = with_close(EPOCH if latest is None else max(EPOCH, latest - self.settings.watermark), closed)
        ledger = ledger_rows(self.query_id, batch_id, read, previous, watermark, front=latest, closed_to=closed)
        # Where a partition's range starts is known from the batch before (batch 0's from the
        # starting offsets, which the offset log does not keep): only then is a gap a loss.
        self.starts_known = frozenset(previous.ends if previous else ())
        if ledger.num_rows == 0:
            batch_latest = None  # no record read
        elif self.read_before(ledger, self.batch(batch_id), may_run_again=batch_id != self.last_done + 1):
            batch_latest = self.write_on_driver(batch.toArrow(), batch_id, ledger, latest)
        else:
            batch_latest = self.write_in_tasks(batch, batch_id, ledger, latest)
            self.read_before.written(ledger)
        if batch_latest is not None:
            self.last_trade_at = datetime.now(timezone.utc)
        self.latest = max((t for t in (latest, batch_latest) if t is not None), default=None)
        self.latest_for, self.last_done = batch_id + 1, batch_id
        rule = self.latest - self.settings.watermark if self.latest is not None else None
        self.watermark = max((t for t in (rule, closed) if t is not None and t > EPOCH), default=self.watermark)
        self.phases.end(records_read(ledger))
        self.reads.append((batch_id, records_read(ledger), started))
        METRICS.batch_seconds.labels(self.query_name).observe(time.perf_counter() - started)

    # -- windows closed when the input goes quiet (--close-idle-after) -----------------------------
    def closed_for(self, batch_id: int, previous: OffsetLogEntry | None) -> datetime | None:
        """The idle close in force for the batch (lateness.reached_closes): of the ledger's
        closes, read once a sink, and this sink's own; those reached are folded into one
        watermark (batches only move on), so a batch looks at the few made ahead of it."""
        if self._closes is None:
            self._closes = closes_of(idle_closes(self.lake, CLOSER_PREFIX))
        reached, self._closes = reached_closes(self._closes, self.query_id, batch_id,
                                               previous.ends if previous else {})
        if reached is not None:
            self._reached = max(self._reached or reached, reached)
        return self._reached

    def close_when_quiet(self, quiet: timedelta) -> datetime | None:
        """After `quiet` with no new trade, moves the watermark up to the latest event time seen,
        so every window up to it is final: recorded in the ledger (lateness.quiet_close_rows), in
        force for the batches that read on from where the query stands. Returns the new
        watermark, or None when there is nothing to close."""
        if not self._quiet_for(quiet) or (self.closed is not None and self.latest is not None
                                          and self.latest <= self.closed[1]):
            return None  # not quiet, or closed up to the front already: only a batch moves it
        if self._nothing_to_close == (self.last_done, self.closed) or not self.checkpoint.started:
            return None  # nothing since the last look, or the query has not started
        with self._one_at_a_time:
            if not self._quiet_for(quiet):
                return None  # a batch with trades ended while this waited
            planned, committed = self.checkpoint.last_planned_batch(), self.checkpoint.last_committed_batch()
            if planned is None:
                self._nothing_to_close = (self.last_done, self.closed)
                return None
            if committed is None or planned > committed:
                return None  # a batch is planned and not committed: Spark finishes it first
            previous = self.checkpoint.offset_log(planned)
            self.latest = self.latest_before(planned + 1, previous)
            self.latest_for = planned + 1
            closed = self.closed_for(planned + 1, previous)
            if closed is not None and self.closed is None:  # made before this start: said as this sink's
                self.closed, self.closed_at = (planned + 1, closed), datetime.now(timezone.utc)
                self.watermark = max(self.watermark or EPOCH, closed)
            if previous is None or self.latest is None or self.latest <= EPOCH or (closed and self.latest <= closed):
                self._nothing_to_close = (self.last_done, self.closed)
                return None
            rows = quiet_close_rows(self.query_id, planned + 1, previous.ends, self.latest)
            self.lake.publish(BATCH_WATERMARKS, rows, Batch(quiet_closer(self.query_id), planned + 1))
            self._closes = [*(self._closes or []), *closes_of(rows)]
            self.closed, self.closed_at = (planned + 1, self.latest), datetime.now(timezone.utc)
            self.watermark = max(self.watermark or EPOCH, self.latest)
            log.info("input quiet for %s: windows up to %s closed", duration_text(quiet),
                     self.latest.isoformat(timespec="seconds"))
            return self.latest

    def carry_quiet_from(self, before: MedallionSink) -> None:
        """A query restarted in the same run keeps its quiet and its close said."""
        self.last_trade_at, self.closed, self.closed_at = before.last_trade_at, before.closed, before.closed_at
        self._not_quiet_at = before._not_quiet_at

    def hold_quiet(self) -> None:
        """Kafka unreachable, or records not read yet: the input is not quiet (its quiet counts
        from now)."""
        self._not_quiet_at = datetime.now(timezone.utc)

    def _quiet_for(self, quiet: timedelta) -> bool:
        return datetime.now(timezone.utc) - max(self.last_trade_at, self._not_quiet_at) >= quiet

    def closed_while_quiet(self) -> dict | None:
        """The idle close this sink made, while no trade has come since: the watermark it set and
        the quiet it followed (None: none, or trades since)."""
        closed, closed_at, last_trade_at = self.closed, self.closed_at, self.last_trade_at  # other threads write
        if closed is None or closed_at is None or last_trade_at > closed_at:
            return None
        return {"windows_up_to": status_time(closed[1]), "quiet_s": round((closed_at - last_trade_at).total_seconds())}

    def continue_from(self, latest: datetime | None) -> None:
        """The query's first batch follows records written before it (a replay's part from
        bronze), whose latest event time this is: its watermark comes from them."""
        self.latest, self.latest_for = latest, 0

    def latest_before(self, batch_id: int, previous: OffsetLogEntry | None) -> datetime | None:
        """The latest event time among silver's trades from the Kafka records before this batch's
        (the previous batch's ends), in every partition: Spark's watermark rule (the largest event
        time seen, less the delay) over the trades silver took, so a trade quarantined for a jump
        in time never moves it. Known from the batch before; asked of silver after a restart."""
        if self.latest_for == batch_id:
            return self.latest
        if previous is None or not previous.ends:
            return None
        # The batch before ran with a watermark below the latest event time before it, so below
        # this one's: only silver's files of the event times since are read, not a month of them.
        bound = ledger_watermark(self.lake, self.query_id, batch_id - 1)
        return latest_event_time_before(self.lake, previous.ends, bound if bound and bound > EPOCH else None)

    # -- records read for the first time: the tasks read, write and sum; the driver commits ----------
    def write_in_tasks(self, batch: DataFrame, batch_id: int, ledger: pa.Table,
                       latest: datetime | None) -> datetime | None:
        """Returns the latest event time among the trades silver took from the batch."""
        this = self.batch(batch_id)
        plan = BatchPlan(self.lake.root, self.lake.storage_options, judged_watermark(ledger),
                         self.settings.window, datetime.now(timezone.utc), latest, self.settings.max_event_time_jump,
                         judged_close(ledger))
        records = records_read(ledger)
        if self.local_master is None:
            self.local_master = (batch.sparkSession.sparkContext.master or "").startswith("local")
        with self.phases.timed("job"):
            # One share on this machine is written here, with no Python worker to hand it to; on a
            # cluster the executors write, next to the data, and the driver only commits.
            if records <= ONE_SHARE_UP_TO and self.local_master:
                # The batch's ranges, fetched here (no Spark job) when the offset log gives their
                # starts: a query's first batch may start past 0 (a replay), which only Spark knows.
                read = self.reader.read(ledger) if starts_known(ledger, self.starts_known) else None
                records_here = batch.coalesce(1).toArrow() if read is None else read
                results = TaskResults(ShareWriter(plan).results_of(records_here))
            else:
                shares = batch.coalesce(1) if records <= ONE_SHARE_UP_TO else batch
                results = TaskResults(shares.mapInArrow(ShareWriter(plan), ShareWriter.SCHEMA).toArrow())
        with self.phases.timed("ids"):
            new_ids = results.new_id_keys()
            seen = results.same_trade_kept_twice() or self.trade_ids.known(*new_ids).any()
        if seen:
            # Two tasks each kept a first copy of one trade (sent with two keys, so into two Kafka
            # partitions, or on both sides of where a partition's range was cut), or a task kept a
            # trade whose id silver has (delivered again, or a conflicting record): the silver and
            # quarantine files stay uncommitted, and the driver takes the batch through MERGEs,
            # keeping the first copy and quarantining a conflicting one.
            log.info("batch %d: a trade_id seen before; silver takes the batch through a MERGE", batch_id)
            self.lake.commit_files(BRONZE, results.files(BRONZE), this)
            return self.write_on_driver(batch.toArrow(), batch_id, ledger, latest)
        ledger = self.count_losses(ledger, results.first_offsets())
        # The files commit beside the gold step, any of them first. A batch run again after a
        # crash in between finds bronze, silver or quarantine committed (read_before) and goes
        # through the driver, which completes the others, or finds only gold's tables and
        # works its changes out from gold as it stood before (gold_step.gold_before).
        late = results.table(LATE)
        with self.phases.timed("gold_step"):
            self.gold.add_summed(late, merge_window_sums(results.tables(SUMS)), ledger, this,
                                 files={name: functools.partial(self.lake.commit_files, table, results.files(table),
                                                                this)
                                        for name, table in (("bronze", BRONZE), ("silver", SILVER),
                                                            ("quarantine", QUARANTINE))},
                                 rerun=batch_id != self.last_done + 1)
        self.trade_ids.add(*new_ids)
        METRICS.batch_written(self.query_name, sum(f.rows for f in results.files(BRONZE)),
                              sum(f.rows for f in results.files(SILVER)), late.num_rows,
                              quarantine_reasons(results.files(QUARANTINE), self.lake.location(QUARANTINE),
                                                 self.lake.storage_options),
                              oldest_arrival(results.files(BRONZE)))
        return results.latest_event_time()

    def count_losses(self, ledger: pa.Table, first_read: dict[tuple[str, int], int]) -> pa.Table:
        """The ledger rows with the records Kafka removed before the batch could read them
        (losses.py), said for the operator when there are any."""
        heads = {tp: head for tp, head in losses.unread_heads(ledger, first_read).items() if tp in self.starts_known}
        if not heads:
            return ledger
        try:
            starts: dict[tuple[str, int], int] | None = log_starts(self.settings.kafka_client_config(), sorted(heads))
        except Exception as exc:  # noqa: BLE001 - unreachable now: a topic without transactions has no markers
            log.warning("Kafka could not say where its partitions start (%s): the offsets a batch did not read "
                        "count as lost", exc)
            starts = None
        lost = losses.lost_records(heads, starts)
        if not lost:
            return ledger
        self.records_lost += sum(lost.values())
        METRICS.lost(sum(lost.values()))
        self.data_loss = losses.said(lost, heads, self.records_lost, datetime.now(timezone.utc))
        log.warning("%s", self.data_loss)
        return losses.with_losses(ledger, lost)

    # -- records read again, or a batch run again: the driver writes through MERGEs ----------------
    def write_on_driver(self, records: pa.Table, batch_id: int, ledger: pa.Table,
                        latest: datetime | None, writer: str | None = None) -> datetime | None:
        """records: the batch's, as the Kafka source gives them. Returns the latest event time
        among silver's trades from them. writer: whose batch it is, when not the query's (a
        replay's part from bronze)."""
        ledger = self.count_losses(ledger, losses.first_offsets([offset_ranges(records)]) if records.num_rows else {})
        if records.num_rows == 0:
            if pc.sum(ledger["records_lost"]).as_py():  # the ledger keeps the count
                self.gold.count_kept(SILVER.schema_of(LATE_CANDIDATE_COLUMNS).empty_table(), ledger,
                                     self.batch(batch_id), recount=False)
            return None
        rows = parse_records(records)
        ingested_at = pa.scalar(datetime.now(timezone.utc), UTC_TIME)
        rows = rows.append_column("ingested_at", pa.repeat(ingested_at, rows.num_rows))
        rows, _ = screened(rows, latest, self.settings.max_event_time_jump, self.silver_before)
        trades = stamped(silver_rows(rows), latest, judged_close(ledger))
        this = self.batch(batch_id) if writer is None else Batch(writer, batch_id)
        # Records read again may have a new event time (a parser fixed since): they are matched
        # on trade_id over all of silver, not only among the batch's event times.
        read_again = holds_records_of(self.lake, SILVER, trades)
        if read_again:  # a replay keeps the lateness judged live, as it keeps the too-late list
            earlier = rows_of_trade_ids(self.lake, SILVER, trades["trade_id"], ["trade_id", *KAFKA_RECORD, LATENESS])
            trades = greatest_lateness(trades, earlier)
        run_again = self.lake.published(SILVER, this)  # after a crash, before Spark recorded the batch done
        self.lake.publish(BRONZE, bronze_rows(rows), this)
        self.lake.publish(SILVER, trades, this, narrow=not read_again)
        quarantined = quarantine_rows(rows)
        self.lake.publish(QUARANTINE, quarantined, this)
        # The trades silver kept from these records: a redelivery of a trade it had is not among them.
        kept = silver_rows_of_records(self.lake, trades, LATE_CANDIDATE_COLUMNS)
        self.trade_ids.add(*id_keys(kept))
        too_late = self.gold.count_kept(kept, ledger, this, recount=read_again or run_again)
        METRICS.batch_written(self.query_name, records.num_rows, kept.num_rows, too_late,
                              reason_counts(quarantined["reason"]) if quarantined.num_rows else {},
                              pc.min(records["timestamp"]).as_py(), read_again=read_again or run_again)
        return pc.max(kept["event_time"]).as_py() if kept.num_rows else None
