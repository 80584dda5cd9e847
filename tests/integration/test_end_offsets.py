"""The health monitor's end offsets (kafka/clients.py EndOffsets), one request for all of a topic's
partitions, against the embedded broker: they are where each partition ends, and follow it."""

from __future__ import annotations

from confluent_kafka import Consumer, KafkaException, TopicPartition

from streaming.kafka.clients import EndOffsets
from tests.support.kafka import new_topic
from tests.support.waiting import wait_for


def ends_by_watermarks(bootstrap: str, topic: str) -> dict[str, int]:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "tests-ends"})
    try:
        return {f"{topic}:{p}": reader.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(3)}
    finally:
        reader.close()


def readable(ends: EndOffsets) -> dict[str, int] | None:
    try:
        return ends.read()
    except KafkaException:
        return None


def test_end_offsets_are_where_each_partition_ends_and_follow_new_records(broker, topic, writer):
    ends = EndOffsets({"bootstrap.servers": broker.bootstrap_servers}, topic)
    try:
        # A topic just made has no leader for a moment: Kafka says so, as the health panel would.
        assert wait_for(lambda: readable(ends), 30, what="the new topic's leaders") == {f"{topic}:{p}": 0
                                                                                          for p in range(3)}

        for i in range(20):
            writer.send_raw(key=f"k{i}".encode(), value=b"{}")

        assert ends.read() == ends_by_watermarks(broker.bootstrap_servers, topic)
        assert sum(ends.read().values()) == 20
    finally:
        ends.close()


def test_end_offsets_of_a_topic_not_there_yet_are_none(broker):
    ends = EndOffsets({"bootstrap.servers": broker.bootstrap_servers}, new_topic(broker.bootstrap_servers) + "-not")
    try:
        assert ends.read() == {}
    finally:
        ends.close()
