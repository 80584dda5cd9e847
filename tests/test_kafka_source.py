"""The Kafka source: pure offset logic, then real reads from the embedded broker through Spark."""

import json
import time
import uuid

import pytest
from confluent_kafka.admin import NewPartitions

from streaming.kafka.clients import admin as admin_client
from streaming.kafka.datasource import SOURCE_NAME
from streaming.kafka.options import KafkaSourceError, SourceOptions, parse_starting_offsets
from streaming.kafka.reader import KafkaStreamReader, cap_offsets
from tests.conftest import TopicWriter, free_port, wait_for


def test_cap_offsets_spreads_the_limit_over_partitions_by_backlog():
    start = {("t", 0): 0, ("t", 1): 10, ("t", 2): 5}
    latest = {("t", 0): 100, ("t", 1): 10, ("t", 2): 105}
    end = cap_offsets(start, latest, 20)
    assert end == {("t", 0): 10, ("t", 1): 10, ("t", 2): 15}
    assert cap_offsets(start, latest, 1000) == latest


def test_cap_offsets_never_stalls_a_partition_with_a_small_limit():
    end = cap_offsets({("t", 0): 0, ("t", 1): 0}, {("t", 0): 1000, ("t", 1): 1}, 1)
    assert end[("t", 1)] == 1 and end[("t", 0)] >= 1


def test_starting_offsets_accepts_spark_forms_and_rejects_others():
    assert parse_starting_offsets("earliest", ("t",)) == "earliest"
    assert parse_starting_offsets('{"t": {"0": 5, "1": -2}}', ("t",)) == {"t": {"0": 5, "1": -2}}
    with pytest.raises(KafkaSourceError, match="startingOffsets"):
        parse_starting_offsets("yesterday", ("t",))


def test_missing_required_options_are_named():
    with pytest.raises(KafkaSourceError, match="kafka.bootstrap.servers"):
        SourceOptions.parse({"subscribe": "t"})
    with pytest.raises(KafkaSourceError, match="subscribe"):
        SourceOptions.parse({"kafka.bootstrap.servers": "h:1"})


def test_an_unreachable_broker_gives_a_clear_error():
    reader = KafkaStreamReader(SourceOptions.parse({
        "kafka.bootstrap.servers": f"127.0.0.1:{free_port()}", "subscribe": "t",
        "kafkaConsumer.pollTimeoutMs": "2000",
    }))
    with pytest.raises(KafkaSourceError, match="cannot reach Kafka at 127.0.0.1"):
        reader.initialOffset()


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


def test_batches_of_many_partitions_are_read_in_one_wave_of_tasks():
    from streaming.kafka.reader import KafkaPartitionRange, group_ranges

    ranges = [KafkaPartitionRange("t", p, 0, n) for p, n in enumerate((100, 50, 60, 10))]
    groups = group_ranges(ranges, 2, min_records_per_task=100)
    assert sorted(sorted(r.partition for r in g.ranges) for g in groups) == [[0, 3], [1, 2]]  # 110 records each
    assert sum(len(g.ranges) for g in group_ranges(ranges, None)) == 4 == len(group_ranges(ranges, None))


def test_a_small_batch_is_read_by_one_task():
    from streaming.kafka.reader import KafkaPartitionRange, group_ranges

    ranges = [KafkaPartitionRange("t", p, 0, n) for p, n in enumerate((400, 350, 300))]
    assert [len(g.ranges) for g in group_ranges(ranges, 2)] == [3]
    assert len(group_ranges(ranges, 2, min_records_per_task=500)) == 2


def test_the_offset_cap_is_spent_in_full_so_no_tiny_batch_trails():
    start = {("t", p): 0 for p in range(3)}
    latest = {("t", 0): 100_000, ("t", 1): 100_001, ("t", 2): 99_999}
    end = cap_offsets(start, latest, 100_000)
    assert sum(end.values()) == 100_000 and all(end[tp] <= latest[tp] for tp in latest)
