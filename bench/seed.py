"""Seeding a lake of some age, fast, for the long run (long_run.py): a month of trades written
straight into bronze, silver and gold, as the pipeline would have written them, without Kafka or Spark.

The trades look like the simulator's (streaming/simulation/market.py: its symbols and their price
walk, accounts, sides, quantities and channels), each with its own trade_id, spread evenly over the
market hours of `days` trading days that end the day before the bench's live day (load.BENCH_DAY),
their Kafka and ingestion times over as many days of wall time up to now. They are generated a
chunk at a time as Kafka records (key, JSON value, topic, partition, offset, timestamp) and go
through the product's own row builders: silver.arrow.parse_records (every one must be a valid
trade), bronze.bronze_rows, silver.arrow.silver_rows, gold.window_sums and gold_step.gold_rows.
Each chunk is appended to bronze and silver in one commit each, in files of the size the
pipeline's compaction makes (COMPACTED_SHARE), through the tables' Lake locations; the chunks'
last, smaller files are then compacted as the pipeline would have (settle). Gold gets the
month's window sums at the end. A real lake of that age holds nothing else that the pipeline
reads at start or per batch (the ledger, corrections and late trades are read on demand or only
for the windows a batch touches, which are all on the live day).

The seeded records carry the live topic's name on partitions the live topic does not have
(PARTITIONS .. 2 * PARTITIONS - 1). The live run starts with a fresh checkpoint on a fresh topic,
whose offsets start at 0 on partitions 0 .. PARTITIONS - 1: the sink's read-before check
(sink/read_before.py: does bronze hold a record at or after the batch's start offsets in its
partitions?) then finds none, and the live batches take the tasks' path, as they would on the
real month's lake, instead of being sent through the driver's MERGEs by offsets seeded on the
same partitions.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import time
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, Transaction, write_deltalake

from bench.load import BENCH_DAY, PARTITIONS
from streaming.config import Settings
from streaming.lake import tables
from streaming.lake.locations import local_path
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import UTC_TIME, Table
from streaming.medallion.bronze import bronze_rows
from streaming.medallion.gold import merge_window_sums, window_sums
from streaming.medallion.silver.arrow import parse_records, silver_rows
from streaming.simulation.market import ACCOUNTS, CHANNEL_WEIGHTS, CHANNELS, SYMBOLS, market_open_on
from streaming.sink.gold_step import gold_rows

log = logging.getLogger("bench")
SEED_WRITER = "bench-seed"  # the writer its commits record (Batch.app_id), as a query id would be
MARKET_US = 8 * 3600 * 1_000_000  # 09:00-17:00, the simulator's market hours
INGEST_DELAY = timedelta(milliseconds=400)  # Kafka time -> ingested_at: about a live batch's
# The pipeline's compaction (Lake._compact_now_and_then) bins up to Table.compact_to bytes of its
# small snappy files at a time, which rewritten together come to about 55% of it (measured: 4.4-4.5
# MB for 8 MiB, bronze and silver alike); delta-rs's writer, given a target, makes files of about 85%
# of it. The seeded files are written to the size the compaction makes.
COMPACTED_SHARE = 0.62
_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)
_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd: i -> (i * _MIX) ^ _SALT is one-to-one on 64 bits
_SALT = np.uint64(0xD1B54A32D192ED03)


@dataclass(frozen=True)
class SeedPlan:
    trades: int
    days: int
    topic: str
    wall_end: datetime  # when the seeded month ended, in wall time (Kafka and ingestion times)
    last_day: date = BENCH_DAY - timedelta(days=1)  # the live run trades on BENCH_DAY
    seed: int = 5

    @property
    def per_day(self) -> int:
        return math.ceil(self.trades / self.days)

    @property
    def first_day(self) -> date:
        return self.last_day - timedelta(days=self.days - 1)


def _micros(moment: datetime) -> int:
    return int(moment.timestamp()) * 1_000_000 + moment.microsecond


def _strings(chars: np.ndarray) -> pa.Array:
    """Rows of a 2-D uint8 array of ASCII -> a string array, without a Python object per row."""
    count, width = chars.shape
    offsets = np.arange(0, (count + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), count, [None, pa.py_buffer(offsets),
                                                      pa.py_buffer(np.ascontiguousarray(chars).tobytes())])


def trade_ids(index: np.ndarray, rng: np.random.Generator) -> pa.Array:
    """32 hex digits per trade, as uuid4().hex looks: 64 random bits, then 64 bits that are a
    one-to-one mix of the trade's index (so no two seeded trades share an id)."""
    high = rng.integers(0, 2**64 - 1, len(index), dtype=np.uint64, endpoint=True)
    low = (index.astype(np.uint64) * _MIX) ^ _SALT
    raw = np.stack([high, low], axis=1).astype(">u8").view(np.uint8).reshape(len(index), 16)
    chars = np.empty((len(index), 32), np.uint8)
    chars[:, 0::2], chars[:, 1::2] = _HEX[raw >> 4], _HEX[raw & 15]
    return _strings(chars)


