"""The catalog: each Delta table of the pipeline as one value.

A `Table` says what the table is (its name under the data dir, its Arrow schema, its keys)
and how it is written (`Write`, and the MERGE's options). `store.Lake` is the one place that
turns a Table into a location and writes or reads it; nothing else spells a table's path.
The names and columns are the product's contract (../shared/PRODUCT.md): keep them stable.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

UTC_TIME = pa.timestamp("us", tz="UTC")
# Every table gains a small file in most micro-batches and is compacted by its writer every so
# many versions. The tables read whole (by the dashboard, the sinks): often, into one file.
# Bronze and silver, which gain a file all day and are read by range: less often, into files of
# a bounded size, so that a rewrite stays small, and so do their logs' checkpoints, which list
# every live file every 10 commits (docs/long-runs.md).
COMPACT_EVERY = 20
STREAM_COMPACT_EVERY = 100
STREAM_FILE_BYTES = 8 * 2**20
# Bronze and silver are partitioned by day, and compacted as above. The OPEN_DAYS newest days
# are still written to (late trades reach yesterday); a day before them is closed, and rolled
# once into files this large, so that a month's live files, which every commit through
# delta-rs pays for, stay a few thousand (partitions.py, docs/long-runs.md#sizing-a-month).
CLOSED_DAY_FILE_BYTES = 256 * 2**20
OPEN_DAYS = 2
# The partition column: the UTC date of the table's `day_of` time.
DAY = "day"
# Corrections and too-late trades gain rows with every late trade, for ever, and the page reads
# one day of them by the files' statistics: compacted into small files, a day stays in a few.
DAY_FILE_BYTES = 256 * 2**10
# How long older versions stay readable: Delta's log keeps each commit (and a checkpoint per
# 10) this long. Every table gains a version per micro-batch, and each commit, and each reader
# brought up to date, goes over every file in the log directory: the shorter the history, the
# cheaper (docs/long-runs.md). The in-app readers follow the latest version; a batch run again
# after a crash reads gold's last versions before it commits there.
HISTORY = "interval 30 seconds"
# How long the files a compaction replaced stay on disk, for a read of a version it loaded
# before (a long Spark job's): the writer's vacuum deletes them after this.
REPLACED_FILES_KEPT = "interval 15 minutes"
# A commit through delta-rs, and bringing an open table up to date, read the log from its last
# checkpoint on: at Delta's default of one per 100 commits a micro-batch's commits grew from 25
# to 100 ms between two checkpoints (docs/performance.md#freshness).
CHECKPOINT_INTERVAL = "10"


class Write(enum.Enum):
    """How a batch of rows lands in a table, once per (writer, batch) in every case."""

    # A key already in the table keeps its row; within a batch the first row of a key wins.
    FIRST_COPY_WINS = "first copy wins"
    # A key already in the table takes the batch's row (the last of the key in the batch).
    UPSERT = "upsert"
    # Rows keyed by the writer's own (query_id, batch_id): the batch's recorded transaction
    # already keeps them unique, so they are appended without reading the table. Rows keyed
    # otherwise (a backfill's) are merged as FIRST_COPY_WINS.
    APPEND_ONCE_PER_BATCH = "append once per batch"
    # A key already in the table has the batch's `sums` added to its own (a running total; the
    # other columns take the batch's values); a new key is inserted.
    ADD = "add"


@dataclass(frozen=True)
class Table:
    name: str  # its path under the data dir: the contract's table name
    schema: pa.Schema
    keys: tuple[str, ...]
    write: Write
    # UPSERT: counter columns set to target + 1 when a key is updated (e.g. a revision number).
    bump: tuple[str, ...] = ()
    # FIRST_COPY_WINS: still replace a matched row when this holds (t. = target, s. = source).
    replace_when: str | None = None
    # Columns a matching row also has the same value in (a trade's event time, with its id).
    # Not keys, but the MERGE matches on them too, so it reads only the files whose statistics
    # overlap the batch's range of them: a table keyed by random ids is otherwise read whole.
    narrow_on: tuple[str, ...] = ()
    compact_every: int | None = None  # rewrite the small files every this many versions
    compact_to: int | None = None  # into files of about this many bytes (None: delta-rs's 100 MB)
    history: str = HISTORY  # Delta's interval: the log is kept this long
    replaced_files_kept: str = REPLACED_FILES_KEPT  # and the files a compaction replaced, this long
    sums: tuple[str, ...] = ()  # ADD: the columns added to the table's values
    # Partitioned by DAY, the UTC date of this time column: stored beside `schema`'s columns,
    # added by the lake as rows are written, read by those who ask for it.
    day_of: str | None = None
    # A small table keyed by one column: its MERGEs rewrite the few files their keys fall in,
    # without delta-rs's engine (merges.py).
    merge_by_rewrite: bool = False

    @property
    def columns(self) -> list[str]:
        return self.schema.names

    @property
    def partition_by(self) -> tuple[str, ...]:
        return (DAY,) if self.day_of else ()

    @property
    def delta_properties(self) -> dict[str, str]:
        """The Delta properties the lake gives the table: its checkpoints and its history."""
        return {"delta.checkpointInterval": CHECKPOINT_INTERVAL, "delta.logRetentionDuration": self.history,
                "delta.deletedFileRetentionDuration": self.replaced_files_kept}

    @property
    def stored_schema(self) -> pa.Schema:
        """The Delta table's schema: its columns and its partition column."""
        return self.schema.append(pa.field(DAY, pa.date32())) if self.day_of else self.schema

    def schema_of(self, columns: Sequence[str]) -> pa.Schema:
        """The schema of these of its columns (the partition column too), in this order."""
        return pa.schema([self.stored_schema.field(c) for c in columns])

    def stored_rows(self, rows: pa.Table) -> pa.Table:
        """Rows in the table's columns as they are stored: with their day, if it is partitioned."""
        if rows.schema.equals(self.stored_schema):
            return rows  # stored already (a publish hands its rows on to write_files)
        rows = rows.select(self.columns).cast(self.schema)
        if not self.day_of:
            return rows
        return rows.append_column(DAY, pc.cast(rows[self.day_of], pa.date32()))


