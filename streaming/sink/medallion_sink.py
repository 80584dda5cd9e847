"""The foreachBatch sink of the one streaming query: each micro-batch -> every table, through the lake.

Per micro-batch, in this order:
1. bronze gets every record, silver the valid trades (the first copy of a trade wins), quarantine
   the rest with the reason;
2. the trades silver kept from this batch's records are judged against the watermark the batch
   applies (lateness.py): the too-late ones go to gold/late_trades, the others' window sums are
   added to gold (gold is the stream's state), with a correction for each window already past;
3. the ledger (gold/batch_watermarks) records the offsets the batch read and that watermark.

Each table records the batch id in its own commit, so a batch that Spark runs again after a
crash skips the tables that have it and completes the others. Adding is only safe for trades
new to silver: when the batch's records were in silver before (a replay, a fresh checkpoint, a
batch run again after a crash), the windows they touch are recounted from silver instead
(replay.py), which gives the same totals however often it runs.
"""

from __future__ import annotations

import functools
import logging
from datetime import datetime, timezone

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from streaming.config import Settings
from streaming.lake.checkpoints import OffsetLogEntry, QueryCheckpoint
from streaming.lake.store import Batch, Lake, before_offsets, in_time_range, quote, sql_literal
from streaming.lake.tables import (
    BATCH_WATERMARKS,
    CORRECTIONS,
    GOLD,
    LATE_TRADES,
    QUARANTINE,
    SILVER,
    UTC_TIME,
    Table,
    Write,
)
from streaming.medallion import bronze, silver
from streaming.medallion.corrections import find_corrections
from streaming.medallion.gold import MEASURES, merge_window_sums, window_starts, window_sums
from streaming.medallion.lateness import (
    EPOCH,
    LATE_CANDIDATE_COLUMNS,
    judged_watermark,
    late_trade_rows,
    ledger_rows,
    too_late,
)
from streaming.medallion.replay import recount
from streaming.rows import one_per_key
from streaming.sink.task_writes import (
    LATE,
    ONE_SHARE_UP_TO,
    SUMS,
    BatchPlan,
    ShareWriter,
    TaskResults,
    TradeIds,
    trade_id_hashes,
)

log = logging.getLogger(__name__)

# The tables the sink's gold step writes as one step: a reader holding their locks (the
# reconciliation, a backfill) sees them all at the same batch.
GOLD_WRITES = (GOLD, CORRECTIONS, BATCH_WATERMARKS, LATE_TRADES)


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


def new_to_silver(trades: pa.Table, existing: pa.Table) -> pa.Table:
    """The trades (one per trade_id) whose (trade_id, event_time) is not among `existing`'s."""
    if existing.num_rows == 0 or trades.num_rows == 0:
        return trades
    key = lambda rows: pc.binary_join_element_wise(  # noqa: E731
        rows["trade_id"], pc.cast(pc.cast(rows["event_time"], pa.int64()), pa.string()), "\x00")
    return trades.filter(pc.invert(pc.is_in(key(trades), key(existing).combine_chunks())))


def silver_matches(lake: Lake, trades: pa.Table) -> pa.Table:
    """Silver's (trade_id, event_time) among the trades' event times."""
    if trades.num_rows == 0:
        return pa.table({"trade_id": pa.array([], pa.string()), "event_time": pa.array([], UTC_TIME)})
    low, high = pc.min_max(trades["event_time"]).values()
    return lake.read(SILVER, ["trade_id", "event_time"], in_time_range("event_time", low.as_py(), high.as_py()))


def gold_rows(sums: pa.Table, batch_id: int, now: datetime) -> pa.Table:
    """window_sums() rows -> gold rows written by this batch."""
    n = sums.num_rows
    return pa.table({
        **{name: sums[name] for name in ("window_start", "window_end", *MEASURES)},
        "revision": pa.array([1] * n, pa.int64()),
        "updated_at": pa.array([now] * n, UTC_TIME),
        "batch_id": pa.array([batch_id] * n, pa.int64()),
    }).cast(GOLD.schema)


