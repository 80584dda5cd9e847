"""The micro-batches the Delta writer benchmark writes, made as the simulator and the pipeline's tasks make them."""

from __future__ import annotations

import dataclasses
import json
import random
import zlib
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.compute as pc

from streaming.config import Settings, Simulation
from streaming.lake import tables
from streaming.lake.tables import UTC_TIME
from streaming.medallion.gold import window_sums
from streaming.medallion.lateness import too_late
from streaming.medallion.silver import arrow as silver
from streaming.simulation.market import SYMBOLS, late_delay, make_trade
from streaming.sink.gold_step import gold_rows

# Compaction off, for every writer alike (delta_writers.py's docstring says why); no day
# partitions either: a batch's trades are of one day, so each writer writes the same one file.
SILVER = dataclasses.replace(tables.SILVER, compact_every=None, day_of=None)
GOLD = dataclasses.replace(tables.GOLD, compact_every=None)
TOPIC = "trades"
PARTITIONS = 3
START = datetime(2026, 3, 2, 10, 0, tzinfo=timezone.utc)  # an hour after the opening bell


@dataclasses.dataclass
class MicroBatch:
    id: int
    silver: pa.Table  # SILVER's schema
    gold: pa.Table  # GOLD's schema: the batch's on-time window sums


def make_batches(count: int, trades_per_batch: int, trigger: timedelta, seed: int) -> list[MicroBatch]:
    """`count` micro-batches of `trades_per_batch` trades, made as the simulator and the
    pipeline's tasks make them."""
    rng, prices = random.Random(seed), dict(SYMBOLS)
    sim, settings = Simulation(), Settings()
    market_step = trigger * sim.clock_speed / trades_per_batch  # market time between two trades
    wall_step = trigger / trades_per_batch
    offsets = [0] * PARTITIONS
    latest: datetime | None = None
    batches = []
    for batch_id in range(count):
        keys, values, parts, offs, stamps = [], [], [], [], []
        for i in range(trades_per_batch):
            n = batch_id * trades_per_batch + i
            event_time = START + market_step * n
            if rng.random() < sim.late_share:
                event_time -= late_delay(rng, settings.window, settings.watermark, sim.beyond_watermark_share)
            trade = make_trade(rng, event_time, prices)
            partition = zlib.crc32(trade["account_id"].encode()) % PARTITIONS
            keys.append(trade["account_id"].encode())
            values.append(json.dumps(trade, separators=(",", ":")).encode())
            parts.append(partition)
            offs.append(offsets[partition])
            offsets[partition] += 1
            stamps.append(START + wall_step * n)
        records = pa.table({
            "key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary()),
            "topic": pa.array([TOPIC] * len(keys), pa.string()), "partition": pa.array(parts, pa.int32()),
            "offset": pa.array(offs, pa.int64()), "timestamp": pa.array(stamps, pa.timestamp("us", tz="UTC")),
            "timestampType": pa.array([0] * len(keys), pa.int32()),
        })
        ingested_at = START + trigger * (batch_id + 1)
        rows = silver.parse_records(records)
        rows = rows.append_column("ingested_at", pa.repeat(pa.scalar(ingested_at, UTC_TIME), rows.num_rows))
        trades = silver.silver_rows(rows)
        watermark = latest - settings.watermark if latest else datetime.fromtimestamp(0, timezone.utc)
        on_time = trades.filter(pc.invert(too_late(trades, watermark)))
        sums = window_sums(on_time, settings.window)
        batches.append(MicroBatch(batch_id, trades, gold_rows(sums, batch_id, ingested_at)))
        batch_latest = pc.max(trades["event_time"]).as_py()
        latest = batch_latest if latest is None else max(latest, batch_latest)
    return batches