def same_values(columns: tuple[str, ...]) -> str:
    """A MERGE condition: target and source agree on these columns."""
    return " AND ".join(f't."{c}" = s."{c}"' for c in columns)


KAFKA_RECORD = ("topic", "partition", "offset")
# Bronze and quarantine tell records apart by their Kafka time too: a broker that lost its tail
# gives the same offsets out again, to other records (read with --fail-on-data-loss false).

BRONZE = Table(
    "bronze/trades_raw",
    pa.schema([
        ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
        ("offset", pa.int64()), ("timestamp", UTC_TIME), ("ingested_at", UTC_TIME),
    ]),
    keys=(*KAFKA_RECORD, "timestamp"), write=Write.FIRST_COPY_WINS, narrow_on=(DAY,),
    compact_every=STREAM_COMPACT_EVERY, compact_to=STREAM_FILE_BYTES, day_of="timestamp",
)

SILVER = Table(
    "silver/trades",
    pa.schema([
        ("trade_id", pa.string()), ("account_id", pa.string()), ("symbol", pa.string()), ("side", pa.string()),
        ("quantity", pa.int64()), ("price", pa.float64()), ("amount", pa.float64()), ("channel", pa.string()),
        ("event_time", UTC_TIME), ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
        ("kafka_timestamp", UTC_TIME), ("ingested_at", UTC_TIME),
        # How far behind the stream's front the trade arrived, in microseconds, as the batch that
        # kept it judged (medallion/lateness.py; null in rows written before it was recorded).
        ("lateness_us", pa.int64()),
    ]),
    # The first copy of a trade wins; the same Kafka record read again (a replay after a fix)
    # replaces its own row with the new parse. A redelivered copy has its first copy's event
    # time too, so the MERGE looks for it only among the batch's event times.
    keys=("trade_id",), write=Write.FIRST_COPY_WINS, replace_when=same_values(KAFKA_RECORD),
    narrow_on=(DAY, "event_time"), compact_every=STREAM_COMPACT_EVERY, compact_to=STREAM_FILE_BYTES,
    day_of="event_time",
)

# The raw value stays binary: it may not be UTF-8, and Arrow readers reject invalid strings.
QUARANTINE = Table(
    "silver/quarantine",
    pa.schema([
        ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
        ("offset", pa.int64()), ("kafka_timestamp", UTC_TIME), ("reason", pa.string()), ("ingested_at", UTC_TIME),
    ]),
    keys=(*KAFKA_RECORD, "kafka_timestamp"), write=Write.UPSERT, compact_every=COMPACT_EVERY,
    compact_to=STREAM_FILE_BYTES,  # the page sums up each file once: one file of all is re-read per compaction
)

# Gold is the stream's state: each micro-batch adds the sums of the trades it newly counted
# (Write.ADD); a recount or a backfill sets a window (UPSERT). revision counts a window's updates.
GOLD = Table(
    "gold/trade_summary",
    pa.schema([
        ("window_start", UTC_TIME), ("window_end", UTC_TIME), ("buy_amount", pa.float64()),
        ("sell_amount", pa.float64()), ("settlement_amount", pa.float64()), ("trade_count", pa.int64()),
        ("revision", pa.int64()), ("updated_at", UTC_TIME), ("batch_id", pa.int64()),
    ]),
    keys=("window_start",), write=Write.UPSERT, bump=("revision",), compact_every=COMPACT_EVERY,
    sums=("buy_amount", "sell_amount", "settlement_amount", "trade_count"), merge_by_rewrite=True,
)

