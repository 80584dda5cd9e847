"""The health monitor's end offsets (kafka/clients.py EndOffsets), one request for all of a topic's
partitions, against the embedded broker: they are where each partition ends, and follow it."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from streaming.kafka.clients import EndOffsets
from tests.support.kafka import new_topic


def ends_by_watermarks(bootstrap: str, topic: str) -> dict[str, int]:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "tests-ends"})
    try:
        return {f"{topic}:{p}": reader.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(3)}
    finally:
        reader.close()


def test_end_offsets_are_where_each_partition_ends_and_follow_new_records(broker, topic, writer):
    ends = EndOffsets({"bootstrap.servers": broker.bootstrap_servers}, topic)
    try:
        assert ends.read() == {f"{topic}:{p}": 0 for p in range(3)}

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
