"""The embedded broker's save on stop is checked: on a full disk it is reported with what is
kept and what to do, never as "data saved", and the broker starts again from its last good
snapshot once space is back (a small tmpfs stands in for the full disk)."""

import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from streaming.kafka.admin import wait_until_reachable
from streaming.kafka.broker import BrokerError, EmbeddedBroker
from tests.support.disk import fill, small_filesystem
from tests.support.kafka import TopicWriter, free_port, new_topic

SNAPSHOT_EVERY_S = 5  # the broker's own period (PLATFORM.md)


@pytest.fixture
def small_disk(tmp_path):
    with small_filesystem(tmp_path / "small", "8m") as mount:
        yield mount


def end_offsets(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "save-check"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(3))
    finally:
        consumer.close()


def test_a_save_that_fails_on_a_full_disk_is_reported_and_the_last_good_snapshot_kept(small_disk):
    broker = EmbeddedBroker(small_disk / "broker", free_port())
    broker.start()
    try:
        wait_until_reachable({"bootstrap.servers": broker.bootstrap_servers})
        topic = new_topic(broker.bootstrap_servers)
        TopicWriter(broker.bootstrap_servers, topic).send(*[b"saved" * 20] * 100)
        time.sleep(SNAPSHOT_EVERY_S + 2)  # in a periodic snapshot
        fill(small_disk)
        TopicWriter(broker.bootstrap_servers, topic).send(*[b"unsaved" * 20] * 100)
    finally:
        with pytest.raises(BrokerError) as failed:
            broker.stop()
    message = str(failed.value)
    assert "could not save its data" in message and "last good snapshot" in message and "Free space" in message
    (small_disk / "filler").unlink()
    again = EmbeddedBroker(small_disk / "broker", broker.port)
    again.start()
    try:
        wait_until_reachable({"bootstrap.servers": again.bootstrap_servers})
        assert end_offsets(again.bootstrap_servers, topic) == 100  # the snapshot before the disk filled
    finally:
        again.stop()