CORRECTIONS = Table(
    "gold/corrections",
    pa.schema([
        ("window_start", UTC_TIME), ("window_end", UTC_TIME),
        ("buy_amount_before", pa.float64()), ("buy_amount_after", pa.float64()),
        ("sell_amount_before", pa.float64()), ("sell_amount_after", pa.float64()),
        ("settlement_amount_before", pa.float64()), ("settlement_amount_after", pa.float64()),
        ("trade_count_before", pa.int64()), ("trade_count_after", pa.int64()),
        ("late_trades", pa.int64()), ("corrected_at", UTC_TIME), ("watermark", UTC_TIME),
        ("batch_id", pa.int64()), ("query_id", pa.string()),
    ]),
    keys=("query_id", "batch_id", "window_start"), write=Write.APPEND_ONCE_PER_BATCH, compact_every=COMPACT_EVERY,
    compact_to=DAY_FILE_BYTES,
)

# One row per (gold query, batch, topic partition): the offsets it read, the watermark its
# late input was judged against (lateness.py) and how many of them Kafka had lost (losses.py).
BATCH_WATERMARKS = Table(
    "gold/batch_watermarks",
    pa.schema([
        ("query_id", pa.string()), ("batch_id", pa.int64()), ("topic", pa.string()), ("partition", pa.int32()),
        ("start_offset", pa.int64()), ("end_offset", pa.int64()), ("watermark", UTC_TIME),
        ("records_lost", pa.int64()),  # of the range, removed by Kafka before the batch read them (losses.py)
        # The latest event time before the batch, which the watermark trails (null before any, and
        # in rows written before it was recorded): a trade's lateness is measured from it (lateness.py).
        ("front", UTC_TIME),
        # The watermark an idle close set (--close-idle-after), in force for the batch: its trades at
        # or before it are too late whatever the delay (null: none). lateness.py.
        ("closed_to", UTC_TIME),
    ]),
    keys=("query_id", "batch_id", "topic", "partition"), write=Write.APPEND_ONCE_PER_BATCH,
    compact_every=COMPACT_EVERY,
)

LATE_TRADES = Table(
    "gold/late_trades",
    pa.schema([
        ("trade_id", pa.string()), ("event_time", UTC_TIME), ("window_start", UTC_TIME), ("window_end", UTC_TIME),
        ("watermark", UTC_TIME), ("late_by_seconds", pa.float64()), ("side", pa.string()), ("amount", pa.float64()),
        ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("detected_at", UTC_TIME),
        ("backfilled_at", UTC_TIME),  # set when a backfill (reconcile.py) put the trade into gold
    ]),
    keys=("trade_id",), write=Write.FIRST_COPY_WINS, compact_every=COMPACT_EVERY, compact_to=DAY_FILE_BYTES,
)

# Gold's change history: a row per change of a window, its values after it, when and why
# (medallion/history.py). Kept with the data, by the day of the window, so the chart as it
# stood at any instant lasts as long as gold does, whatever Delta's log retention.
SUMMARY_HISTORY = Table(
    "gold/summary_history",
    pa.schema([
        ("window_start", UTC_TIME), ("window_end", UTC_TIME), ("buy_amount", pa.float64()),
        ("sell_amount", pa.float64()), ("settlement_amount", pa.float64()), ("trade_count", pa.int64()),
        ("changed_at", UTC_TIME), ("cause", pa.string()), ("batch_id", pa.int64()), ("query_id", pa.string()),
    ]),
    keys=("query_id", "batch_id", "window_start"), write=Write.APPEND_ONCE_PER_BATCH, compact_every=COMPACT_EVERY,
    compact_to=DAY_FILE_BYTES, day_of="window_start",
)

# Every table, in the order their locks are taken (store.Lake.writing).
ALL = (BRONZE, SILVER, QUARANTINE, GOLD, CORRECTIONS, BATCH_WATERMARKS, LATE_TRADES, SUMMARY_HISTORY)
# The tables the sink's gold step writes as one step: a reader holding their locks (the
# reconciliation, a backfill, the page) sees them all at the same batch.
GOLD_WRITES = (GOLD, CORRECTIONS, BATCH_WATERMARKS, LATE_TRADES, SUMMARY_HISTORY)
# Those the page's view is made from: a live gold step settles them before its ledger is in.
GOLD_VIEW = (GOLD, CORRECTIONS, LATE_TRADES, SUMMARY_HISTORY)
