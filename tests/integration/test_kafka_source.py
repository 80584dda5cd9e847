"""The Kafka source through Spark: real reads from the embedded broker with the options of
Spark's own Kafka source."""

import json
import time
import uuid

from confluent_kafka.admin import NewPartitions

from streaming.kafka.clients import admin as admin_client
from streaming.kafka.datasource import SOURCE_NAME
from tests.support.kafka import TopicWriter
from tests.support.waiting import wait_for


def read_all(spark, broker, topic, **options):
    """Run the source once with Trigger.AvailableNow into a memory table; return its rows."""
    name = f"read_{uuid.uuid4().hex[:8]}"
    reader = (spark.readStream.format(SOURCE_NAME)
              .option("kafka.bootstrap.servers", broker.bootstrap_servers).option("subscribe", topic))
    for key, value in options.items():
        reader = reader.option(key, value)
    query = reader.load().writeStream.format("memory").queryName(name).trigger(availableNow=True).start()
    query.awaitTermination(120)
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    return spark.table(name).collect(), batches


def test_reads_every_record_with_the_spark_kafka_columns(spark, broker, writer, topic):
    writer.send(*[{"account_id": f"A{i}", "n": i} for i in range(12)])
    rows, _ = read_all(spark, broker, topic, startingOffsets="earliest")
    assert sorted(json.loads(r.value)["n"] for r in rows) == list(range(12))
    row = rows[0]
    assert set(row.asDict()) == {"key", "value", "topic", "partition", "offset", "timestamp", "timestampType"}
    assert row.topic == topic and row.key.decode().startswith("A") and row.timestamp is not None
    assert {r.partition for r in rows} <= {0, 1, 2}
    # offsets are exact: each partition's records are 0..n-1
    for p in {r.partition for r in rows}:
        offsets = sorted(r.offset for r in rows if r.partition == p)
        assert offsets == list(range(len(offsets)))


def test_starting_offsets_json_and_latest(spark, broker, writer, topic):
    writer.send(*[{"account_id": "same-key", "n": i} for i in range(5)])  # one key: one partition
    rows, _ = read_all(spark, broker, topic, startingOffsets="earliest")
    partition = rows[0].partition
    start = {topic: {str(p): (3 if p == partition else -2) for p in range(3)}}
    rows, _ = read_all(spark, broker, topic, startingOffsets=json.dumps(start))
    assert sorted(json.loads(r.value)["n"] for r in rows) == [3, 4]
    rows, _ = read_all(spark, broker, topic, startingOffsets="latest")
    assert rows == []


def test_starting_timestamp_reads_only_later_records(spark, broker, writer, topic):
    writer.send(*[{"account_id": f"A{i}", "batch": "old"} for i in range(6)])
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    writer.send(*[{"account_id": f"A{i}", "batch": "new"} for i in range(4)])
    rows, _ = read_all(spark, broker, topic, startingTimestamp=str(cut))
    assert sorted(json.loads(r.value)["batch"] for r in rows) == ["new"] * 4


def test_max_offsets_per_trigger_splits_the_backlog_into_batches(spark, broker, writer, topic):
    writer.send(*[{"account_id": f"A{i}", "n": i} for i in range(30)])
    rows, batches = read_all(spark, broker, topic, startingOffsets="earliest", maxOffsetsPerTrigger="8")
    assert sorted(json.loads(r.value)["n"] for r in rows) == list(range(30))
    assert len(batches) >= 4 and all(b["numInputRows"] <= 8 for b in batches)


def test_partitions_added_later_are_read_from_their_start(spark, broker, writer, topic):
    writer.send(*[{"account_id": f"A{i}", "n": i} for i in range(6)])
    admin = admin_client({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_partitions([NewPartitions(topic, 4)])[topic].result(15)
    wait_for(lambda: len(admin.list_topics(topic, timeout=5).topics[topic].partitions) == 4, 15,
             what="the fourth partition")
    late_writer = TopicWriter(broker.bootstrap_servers, topic)  # fresh metadata
    late_writer.producer.produce(topic, partition=3, value=b'{"n": 99}')
    assert late_writer.producer.flush(15) == 0
    rows, _ = read_all(spark, broker, topic, startingOffsets="earliest")
    assert sorted(json.loads(r.value)["n"] for r in rows) == [0, 1, 2, 3, 4, 5, 99]
