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

Gold's change history (gold/summary_history) gets each window's changes as the pipeline would
have made them (`HistoryPlan`, `history_rows`): at its design rate, two micro-batches a wall
second on the simulator's market at 60x, a 15-minute window fills in 15 wall seconds and changes
about 30 times while it is open, a running total up to its gold values; a few windows change
again later (late trades). Gold's rows take their last change's time and count. A day's history
is one commit, compacted and its closed days rolled as the pipeline leaves them (settle).

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
from typing import Callable

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
from streaming.medallion.gold import MEASURES, merge_window_sums, window_sums
from streaming.medallion.history import LATE, ON_TIME, as_of, in_change_order
from streaming.medallion.silver.arrow import parse_records, silver_rows
from streaming.simulation.market import ACCOUNTS, CHANNEL_WEIGHTS, CHANNELS, SYMBOLS, market_open_on
from streaming.sink.gold_step import gold_rows

log = logging.getLogger("bench")
SEED_WRITER = "bench-seed"  # the writer its commits record (Batch.app_id), as a query id would be
MARKET_US = 8 * 3600 * 1_000_000  # 09:00-17:00, the simulator's market hours
DAY_US = 24 * 3600 * 1_000_000
INGEST_DELAY = timedelta(milliseconds=400)  # Kafka time -> ingested_at: about a live batch's
# The pipeline's compaction (partitions.compact_now_and_then) bins up to Table.compact_to bytes of its
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
    around_the_clock: bool = False  # trades over the whole UTC day rather than the market hours

    @property
    def per_day(self) -> int:
        return math.ceil(self.trades / self.days)

    @property
    def trading_us(self) -> int:
        return DAY_US if self.around_the_clock else MARKET_US

    def opening(self, day: date) -> datetime:
        return datetime.combine(day, datetime.min.time(), timezone.utc) if self.around_the_clock \
            else market_open_on(day)

    def wall_start(self, day_index: int) -> datetime:
        """When, in wall time, the day's first trade was sent: the days' Kafka times follow one
        another over `days` days of wall time up to wall_end."""
        return self.wall_end - timedelta(days=self.days - day_index)

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
        """Trades start .. start + count - 1 as Kafka records (range_reader.KAFKA_RECORDS' columns)."""
        plan, rng = self.plan, self.rng
        index = np.arange(start, start + count, dtype=np.int64)
        day, per_day = index // plan.per_day, plan.per_day
        in_day = np.minimum(per_day, plan.trades - day * per_day)
        opening = _micros(plan.opening(plan.first_day))
        event_ms = (opening + day * DAY_US + (index - day * per_day) * plan.trading_us // in_day) // 1000
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


def append_chunk(lake: Lake, table: Table, rows: pa.Table, chunk: int, writer: str = SEED_WRITER) -> None:
    commit = CommitProperties(app_transactions=[Transaction(app_id=Batch(writer, chunk).app_id(table),
                                                            version=chunk)])
    opened = lake.open(table)
    assert opened is not None  # made by ensure()
    size = int(table.compact_to * COMPACTED_SHARE) if table.compact_to else None
    write_deltalake(opened, table.stored_rows(rows), mode="append", target_file_size=size, commit_properties=commit)


# -- gold's change history ----------------------------------------------------------------------
@dataclass(frozen=True)
class HistoryPlan:
    """How the pipeline would have changed each window: `batches_per_second` micro-batches a wall
    second, on a market `speed` times faster than the wall clock, so a window changes about
    window / speed * batches_per_second times while it is open (30 at the design rate, 1,800 in
    real time); `late_share` of the windows change 1 .. `most_late` times more after they
    closed, within the watermark (late trades)."""

    batches_per_second: float = 2.0
    speed: float = 60.0
    late_share: float = 0.02
    most_late: int = 3
    window: timedelta = Settings.window
    watermark: timedelta = Settings.watermark
    seed: int = 11

    @property
    def on_time_changes(self) -> int:
        return max(1, round(self.window.total_seconds() / self.speed * self.batches_per_second))

    @property
    def batch_us(self) -> int:
        return round(1_000_000 / self.batches_per_second)

    @property
    def batches_per_day(self) -> int:
        return DAY_US // self.batch_us


DESIGN_RATE = HistoryPlan()
REAL_TIME = HistoryPlan(speed=1.0)  # the market at the wall clock's pace: ~1,800 changes a window


def _group_cumsum(values: np.ndarray, first: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Running sums of `values` restarting at each group's first row (rows grouped, in order)."""
    total = np.cumsum(values)
    return total - (total - values)[first][group]


def history_rows(windows: pa.Table, plan: HistoryPlan, wall_open: datetime, rng: np.random.Generator,
                 first_batch: int = 0, query_id: str = SEED_WRITER) -> pa.Table:
    """The change history of some windows of one day (gold rows: window_start, window_end and
    MEASURES, their final values), by window and in change order. The day's market ran from its
    first window's start at plan.speed, its first batch at `wall_open`: each window changes once a
    batch while it is open (fewer if it has fewer trades), its values a running total up to its
    own; a late window changes again after it closed, within the watermark. Batch n of the day
    is first_batch + n and ends at wall_open + n batches; a change is made within its batch."""
    count = windows.num_rows
    if count == 0:
        return tables.SUMMARY_HISTORY.schema.empty_table()
    starts = windows["window_start"].cast(UTC_TIME).cast(pa.int64()).to_numpy()
    ends = windows["window_end"].cast(UTC_TIME).cast(pa.int64()).to_numpy()
    trades = windows["trade_count"].cast(pa.int64()).to_numpy()
    late = np.where(rng.random(count) < plan.late_share, rng.integers(1, plan.most_late + 1, count), 0)
    # Each change adds a trade at least: a window of few trades changes fewer times.
    late = np.minimum(late, np.maximum(trades - 1, 0))
    on_time = np.maximum(1, np.minimum(plan.on_time_changes, trades - late))
    changes = on_time + late
    group = np.repeat(np.arange(count), changes)
    first = np.cumsum(changes) - changes
    nth = np.arange(len(group)) - first[group]
    is_late = nth >= on_time[group]

    # Batches: on time, evenly over the window's wall time; late, a few batches apart, within the watermark.
    opened = ((starts - starts.min()) / plan.speed / plan.batch_us).astype(np.int64)
    window_batches = np.maximum(1, ((ends - starts) / plan.speed / plan.batch_us).astype(np.int64))
    gap = np.maximum(1, window_batches // on_time)
    late_span = max(1, int(plan.watermark.total_seconds() * 1e6 / plan.speed / plan.batch_us) // plan.most_late)
    steps = np.where(is_late, rng.integers(1, late_span + 1, len(group)), gap[group])
    batch = opened[group] + _group_cumsum(steps, first, group)
    made = _micros(wall_open) + batch * plan.batch_us - plan.batch_us + rng.integers(0, plan.batch_us, len(group))

    # Values: a running total of steady batches (late ones add a few trades), ending at the window's.
    weight = np.where(is_late, rng.uniform(0.001, 0.01, len(group)), rng.uniform(0.5, 1.5, len(group)))
    share = _group_cumsum(weight, first, group)
    last = first + changes - 1
    share = share / share[last][group]
    count_after = nth + 1 + np.floor((trades - changes)[group] * share).astype(np.int64)
    final = {m: windows[m].to_numpy() for m in MEASURES}
    values = {m: final[m][group] * share for m in ("buy_amount", "sell_amount")}
    values["settlement_amount"] = values["buy_amount"] - values["sell_amount"]
    values["trade_count"] = count_after
    for m in MEASURES:  # the last change is the window's gold row, to the bit
        values[m][last] = final[m]
    take = pa.array(group)
    return pa.table({
        "window_start": windows["window_start"].take(take), "window_end": windows["window_end"].take(take),
        **values,
        "changed_at": pa.array(made).cast(UTC_TIME),
        "cause": pa.array(np.where(is_late, LATE, ON_TIME)),
        "batch_id": pa.array(first_batch + batch),
        "query_id": pa.array(np.full(len(group), query_id)),
    }).cast(tables.SUMMARY_HISTORY.schema)


def stamped(gold: pa.Table, history: pa.Table) -> pa.Table:
    """Gold rows as the gold step leaves them beside its history: each window's updated_at its
    last change's time, its revision the number of its changes."""
    if history.num_rows == 0:
        return gold
    ordered = in_change_order(history)
    latest = as_of(ordered, None)
    _, changes = np.unique(ordered["window_start"].to_numpy(), return_counts=True)
    found = pa.table({"window_start": latest["window_start"], "changed_at": latest["changed_at"],
                      "changes": pa.array(changes, pa.int64())})
    joined = gold.join(found, "window_start", join_type="left outer").sort_by("window_start")
    return joined.set_column(joined.schema.get_field_index("updated_at"), "updated_at",
                             pc.coalesce(joined["changed_at"], joined["updated_at"])) \
        .set_column(joined.schema.get_field_index("revision"), "revision",
                    pc.coalesce(joined["changes"], joined["revision"])).select(gold.column_names).cast(gold.schema)


def seed_history(lake: Lake, plan: SeedPlan, gold: pa.Table, history: HistoryPlan,
                 writer: str = SEED_WRITER) -> pa.Table:
    """The history of `gold`'s windows (of the plan's days) into gold/summary_history, a commit
    per day; all of it."""
    rng, written = np.random.default_rng(history.seed + plan.seed), []
    days = pc.cast(gold["window_start"], pa.date32())
    for index in range(plan.days):
        day = plan.first_day + timedelta(days=index)
        windows = gold.filter(pc.equal(days, pa.scalar(day, pa.date32())))
        rows = history_rows(windows, history, plan.wall_start(index), rng,
                            first_batch=index * history.batches_per_day, query_id=writer)
        if rows.num_rows:
            append_chunk(lake, tables.SUMMARY_HISTORY, rows, index, writer)
            written.append(rows)
    return pa.concat_tables([tables.SUMMARY_HISTORY.schema.empty_table(), *written])


def seed_gold_day(data_dir: Path, plan: SeedPlan, history: HistoryPlan, writer: str, chunk: int = 1_000_000) -> int:
    """Gold and its history, not bronze or silver, of a plan's trades (its own `writer`, so that
    it can be added to a seeded lake), the history's closed days rolled; the changes written."""
    lake, trades, sums = Lake(data_dir), SeedTrades(plan), []
    for table in (tables.GOLD, tables.SUMMARY_HISTORY):
        lake.ensure(table)
    for start in range(0, plan.trades, chunk):
        sums.append(window_sums(silver_rows(parsed_rows(trades.records(start, min(chunk, plan.trades - start)))),
                                Settings.window))
    gold = gold_rows(merge_window_sums(sums), 0, plan.wall_end)
    changes = seed_history(lake, plan, gold, history, writer)
    lake.publish(tables.GOLD, stamped(gold, changes), Batch(writer, 0))
    settle(lake, tables.SUMMARY_HISTORY, plan.wall_end.date())
    return changes.num_rows


def table_bytes(lake: Lake, table: Table) -> int:
    """Bytes on disk under the table's location (data files and log)."""
    root = local_path(lake.location(table))
    return sum(f.stat().st_size for f in Path(root).rglob("*") if f.is_file())


@dataclass
class SeedResult:
    trades: int = 0
    windows: int = 0
    changes: int = 0  # rows of gold's history
    seconds: float = 0.0
    bytes: dict = field(default_factory=dict)  # table name -> bytes on disk
    files: dict = field(default_factory=dict)  # table name -> data files in its latest version
    disk_free_before: int = 0
    disk_free_after: int = 0


SEEDED = (tables.BRONZE, tables.SILVER, tables.GOLD, tables.SUMMARY_HISTORY)


def seed_lake(data_dir: Path, plan: SeedPlan, chunk: int = 1_000_000,
              history: HistoryPlan | None = DESIGN_RATE,
              judge: Callable[[pa.Table, int], pa.Table] | None = None) -> SeedResult:
    """Bronze, silver, gold and gold's history (unless `history` is None) of `plan` under
    data_dir, a chunk of trades at a time; a line per chunk. judge: (a chunk's silver rows, the
    chunk's number) -> those rows with their lateness, as a query would have stamped them (else
    left null)."""
    lake, result, began = Lake(data_dir), SeedResult(), time.perf_counter()
    data_dir.mkdir(parents=True, exist_ok=True)
    result.disk_free_before = shutil.disk_usage(data_dir).free
    for table in SEEDED:
        lake.ensure(table)
    trades, sums, chunks = SeedTrades(plan), [], math.ceil(plan.trades / chunk)
    for k, start in enumerate(range(0, plan.trades, chunk)):
        count = min(chunk, plan.trades - start)
        rows = parsed_rows(trades.records(start, count))
        silver = silver_rows(rows) if judge is None else judge(silver_rows(rows), k)
        append_chunk(lake, tables.BRONZE, bronze_rows(rows), k)
        append_chunk(lake, tables.SILVER, silver, k)
        sums.append(window_sums(silver, Settings.window))
        first, last = pc.min_max(silver["event_time"]).values()
        result.trades += silver.num_rows
        elapsed = time.perf_counter() - began
        log.info("  seed chunk %d/%d: %s trades in all, %s .. %s, %.1f s, %s trades/s", k + 1, chunks,
                 f"{result.trades:,}", f"{first.as_py():%Y-%m-%d %H:%M}", f"{last.as_py():%Y-%m-%d %H:%M}",
                 elapsed, f"{result.trades / elapsed:,.0f}")
        del rows, silver
    gold = gold_rows(merge_window_sums(sums), 0, plan.wall_end)
    if history is not None:
        changes = seed_history(lake, plan, gold, history)
        gold = stamped(gold, changes)
        result.changes = changes.num_rows
        log.info("  seed history: %s changes of %s windows", f"{changes.num_rows:,}", f"{gold.num_rows:,}")
    lake.publish(tables.GOLD, gold, Batch(SEED_WRITER, 0))
    result.windows = gold.num_rows
    for table in (tables.BRONZE, tables.SILVER, tables.SUMMARY_HISTORY):
        settle(lake, table, plan.wall_end.date())
    result.seconds = time.perf_counter() - began
    for table in SEEDED:
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
