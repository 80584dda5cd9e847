"""Shared fixtures: one real embedded Kafka broker and one SparkSession for the whole run."""

from __future__ import annotations

import json
import logging
import socket
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from streaming.broker import EmbeddedBroker
from streaming.kafka_admin import ensure_topic, wait_until_reachable

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
