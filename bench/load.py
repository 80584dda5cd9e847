"""Load generation: trades produced to Kafka, what gold must add up to (the Oracle), the
preloaded topic, and the broker anchor (how fast a plain consumer reads that topic back).

Every Kafka client comes from `streaming.kafka.clients`, so the bench runs with the producer
settings and librdkafka logging the product uses.
"""

from __future__ import annotations

import json
import logging
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

from confluent_kafka import Producer, TopicPartition

from streaming.kafka import clients
from streaming.simulation.market import SYMBOLS, make_trade, market_open_on

log = logging.getLogger("bench")
BENCH_DAY = datetime(2026, 3, 2, tzinfo=timezone.utc).date()
PARTITIONS = 3
ANCHOR_BATCH = 10_000  # records asked of the anchor consumer per consume() call
ANCHOR_TIMEOUT_S = 300


@dataclass
class Oracle:
    """What gold must add up to: the exact totals of the trades produced."""

    count: int = 0
    buy: float = 0.0
    sell: float = 0.0

    def add(self, trade: dict) -> None:
        amount = trade["quantity"] * trade["price"]
        self.count += 1
        if trade["side"] == "BUY":
            self.buy += amount
        else:
            self.sell += amount


def kafka_config(bootstrap: str) -> dict[str, str]:
    return {"bootstrap.servers": bootstrap}


def new_producer(bootstrap: str, **overrides) -> Producer:
    """The product's idempotent, acks=all producer, with room to queue a preload's burst."""
    return clients.producer(kafka_config(bootstrap), **{"queue.buffering.max.messages": 1_000_000, **overrides})


def produce(producer: Producer, topic: str, trade: dict) -> None:
    value = json.dumps(trade, separators=(",", ":")).encode()
    while True:
        try:
            producer.produce(topic, value=value, key=trade["account_id"].encode())
            return
        except BufferError:  # the local queue is full: let deliveries drain
            producer.poll(0.05)


def preload(bootstrap: str, topic: str, count: int, seed: int = 7) -> Oracle:
    """`count` trades spread evenly over one trading day (09:00-17:00), in event-time order."""
    rng, prices, oracle = random.Random(seed), dict(SYMBOLS), Oracle()
    opening, step = market_open_on(BENCH_DAY), timedelta(hours=8) / max(count, 1)
    producer = new_producer(bootstrap, **{"linger.ms": 50, "batch.num.messages": 10_000})
    for i in range(count):
        trade = make_trade(rng, opening + step * i, prices)
        oracle.add(trade)
        produce(producer, topic, trade)
        if i % 5_000 == 0:
            producer.poll(0)
        if i and i % 200_000 == 0:
            log.info("  preloaded %s trades ...", f"{i:,}")
    if producer.flush(120) != 0:
        raise RuntimeError("the broker did not acknowledge every preloaded trade")
    return oracle


def broker_consume_rate(bootstrap: str, topic: str) -> float:
    """Messages/s of a plain consumer reading the whole topic (assign + consume, values touched)."""
    consumer = clients.consumer(kafka_config(bootstrap), "bench-anchor", **{"enable.partition.eof": False})
    try:
        ranges = clients.watermark_offsets(consumer, topic, timeout_s=10)
        consumer.assign([TopicPartition(topic, p, low) for p, (low, _) in ranges.items()])
        remaining, read, value_bytes = sum(high - low for low, high in ranges.values()), 0, 0
        began = time.perf_counter()
        while read < remaining:
            # Never ask for more than is still missing: consume() waits out its whole timeout
            # for a count it cannot fill, and that idle wait would be timed as reading.
            for msg in consumer.consume(num_messages=min(ANCHOR_BATCH, remaining - read), timeout=5.0):
                if msg.error() is None:
                    read += 1
                    value_bytes += len(msg.value())
            if time.perf_counter() - began > ANCHOR_TIMEOUT_S:
                raise RuntimeError(f"the anchor consumer read only {read:,} of {remaining:,} records "
                                   f"in {ANCHOR_TIMEOUT_S} s")
        return read / (time.perf_counter() - began)
    finally:
        consumer.close()


def broker_consume_rate_apart(bootstrap: str, topic: str, started: Callable[[int], None]) -> float:
    """broker_consume_rate in a process of its own, whose pid goes to `started`: the anchor's
    consumer holds the whole topic in its fetch buffers for a moment (hundreds of MB), which is
    the benchmark's tool, not the pipeline's memory."""
    code = ("import sys; from bench.load import broker_consume_rate; "
            "print(broker_consume_rate(sys.argv[1], sys.argv[2]))")
    process = subprocess.Popen([sys.executable, "-c", code, bootstrap, topic], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parent.parent)
    started(process.pid)
    try:
        out, err = process.communicate(timeout=ANCHOR_TIMEOUT_S + 60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise RuntimeError(f"the anchor consumer gave no answer within {ANCHOR_TIMEOUT_S + 60} s") from None
    if process.returncode != 0:
        last = err.strip().splitlines()[-1] if err.strip() else f"exit code {process.returncode}"
        raise RuntimeError(f"the anchor consumer failed: {last}")
    return float(out.strip().splitlines()[-1])


def drop_topic(bootstrap: str, topic: str) -> None:
    """A million trades the broker no longer needs: deleted, they leave its disk and the page
    cache to the later phases."""
    admin = clients.admin(kafka_config(bootstrap))  # kept alive until the deletion is answered
    try:
        admin.delete_topics([topic], operation_timeout=30)[topic].result(30)
    except Exception as exc:  # noqa: BLE001 - only a cost, not a wrong figure
        log.warning("    could not delete topic %s: %s", topic, exc)
