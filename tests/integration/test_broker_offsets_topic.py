"""The embedded broker's __consumer_offsets: one partition on a new data dir; a data dir made
before (Kafka's default, 50 partitions) keeps its 50 and the offsets its groups committed."""

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from streaming.kafka import broker as broker_module
from streaming.kafka.broker import LOG_DIRS, EmbeddedBroker
from tests.support.kafka import free_port, new_topic

# A new offsets topic of 50 partitions answers these while its coordinator loads them.
LOADING = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE)


def offsets_partitions(data_dir) -> list[str]:
    return sorted(p.name for p in (data_dir / LOG_DIRS).glob("__consumer_offsets-*"))


def commit_and_read(bootstrap: str, topic: str, offset: int | None) -> int:
    """Commits `offset` for partition 0 of the topic in group 'offsets-check' (None: none), and
    returns what the group has committed there."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "offsets-check", "enable.auto.commit": False})
    try:
        deadline = time.monotonic() + 60
        while offset is not None:
            try:
                consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
                break
            except KafkaException as exc:  # the group's coordinator still loading its partition
                if exc.args[0].code() not in LOADING or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        return consumer.committed([TopicPartition(topic, 0)], timeout=30)[0].offset
    finally:
        consumer.close()


def test_a_new_data_dir_gets_one_offsets_partition(tmp_path):
    broker = EmbeddedBroker(tmp_path / "broker", free_port())
    broker.start()
    try:
        assert commit_and_read(broker.bootstrap_servers, new_topic(broker.bootstrap_servers), 5) == 5
        assert offsets_partitions(broker.data_dir) == ["__consumer_offsets-0"]
    finally:
        broker.stop()


def test_a_data_dir_with_kafkas_default_fifty_keeps_them_and_its_committed_offsets(tmp_path, monkeypatch):
    data_dir = tmp_path / "broker"
    with monkeypatch.context() as before:  # the dir as a broker without the setting made it
        before.setattr(broker_module, "offsets_topic_partitions", lambda _log_dirs: 50)
        broker = EmbeddedBroker(data_dir, free_port())
        broker.start()
        try:
            topic = new_topic(broker.bootstrap_servers)
            assert commit_and_read(broker.bootstrap_servers, topic, 7) == 7
        finally:
            broker.stop()
    assert len(offsets_partitions(data_dir)) == 50
    broker = EmbeddedBroker(data_dir, free_port())
    broker.start()
    try:
        assert "offsets.topic.num.partitions=50\n" in (data_dir / "server.properties").read_text()
        assert commit_and_read(broker.bootstrap_servers, topic, None) == 7
        assert commit_and_read(broker.bootstrap_servers, topic, 9) == 9
        assert len(offsets_partitions(data_dir)) == 50
    finally:
        broker.stop()