def added(current: pd.DataFrame, sums: pd.DataFrame) -> pd.DataFrame:
    """The windows of `sums` as they are once it is added to gold's `current` rows (what the
    ADD MERGE computes, for the corrections)."""
    if current.empty:
        return sums
    before = current.set_index("window_start")[list(MEASURES)]
    after = sums.set_index("window_start")
    for measure in MEASURES:
        after[measure] = after[measure] + before[measure].reindex(after.index).fillna(0).astype(after[measure].dtype)
    return after.reset_index()


class MedallionSink:
    """A foreachBatch function writing every table idempotently for one checkpoint."""

    def __init__(self, settings: Settings, lake: Lake, checkpoint: QueryCheckpoint):
        self.settings = settings
        self.lake = lake
        self.checkpoint = checkpoint
        # (topic, partition) -> an offset from which bronze is known to hold no record yet
        self.bronze_free_from: dict[tuple[str, int], int] = {}
        self.last_done = -2  # the last batch this sink has written
        # The latest event time among silver's trades from the records before batch `latest_for`.
        self.latest: datetime | None = None
        self.latest_for: int | None = None
        self.watermark: datetime | None = None  # in effect for the next batch (None before the first is set)
        self.data_loss: str | None = None  # the last time Kafka's offsets went back, said for the operator
        self.trade_ids = TradeIds(lake)  # every trade_id silver holds, hashed

    @functools.cached_property
    def query_id(self) -> str:
        return self.checkpoint.query_id

    def batch(self, batch_id: int) -> Batch:
        return Batch(self.query_id, batch_id)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        # The stream's jobs go first, before a reconciliation's (fairscheduler.xml).
        batch.sparkSession.sparkContext.setLocalProperty("spark.scheduler.pool", "stream")
        read, previous = self.checkpoint.offset_log(batch_id), self.checkpoint.offset_log(batch_id - 1)
        self.note_rewinds(read, previous)
        latest = self.latest_before(batch_id, previous)
        watermark = EPOCH if latest is None else max(EPOCH, latest - self.settings.watermark)
        ledger = ledger_rows(self.query_id, batch_id, read, previous, watermark)
        if ledger.num_rows == 0:
            batch_latest = None  # no record read
        elif self.read_before(ledger, batch_id):
            batch_latest = self.write_on_driver(batch.toArrow(), batch_id, ledger, latest)
        else:
            batch_latest = self.write_in_tasks(batch, batch_id, ledger, latest)
            self.bronze_free_from.update(zip(zip(ledger["topic"].to_pylist(), ledger["partition"].to_pylist()),
                                             ledger["end_offset"].to_pylist()))
        self.latest = max((t for t in (latest, batch_latest) if t is not None), default=None)
        self.latest_for, self.last_done = batch_id + 1, batch_id
        if self.latest is not None and self.latest - self.settings.watermark > EPOCH:
            self.watermark = self.latest - self.settings.watermark

    def note_rewinds(self, read: OffsetLogEntry | None, previous: OffsetLogEntry | None) -> None:
        """A batch that ends a partition before the batch before it did: the source found the
        broker's log shorter than what the query had read, and (failOnDataLoss=false) reads on
        from where it ends now, so the records that take those offsets again are read."""
        if read is None or previous is None:
            return
        for (topic, partition), end in sorted(read.ends.items()):
            before = previous.ends.get((topic, partition), end)
            if end < before:
                self.data_loss = (f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S} UTC: Kafka partition "
                                  f"{topic}/{partition} went back from offset {before} to {end} (the broker lost "
                                  f"its tail, or the topic was recreated); reading on from {end}. Records the "
                                  "broker lost before they were read are gone; those read before are in bronze.")
                log.warning("%s", self.data_loss)

    def latest_before(self, batch_id: int, previous: OffsetLogEntry | None) -> datetime | None:
        """The latest event time among silver's trades from the Kafka records before this batch's
        (the previous batch's ends), in every partition: Spark's watermark rule (the largest event
        time seen, less the delay) over the trades silver took, so a trade quarantined for a jump
        in time never moves it. Known from the batch before; asked of silver after a restart."""
        if self.latest_for == batch_id:
            return self.latest
        if previous is None or not previous.ends:
            return None
        found = self.lake.query(SILVER, f"SELECT max({quote('event_time')}) AS latest FROM t "
                                        f"WHERE {before_offsets(previous.ends)}")
        return found["latest"][0].as_py() if found is not None and found.num_rows else None

    def read_before(self, ledger: pa.Table, batch_id: int) -> bool:
        """Whether any of the batch's records may have been read before: by this batch, before a
        crash (a table has its id), or by an earlier run (bronze has a record at or after the
        batch's start offsets). This app is bronze's only writer, so once bronze is known to hold
        nothing from some offset on, the batches that follow need not ask it again."""
        this = self.batch(batch_id)
        # Spark runs a batch again only in a new run of the query, with a new sink: the batch
        # after one this sink has done is new.
        if batch_id != self.last_done + 1 and any(self.lake.published(table, this)
                                                   for table in (bronze.BRONZE, SILVER, QUARANTINE)):
            return True
        starts = dict(zip(zip(ledger["topic"].to_pylist(), ledger["partition"].to_pylist()),
                          ledger["start_offset"].to_pylist()))
        if all(start >= self.bronze_free_from.get(tp, start + 1) for tp, start in starts.items()):
            return False
        from_starts = " OR ".join(f"({quote('topic')} = {sql_literal(topic)} AND {quote('partition')} = {partition} "
                                  f"AND {quote('offset')} >= {start})" for (topic, partition), start in starts.items())
        found = self.lake.query(bronze.BRONZE, f"SELECT {quote('offset')} FROM t WHERE {from_starts} LIMIT 1")
        if found is not None and found.num_rows:
            return True
        self.bronze_free_from.update(starts)
        return False

    # -- records read for the first time: the tasks read, write and sum; the driver commits ----------
    def write_in_tasks(self, batch: DataFrame, batch_id: int, ledger: pa.Table,
                       latest: datetime | None) -> datetime | None:
        """Returns the latest event time among the trades silver took from the batch."""
        this = self.batch(batch_id)
        plan = BatchPlan(self.lake.root, self.lake.storage_options, judged_watermark(ledger),
                         self.settings.window, datetime.now(timezone.utc), latest, self.settings.max_event_time_jump)
        records = pc.sum(pc.subtract(ledger["end_offset"], ledger["start_offset"])).as_py()
        shares = batch.coalesce(1) if records <= ONE_SHARE_UP_TO else batch
        results = TaskResults(shares.mapInArrow(ShareWriter(plan), ShareWriter.SCHEMA).toArrow())
        new_ids = results.new_id_hashes()
        if results.same_trade_kept_twice() or self.trade_ids.known(new_ids).any():
            # Two tasks each kept a first copy of one trade (sent with two keys, so into two Kafka
            # partitions, or on both sides of where a partition's range was cut), or a task kept a
            # trade whose id silver has (delivered again, or a conflicting record): the silver and
            # quarantine files stay uncommitted, and the driver takes the batch through MERGEs,
            # keeping the first copy and quarantining a conflicting one.
            log.info("batch %d: a trade_id seen before; silver takes the batch through a MERGE", batch_id)
            self.lake.commit_files(bronze.BRONZE, results.files(bronze.BRONZE), this)
            return self.write_on_driver(batch.toArrow(), batch_id, ledger, latest)
        # Any of the three may land first: a batch run again after a crash in between finds one
        # committed (read_before) and goes through the driver, which completes the others.
        self.lake.at_once(*(functools.partial(self.lake.commit_files, table, results.files(table), this)
                            for table in (bronze.BRONZE, SILVER, QUARANTINE)))
        self.trade_ids.add(new_ids)
        with self.lake.writing(*GOLD_WRITES):
            self.lake.at_once(lambda: self.record_late(results.table(LATE), ledger, batch_id),
                              lambda: self.update_gold(merge_window_sums(results.tables(SUMS)), ledger, batch_id,
                                                       Write.ADD),
                              lambda: self.lake.publish(BATCH_WATERMARKS, ledger, this))
        return results.latest_event_time()

    # -- records read again, or a batch run again: the driver writes through MERGEs ----------------
    def write_on_driver(self, records: pa.Table, batch_id: int, ledger: pa.Table,
                        latest: datetime | None) -> datetime | None:
        """records: the batch's, as the Kafka source gives them. Returns the latest event time
        among silver's trades from them."""
        if records.num_rows == 0:
            return None
        rows = silver.parse_records(records)
        ingested_at = pa.scalar(datetime.now(timezone.utc), UTC_TIME)
        rows = rows.append_column("ingested_at", pa.repeat(ingested_at, rows.num_rows))
        trades = silver.silver_rows(rows)
        first_copies = one_per_key(trades, ["trade_id"], keep="first")
        # A trade_id's first copy wins, in the batch and in silver: a copy with another event
        # time conflicts (silver.conflict_reasons). Of the rest, those new to silver are judged
        # for a jump in time.
        _, in_batch, in_batch_reasons = silver.split_conflicts(trades, first_copies)
        first_copies, in_silver, in_silver_reasons = silver.split_conflicts(first_copies,
                                                                            self.first_copies_in_silver(first_copies))
        new = new_to_silver(first_copies, silver_matches(self.lake, first_copies))
        _, jumped, jump_reasons = silver.split_time_jumps(new, latest, self.settings.max_event_time_jump)
        rejected = [(t, r) for t, r in ((in_batch, in_batch_reasons), (in_silver, in_silver_reasons),
                                        (jumped, jump_reasons)) if t.num_rows]
        if rejected:
            rows = silver.with_reasons(rows, pa.concat_tables([t for t, _ in rejected]),
                                       pa.concat_arrays([r for _, r in rejected]))
            trades = silver.silver_rows(rows)
        this = self.batch(batch_id)
        # Records read again may have a new event time (a parser fixed since): they are matched
        # on trade_id over all of silver, not only among the batch's event times.
        read_again = trades.num_rows > 0 and self.has_records_in(SILVER, offset_ranges(trades))
        run_again = self.lake.published(SILVER, this)  # after a crash, before Spark recorded the batch done
        self.lake.publish(bronze.BRONZE, bronze.bronze_rows(rows), this)
        self.lake.publish(SILVER, trades, this, narrow=not read_again)
        self.lake.publish(QUARANTINE, silver.quarantine_rows(rows), this)
        kept = self.kept_by_silver(trades)
        self.trade_ids.add(trade_id_hashes(kept["trade_id"]).to_numpy())
        with self.lake.writing(*GOLD_WRITES):
            self.count_trades(kept, ledger, batch_id, recount=read_again or run_again)
            # Every batch that read records leaves its offsets and watermark in the ledger, even
            # when all its trades were too late and it changes no window.
            self.lake.publish(BATCH_WATERMARKS, ledger, this)
        return pc.max(kept["event_time"]).as_py() if kept.num_rows else None

    def first_copies_in_silver(self, trades: pa.Table) -> pa.Table:
        """Silver's rows (trade_id, event_time and Kafka record) of the trades' ids, at any event
        time: only those the id index says silver may hold are looked up."""
        columns = ["trade_id", "event_time", "topic", "partition", "offset"]
        known = self.trade_ids.known(trade_id_hashes(trades["trade_id"]).to_numpy())
        maybe = trades["trade_id"].filter(pa.array(known))
        if len(maybe) == 0:
            return SILVER.schema_of(columns).empty_table()
        if len(maybe) > 1000:  # many (records read again): one pass over silver beats a long IN list
            wanted = maybe.combine_chunks()
            return pa.Table.from_batches([batch.filter(pc.is_in(batch["trade_id"], value_set=wanted))
                                          for batch in self.lake.scan(SILVER, columns)], SILVER.schema_of(columns))
        ids = ", ".join(sql_literal(trade_id) for trade_id in maybe.to_pylist())
        return self.lake.read(SILVER, columns, f"{quote('trade_id')} IN ({ids})")

    def has_records_in(self, table: Table, ranges: pa.Table) -> bool:
        """Whether the table (keyed by Kafka record) already holds a record from these offset
        ranges: they are being read again (a replay, a fresh checkpoint, a batch run again)."""
        if ranges.num_rows == 0:
            return False
        found = self.lake.query(table, f"SELECT {quote('offset')} FROM t WHERE {in_offset_ranges(ranges)} LIMIT 1")
        return found is not None and found.num_rows > 0

    def kept_by_silver(self, trades: pa.Table) -> pa.Table:
        """Silver's rows of this batch's records: the trades it kept from them, so a redelivery
        of a trade silver already had is not among them."""
        if trades.num_rows == 0:
            return SILVER.schema_of(LATE_CANDIDATE_COLUMNS).empty_table()
        low, high = pc.min_max(trades["event_time"]).values()
        return self.lake.read(SILVER, LATE_CANDIDATE_COLUMNS,
                              f"({in_offset_ranges(offset_ranges(trades))}) AND "
                              f"{in_time_range('event_time', low.as_py(), high.as_py())}")

    def count_trades(self, kept: pa.Table, ledger: pa.Table, batch_id: int, recount: bool) -> None:
        """The trades silver kept: too late -> gold/late_trades; the others -> gold."""
        if kept.num_rows == 0:
            return
        late = too_late(kept, judged_watermark(ledger))
        self.record_late(kept.filter(late), ledger, batch_id)
        if recount:
            self.update_gold(self.recounted(kept), ledger, batch_id, Write.UPSERT)
        else:
            self.update_gold(window_sums(kept.filter(pc.invert(late)), self.settings.window), ledger, batch_id,
                             Write.ADD)

    def record_late(self, late: pa.Table, ledger: pa.Table, batch_id: int) -> None:
        """Too-late trades (LATE_CANDIDATE_COLUMNS) -> gold/late_trades."""
        if late.num_rows == 0:
            return
        rows = late.to_pandas().assign(watermark=pd.Timestamp(judged_watermark(ledger)))
        rows["late_by"] = rows["watermark"] - pd.to_datetime(rows["event_time"], utc=True)
        self.lake.publish(LATE_TRADES, late_trade_rows(rows, self.settings.window, datetime.now(timezone.utc)),
                          self.batch(batch_id))

    def update_gold(self, sums: pa.Table, ledger: pa.Table, batch_id: int, write: Write) -> None:
        """Window sums -> gold: added to its totals (Write.ADD) or setting them (UPSERT), with a
        correction for each window already past that changes."""
        if sums.num_rows == 0:
            return
        now, this = datetime.now(timezone.utc), self.batch(batch_id)
        current = self.lake.read(GOLD, where=in_time_range("window_start", pc.min(sums["window_start"]).as_py(),
                                                           pc.max(sums["window_start"]).as_py())).to_pandas()
        after = sums.to_pandas() if write is Write.UPSERT else added(current, sums.to_pandas())
        # Corrections before gold: they need the windows as they stood before this batch.
        watermark = judged_watermark(ledger)
        self.lake.publish(CORRECTIONS, find_corrections(current, after, watermark if watermark > EPOCH else None,
                                                        self.settings.watermark, now, batch_id, self.query_id), this)
        self.lake.publish(GOLD, gold_rows(sums, batch_id, now), this, write=write)

    def recounted(self, kept: pa.Table) -> pa.Table:
        """The windows these trades fall in, recounted from all of silver's trades in them."""
        window = self.settings.window
        starts = pc.unique(window_starts(kept["event_time"], window))
        low, high = pc.min(starts).as_py(), pc.max(starts).as_py() + window
        trades = self.lake.read(SILVER, ["trade_id", "side", "amount", "event_time"],
                                in_time_range("event_time", low, high, high_inclusive=False))
        late_ids = self.lake.read(LATE_TRADES, ["trade_id"],
                                  in_time_range("window_start", low, high, high_inclusive=False))["trade_id"]
        return recount(trades, late_ids, starts, window)
