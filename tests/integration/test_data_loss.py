"""failOnDataLoss, with Spark's meaning: when Kafka no longer holds offsets the checkpoint expects
(here: the topic recreated, so every partition starts again at 0), the query fails and says which
partition lost which offsets and what to do; with false, it says so on the health panel and reads
on from what the broker holds, records that take the same offsets again included."""

import time

import pytest
from confluent_kafka.admin import AdminClient

from streaming.jobs.pipeline import short_error
from streaming.kafka.admin import ensure_topic
from streaming.lake.tables import BRONZE, SILVER
from tests.support.corpus import DAY, trade
from tests.support.kafka import TopicWriter


def recreate(bootstrap: str, topic: str) -> TopicWriter:
    """Delete the topic and create it again, empty, with a new writer (the old producer's
    sequence numbers belong to the old topic)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=10)[topic].result(timeout=15)
    deadline = time.monotonic() + 15
    while topic in admin.list_topics(timeout=5).topics and time.monotonic() < deadline:
        time.sleep(0.1)
    ensure_topic({"bootstrap.servers": bootstrap}, topic, partitions=3, retention_ms=3_600_000)
    return TopicWriter(bootstrap, topic)


def test_a_recreated_topic_fails_the_query_naming_the_lost_offsets(stream, broker, topic):
    stream.add(trade("t1", "BUY", 1, 10.0, DAY + "09:01:00Z"), trade("t2", "BUY", 1, 20.0, DAY + "09:02:00Z"))
    stream.process()
    stream.stop()
    recreate(broker.bootstrap_servers, topic)
    with pytest.raises(Exception) as failed:
        stream.process()
    message = short_error(failed.value)  # as the log and the health panel say it
    assert f"Kafka partition {topic}/" in message and "ends at offset 0, but the query has read up to 2" in message
    assert "--fail-on-data-loss false" in message
    stream.check_table(BRONZE, rows=2)


def test_with_fail_on_data_loss_false_records_that_reuse_lost_offsets_are_read_and_counted(stream, broker, topic):
    stream.add(trade("t1", "BUY", 1, 10.0, DAY + "09:01:00Z"), trade("t2", "BUY", 1, 20.0, DAY + "09:02:00Z"))
    stream.process()
    stream.stop()
    writer = recreate(broker.bootstrap_servers, topic)
    stream.restart(fail_on_data_loss=False)
    stream.process()  # the batch that finds the offsets gone and goes back
    writer.send(trade("t3", "SELL", 1, 5.0, DAY + "09:03:00Z"), trade("t4", "BUY", 1, 1.0, DAY + "09:04:00Z"))
    stream.process()
    bronze = stream.check_table(BRONZE, rows=4)
    assert sorted(bronze["offset"]) == [0, 0, 1, 1]  # the same offsets, other records
    stream.check_table(SILVER, trade_id=["t1", "t2", "t3", "t4"])
    stream.check_gold({"09:00": (31.0, 5.0, 4)})
    [status] = stream.pipeline.status()
    assert f"Kafka partition {topic}/" in (status.data_loss or "") and "from offset 2 to 0" in status.data_loss
