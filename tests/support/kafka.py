"""Kafka for the tests: a free port, an embedded broker (and its SIGKILL), a topic, a writer, and
reads of a known offset range (bounded: a test never waits on an idle subscription)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import time
import uuid
from pathlib import Path
from typing import Iterator

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from streaming.kafka.admin import ensure_topic, wait_until_reachable
from streaming.kafka.broker import EmbeddedBroker, free_port, is_running

LOGGER = logging.getLogger("tests.kafka")
# Room for the over-1-MiB record of the bad-input corpus (the broker default is 1 MB).
MAX_MESSAGE_BYTES = 4 * 1024 * 1024


@contextlib.contextmanager
def running_broker(data_dir: Path) -> Iterator[EmbeddedBroker]:
    """An embedded broker on a free port of 127.0.0.1, stopped at the end."""
    embedded = EmbeddedBroker(data_dir, free_port())
    embedded.start()
    try:
        wait_until_reachable({"bootstrap.servers": embedded.bootstrap_servers})
        yield embedded
    finally:
        embedded.stop()


def kill_broker(broker: EmbeddedBroker, timeout_s: float = 10) -> None:
    """SIGKILL the broker's JVM and wait until it has ended, all its threads and sockets."""
    pid = broker.pid
    assert pid is not None, "the broker is not running"
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    while is_running(pid):
        assert time.monotonic() < deadline, f"the broker (pid {pid}) was still alive {timeout_s} s after SIGKILL"
        time.sleep(0.05)


def new_topic(bootstrap: str, prefix: str = "trades", partitions: int = 3, **topic_config: str) -> str:
    """A fresh topic with a unique name, an hour's retention and room for big records."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    ensure_topic({"bootstrap.servers": bootstrap}, name, partitions=partitions, retention_ms=3_600_000,
                 topic_config={"max.message.bytes": str(MAX_MESSAGE_BYTES), **topic_config})
    return name


def topic_settings(bootstrap: str, topic: str) -> dict[str, str]:
    """The topic's configuration as the broker reports it."""
    resource = ConfigResource(ResourceType.TOPIC, topic)
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until the answer comes
    found = admin.describe_configs([resource])[resource].result(timeout=15)
    return {name: entry.value for name, entry in found.items()}


class TopicWriter:
    """Produces trades (dicts, keyed by account) or raw bytes to one topic and waits for the acks."""

    def __init__(self, bootstrap: str, topic: str):
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                  "message.max.bytes": MAX_MESSAGE_BYTES, "logger": LOGGER})

    def send(self, *records) -> None:
        for record in records:
            if isinstance(record, dict):
                self.producer.produce(self.topic, key=record["account_id"].encode(),
                                      value=json.dumps(record).encode())
            else:
                self.producer.produce(self.topic, value=record)
        assert self.producer.flush(30) == 0, "Kafka did not acknowledge every record"

    def send_raw(self, *, key: bytes | None, value: bytes | None) -> None:
        """One record exactly as given: no key, no value (a tombstone), or both."""
        self.producer.produce(self.topic, key=key, value=value)
        assert self.producer.flush(30) == 0, "Kafka did not acknowledge the record"


def _reader(bootstrap: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": f"tests-{uuid.uuid4().hex[:8]}",
                     "enable.auto.commit": False, "logger": LOGGER})


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
