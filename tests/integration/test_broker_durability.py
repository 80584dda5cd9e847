"""The embedded broker (Apache Kafka) keeps what it acknowledged: through a SIGKILL, and through
a full disk, which stops it (said at stop, with what to do) rather than losing records. A
second command on the same data dir reuses the running broker. Each test has its own broker,
since it kills, fills or shares it."""

import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from streaming.kafka.broker import BrokerError, EmbeddedBroker
from tests.support.disk import fill, small_filesystem
from tests.support.kafka import free_port, kill_broker, new_topic

RECORDS = 20_000


def produce_acknowledged(bootstrap: str, topic: str, count: int, size: int = 0, may_fail: bool = False,
                         **config) -> dict[tuple[int, int], bytes]:
    """(partition, offset) -> value of every record Kafka acknowledged, once every delivery
    report is in (acks=all, idempotent)."""
    acked, failed = {}, []

    def report(err, msg):
        if err is None:
            acked[(msg.partition(), msg.offset())] = msg.value()
        else:
            failed.append(err)

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, **config})
    for i in range(count):
        producer.produce(topic, key=str(i % 97).encode(), value=(b"record-%d " % i).ljust(size, b"."),
                         on_delivery=report)
        producer.poll(0)
    assert producer.flush(60) == 0, "a delivery report is missing"
    assert may_fail or not failed, f"{len(failed)} records failed: {failed[0]}"
    return acked


def read_ranges(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int, bytes]]:
    """Every record of the topic, as (partition, offset, value): assign + seek to each
    partition's [low, high) and read exactly that far."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "durability-check", "enable.auto.commit": False})
    try:
        ranges = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, low) for p, (low, high) in ranges.items() if high > low])
        expected = sum(high - low for low, high in ranges.values())
        records, deadline = [], time.monotonic() + 60
        while len(records) < expected and time.monotonic() < deadline:
            records += [(m.partition(), m.offset(), m.value()) for m in consumer.consume(5000, timeout=1)
                        if m.error() is None]
        assert len(records) == expected, f"read {len(records)} of the {expected} records between the watermarks"
        return records
    finally:
        consumer.close()


def test_a_sigkilled_broker_loses_nothing_it_acknowledged(tmp_path):
    broker = EmbeddedBroker(tmp_path / "broker", free_port())
    broker.start()
    try:
        topic = new_topic(broker.bootstrap_servers)
        acked = produce_acknowledged(broker.bootstrap_servers, topic, RECORDS)
        assert len(acked) == RECORDS
        kill_broker(broker)  # no controlled shutdown: the log is only in the page cache
        broker = EmbeddedBroker(tmp_path / "broker", broker.port)
        broker.start()  # the state file names a dead pid: ignored
        assert not broker.reused
        records = read_ranges(broker.bootstrap_servers, topic, partitions=3)
    finally:
        broker.stop()
    held = {(partition, offset): value for partition, offset, value in records}
    assert {key: held.get(key) for key in acked} == acked  # each acknowledged record, where it was acknowledged
    assert [value for value, seen in Counter(v for _, _, v in records).items() if seen > 1] == []  # once
    assert len(records) == RECORDS


def test_a_second_broker_on_the_same_dir_is_reused_on_its_port_and_refused_on_another(tmp_path):
    first = EmbeddedBroker(tmp_path / "broker", free_port())
    first.start()
    try:
        second = EmbeddedBroker(tmp_path / "broker", first.port)
        second.start()
        assert second.reused and second.pid == first.pid and second.running_port() == first.port
        elsewhere = EmbeddedBroker(tmp_path / "broker", free_port())
        with pytest.raises(BrokerError) as refused:
            elsewhere.start()
        assert f"already running on port {first.port}" in str(refused.value)
        assert f"--broker-port {first.port}" in str(refused.value) and f"kill {first.pid}" in str(refused.value)
    finally:
        first.stop()
    assert EmbeddedBroker(tmp_path / "broker", first.port).running_port() is None


def test_a_port_in_use_is_a_clear_error(tmp_path, broker):
    taken = EmbeddedBroker(tmp_path / "broker", broker.port)
    with pytest.raises(BrokerError, match=f"port {broker.port} is already in use"):
        taken.start()
    assert taken.pid is None


@pytest.fixture
def small_disk(tmp_path):
    with small_filesystem(tmp_path / "small", "32m") as mount:
        yield mount


def test_a_full_disk_stops_the_broker_which_says_so_and_loses_nothing_acknowledged(small_disk):
    broker = EmbeddedBroker(small_disk / "broker", free_port())
    broker.start()
    try:
        topic = new_topic(broker.bootstrap_servers)
        before = produce_acknowledged(broker.bootstrap_servers, topic, 100)
        filler = fill(small_disk)
        # More than the few KiB a full tmpfs may still have.
        after = produce_acknowledged(broker.bootstrap_servers, topic, 200, size=4096, may_fail=True,
                                     **{"message.timeout.ms": 10_000})
    finally:
        with pytest.raises(BrokerError) as failed:
            broker.stop()
    message = str(failed.value)
    assert "ended by itself" in message and "disk is full" in message and "df -h" in message
    filler.unlink()
    again = EmbeddedBroker(small_disk / "broker", broker.port)
    again.start()
    try:
        records = read_ranges(again.bootstrap_servers, topic, partitions=3)
    finally:
        again.stop()
    acked, held = {**before, **after}, {(p, o): v for p, o, v in records}
    assert len(before) == 100 and {key: held.get(key) for key in acked} == acked
