"""Spark's own format("kafka") with the options the pipeline builds (kafka/options.py): real reads
from the embedded broker."""

import json
import time
import uuid

from streaming.kafka.options import source_options


def read_all(spark, broker, topic, **settings):
    """Run the source once with Trigger.AvailableNow into a memory table; return its rows and the
    progress of the batches that read something."""
    name = f"read_{uuid.uuid4().hex[:8]}"
    options = source_options({"bootstrap.servers": broker.bootstrap_servers}, topic, **settings)
    query = (spark.readStream.format("kafka").options(**options).load()
             .writeStream.format("memory").queryName(name).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None, query.exception()
    return spark.table(name).collect(), [p for p in query.recentProgress if p["numInputRows"] > 0]


def test_reads_every_record_with_the_kafka_columns_the_pipeline_parses(spark, broker, writer, topic):
    writer.send(*[{"account_id": f"A{i}", "n": i} for i in range(12)])
    rows, _ = read_all(spark, broker, topic)
    assert sorted(json.loads(r.value)["n"] for r in rows) == list(range(12))
    row = rows[0]
    assert set(row.asDict()) == {"key", "value", "topic", "partition", "offset", "timestamp", "timestampType"}
    assert row.topic == topic and row.key.decode().startswith("A") and row.timestamp is not None
    for p in {r.partition for r in rows}:  # offsets are exact: each partition's records are 0..n-1
        offsets = sorted(r.offset for r in rows if r.partition == p)
        assert offsets == list(range(len(offsets)))


def test_a_replay_from_a_kafka_time_reads_only_later_records(spark, broker, writer, topic):
    writer.send(*[{"account_id": "one-key", "batch": "old"} for _ in range(6)])  # one partition only
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    writer.send(*[{"account_id": "one-key", "batch": "new"} for _ in range(4)])
    # the two partitions with no record after the cut start at their end rather than failing
    rows, _ = read_all(spark, broker, topic, starting_timestamp_ms=cut)
    assert sorted(json.loads(r.value)["batch"] for r in rows) == ["new"] * 4


def test_max_offsets_per_trigger_splits_the_backlog_into_batches(spark, broker, writer, topic):
    writer.send(*[{"account_id": f"A{i}", "n": i} for i in range(30)])
    rows, batches = read_all(spark, broker, topic, max_offsets_per_trigger=8)
    assert sorted(json.loads(r.value)["n"] for r in rows) == list(range(30))
    assert len(batches) >= 4 and all(b["numInputRows"] <= 8 for b in batches)
