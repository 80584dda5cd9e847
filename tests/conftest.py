"""Shared fixtures: one real embedded Kafka broker and one SparkSession for the whole run."""

from __future__ import annotations

import json
import logging
import socket
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from streaming.kafka.admin import ensure_topic, wait_until_reachable
from streaming.kafka.broker import EmbeddedBroker

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(predicate, timeout_s: float = 60.0, interval_s: float = 0.25, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = predicate()
        if result is not None and result is not False:
            return result
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def trade(trade_id: str, side: str, quantity: int, price: float, event_time: str, **extra) -> dict:
    return {"trade_id": trade_id, "account_id": extra.pop("account_id", "ACC-1"), "symbol": "AAPL",
            "side": side, "quantity": quantity, "price": price, "channel": "web",
            "event_time": event_time, **extra}


def process(pipeline) -> None:
    """Wait until every query of the pipeline has processed all that Kafka holds."""
    for query in pipeline.queries:
        query.processAllAvailable()


def run_once(spark, settings) -> None:
    """Start the pipeline, process everything available, stop it (one seed-style iteration)."""
    from streaming.pipeline import Pipeline

    pipeline = Pipeline(spark, settings)
    pipeline.start()
    try:
        process(pipeline)
    finally:
        pipeline.stop()


class TopicWriter:
    """Produces trades (dicts) or raw bytes to one topic and waits for the acks."""

    def __init__(self, bootstrap: str, topic: str):
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                  "message.max.bytes": 4 * 1024 * 1024,
                                  "logger": logging.getLogger("tests.kafka")})

    def send(self, *records) -> None:
        for record in records:
            if isinstance(record, dict):
                self.producer.produce(self.topic, key=record["account_id"].encode(),
                                      value=json.dumps(record).encode())
            else:
                self.producer.produce(self.topic, value=record)
        assert self.producer.flush(30) == 0, "Kafka did not acknowledge every record"


def _reader(bootstrap: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": f"tests-{uuid.uuid4().hex[:8]}",
                     "enable.auto.commit": False, "logger": logging.getLogger("tests.kafka")})


def _partitions(consumer: Consumer, topic: str) -> list[int]:
    return sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)


def count_since(bootstrap: str, topic: str, since_ms: int) -> int:
    """How many records the topic got at or after since_ms (by Kafka timestamp).

    A partition with nothing at or after that time counts as empty, like Spark's
    startingOffsetsByTimestampStrategy=latest.
    """
    consumer = _reader(bootstrap)
    try:
        wanted = [TopicPartition(topic, p, since_ms) for p in _partitions(consumer, topic)]
        total = 0
        for found in consumer.offsets_for_times(wanted, timeout=10):
            if found.offset >= 0:
                _, high = consumer.get_watermark_offsets(TopicPartition(topic, found.partition), timeout=10)
                total += high - found.offset
        return total
    finally:
        consumer.close()


def read_topic(bootstrap: str, topic: str) -> list:
    """Every record of the topic (a known offset range per partition; no idle subscription)."""
    consumer = _reader(bootstrap)
    try:
        ranges = {}
        for p in _partitions(consumer, topic):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if high > low:
                ranges[p] = (low, high)
        consumer.assign([TopicPartition(topic, p, low) for p, (low, _) in ranges.items()])
        records, expected = [], sum(high - low for low, high in ranges.values())
        deadline = time.monotonic() + 30
        while len(records) < expected and time.monotonic() < deadline:
            records += [m for m in consumer.consume(1000, timeout=0.5) if m.error() is None]
        assert len(records) == expected, f"read {len(records)} of {expected} records of {topic}"
        return records
    finally:
        consumer.close()


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("broker")
    embedded = EmbeddedBroker(data_dir, free_port())
    embedded.start()
    try:
        wait_until_reachable({"bootstrap.servers": embedded.bootstrap_servers})
        yield embedded
    finally:
        embedded.stop()


@pytest.fixture
def topic(broker) -> str:
    name = f"trades-{uuid.uuid4().hex[:8]}"
    # Room for the over-1-MiB record of the bad-input corpus (the broker default is 1 MB).
    ensure_topic({"bootstrap.servers": broker.bootstrap_servers}, name, partitions=3, retention_ms=3_600_000,
                 topic_config={"max.message.bytes": str(4 * 1024 * 1024)})
    return name


@pytest.fixture
def writer(broker, topic) -> TopicWriter:
    return TopicWriter(broker.bootstrap_servers, topic)


@pytest.fixture(scope="session")
def spark():
    from streaming.spark_session import create_spark

    session = create_spark("local[2]", app_name="trade-summary-tests", shuffle_partitions=2)
    yield session
    session.stop()