@dataclass
class SeedTrades:
    """The plan's trades as Kafka records, a chunk at a time, in order: the price walk and the
    partitions' next offsets carry over from one chunk to the next."""

    plan: SeedPlan
    rng: np.random.Generator = field(init=False)
    prices: np.ndarray = field(init=False)
    next_offset: np.ndarray = field(init=False)

    def __post_init__(self):
        self.rng = np.random.default_rng(self.plan.seed)
        self.prices = np.array(list(SYMBOLS.values()), np.float64)
        self.next_offset = np.zeros(PARTITIONS, np.int64)

    def records(self, start: int, count: int) -> pa.Table:
        """Trades start .. start + count - 1 as Kafka records (tasks_writes.KAFKA_RECORDS' columns)."""
        plan, rng = self.plan, self.rng
        index = np.arange(start, start + count, dtype=np.int64)
        day, per_day = index // plan.per_day, plan.per_day
        in_day = np.minimum(per_day, plan.trades - day * per_day)
        opening = _micros(market_open_on(plan.first_day))
        event_ms = (opening + day * 86_400_000_000 + (index - day * per_day) * MARKET_US // in_day) // 1000
        span_ms = plan.days * 86_400_000
        wall_ms = int(plan.wall_end.timestamp() * 1000) - span_ms + index * span_ms // plan.trades

        symbol = rng.integers(0, len(SYMBOLS), count)
        steps = 1 + rng.normal(0, 0.0008, count)
        price = np.empty(count)
        for s in range(len(SYMBOLS)):
            mine = symbol == s
            if mine.any():
                walk = np.maximum(1.0, self.prices[s] * np.cumprod(steps[mine]))
                price[mine], self.prices[s] = walk, walk[-1]
        account = rng.integers(1, ACCOUNTS + 1, count)
        quantity = np.maximum(1, rng.lognormal(3.0, 1.0, count).astype(np.int64))
        side = np.where(rng.random(count) < 0.52, 0, 1)
        channel = rng.choice(len(CHANNELS), count, p=np.array(CHANNEL_WEIGHTS) / sum(CHANNEL_WEIGHTS))

        accounts = pc.take(pa.array([f"ACC-{i:05d}" for i in range(ACCOUNTS + 1)]), account)
        event_time = pc.strftime(pa.array(event_ms).cast(pa.timestamp("ms", tz="UTC")), format="%Y-%m-%dT%H:%M:%SZ")
        value = pc.binary_join_element_wise(
            '{"trade_id":"', trade_ids(index, rng), '","account_id":"', accounts,
            '","symbol":"', pc.take(pa.array(list(SYMBOLS)), symbol),
            '","side":"', pc.take(pa.array(["BUY", "SELL"]), side),
            '","quantity":', pc.cast(pa.array(quantity), pa.string()), ',"price":',
            pc.cast(pa.array(np.round(price, 2)), pa.string()), ',"channel":"', pc.take(pa.array(CHANNELS), channel),
            '","event_time":"', event_time, '"}', "")
        # Kafka's default partitioner sends one key to one partition: here, by account.
        partition = account % PARTITIONS
        offset = np.empty(count, np.int64)
        for p in range(PARTITIONS):
            mine = partition == p
            offset[mine] = self.next_offset[p] + np.arange(int(mine.sum()))
            self.next_offset[p] += int(mine.sum())
        return pa.table({
            "key": accounts.cast(pa.binary()), "value": value.cast(pa.binary()),
            "topic": pc.take(pa.array([plan.topic]), np.zeros(count, np.int64)),
            "partition": pa.array(partition + PARTITIONS, pa.int32()), "offset": pa.array(offset),
            "timestamp": pa.array(wall_ms * 1000).cast(pa.timestamp("us", tz="UTC")),
        })


def parsed_rows(records: pa.Table) -> pa.Table:
    """Kafka records -> parse_records' rows with ingested_at, as the pipeline's tasks have them;
    every record must be a valid trade."""
    parsed = parse_records(records)
    bad = parsed.num_rows - pc.sum(pc.is_null(parsed["reason"]).cast(pa.int64())).as_py()
    if bad:
        raise RuntimeError(f"{bad} seeded records are not valid trades: {pc.drop_null(parsed['reason'])[0]}")
    delay = pa.scalar(INGEST_DELAY, pa.duration("us"))
    return parsed.append_column("ingested_at", pc.add(parsed["kafka_timestamp"], delay).cast(UTC_TIME))


def _append(lake: Lake, table: Table, rows: pa.Table, chunk: int) -> None:
    commit = CommitProperties(app_transactions=[Transaction(app_id=Batch(SEED_WRITER, chunk).app_id(table),
                                                            version=chunk)])
    opened = lake.open(table)
    assert opened is not None  # made by ensure()
    size = int(table.compact_to * COMPACTED_SHARE) if table.compact_to else None
    write_deltalake(opened, table.stored_rows(rows), mode="append", target_file_size=size, commit_properties=commit)


def table_bytes(lake: Lake, table: Table) -> int:
    """Bytes on disk under the table's location (data files and log)."""
    root = local_path(lake.location(table))
    return sum(f.stat().st_size for f in Path(root).rglob("*") if f.is_file())


@dataclass
class SeedResult:
    trades: int = 0
    windows: int = 0
    seconds: float = 0.0
    bytes: dict = field(default_factory=dict)  # table name -> bytes on disk
    files: dict = field(default_factory=dict)  # table name -> data files in its latest version
    disk_free_before: int = 0
    disk_free_after: int = 0


def seed_lake(data_dir: Path, plan: SeedPlan, chunk: int = 1_000_000) -> SeedResult:
    """Bronze, silver and gold of `plan` under data_dir, a chunk of trades at a time; a line per chunk."""
    lake, result, began = Lake(data_dir), SeedResult(), time.perf_counter()
    data_dir.mkdir(parents=True, exist_ok=True)
    result.disk_free_before = shutil.disk_usage(data_dir).free
    for table in (tables.BRONZE, tables.SILVER, tables.GOLD):
        lake.ensure(table)
    trades, sums, chunks = SeedTrades(plan), [], math.ceil(plan.trades / chunk)
    for k, start in enumerate(range(0, plan.trades, chunk)):
        count = min(chunk, plan.trades - start)
        rows = parsed_rows(trades.records(start, count))
        silver = silver_rows(rows)
        _append(lake, tables.BRONZE, bronze_rows(rows), k)
        _append(lake, tables.SILVER, silver, k)
        sums.append(window_sums(silver, Settings.window))
        first, last = pc.min_max(silver["event_time"]).values()
        result.trades += silver.num_rows
        elapsed = time.perf_counter() - began
        log.info("  seed chunk %d/%d: %s trades in all, %s .. %s, %.1f s, %s trades/s", k + 1, chunks,
                 f"{result.trades:,}", f"{first.as_py():%Y-%m-%d %H:%M}", f"{last.as_py():%Y-%m-%d %H:%M}",
                 elapsed, f"{result.trades / elapsed:,.0f}")
        del rows, silver
    gold = merge_window_sums(sums)
    lake.publish(tables.GOLD, gold_rows(gold, 0, plan.wall_end), Batch(SEED_WRITER, 0))
    result.windows = gold.num_rows
    for table in (tables.BRONZE, tables.SILVER):
        settle(lake, table, plan.wall_end.date())
    result.seconds = time.perf_counter() - began
    for table in (tables.BRONZE, tables.SILVER, tables.GOLD):
        result.bytes[table.name] = table_bytes(lake, table)
        opened = lake.open(table)
        result.files[table.name] = len(opened.file_uris()) if opened is not None else 0
    os.sync()
    result.disk_free_after = shutil.disk_usage(data_dir).free
    return result


def settle(lake: Lake, table: Table, today: date) -> None:
    """What the pipeline's own compaction, roll and vacuum would have left: each chunk's last,
    smaller file folded into its neighbours, the closed days rolled into large files, and the
    files they replaced deleted."""
    opened = lake.open(table)
    assert opened is not None
    opened.optimize.compact(target_size=table.compact_to)
    lake.roll_closed_days(table, today)
    compacted = lake.open(table)
    assert compacted is not None
    compacted.vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False, full=True)


def wall_now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0) - timedelta(hours=1)
