"""Spark's own Kafka sink with the loader's options (kafka/options.py sink_options): real writes
to the embedded broker, and a record Kafka refuses fails the batch rather than vanishing."""

import uuid

from pyspark.errors import StreamingQueryException
from pyspark.sql import functions as F

from streaming.kafka.admin import ensure_topic
from streaming.kafka.options import sink_options
from tests.support.kafka import read_topic


def write_lines(spark, tmp_path, lines, to_columns, bootstrap, topic, **client):
    """Stream the text lines through `to_columns` into the sink with Trigger.AvailableNow;
    return the finished query and its checkpoint."""
    run = uuid.uuid4().hex[:6]
    landing, checkpoint = tmp_path / f"in-{run}", tmp_path / f"cp-{run}"
    landing.mkdir()
    (landing / "lines.txt").write_text("".join(f"{line}\n" for line in lines))
    query = (to_columns(spark.readStream.text(str(landing))).writeStream.format("kafka")
             .options(**sink_options({"bootstrap.servers": bootstrap, **client}, topic))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    try:
        query.awaitTermination(120)
    except StreamingQueryException:
        pass  # the caller looks at query.exception()
    return query, checkpoint


def key_value(lines):
    """'key|value' lines -> key, value columns; an empty key is a NULL key."""
    parts = F.split("value", r"\|")
    return lines.select(F.when(parts[0] != "", parts[0]).alias("key"), parts[1].alias("value"))


def test_writes_exact_keys_and_values_one_key_to_one_partition(spark, broker, topic, tmp_path):
    lines = [f"ACC-{i % 4}|{{\"n\": {i}, \"text\": \"caf\u00e9\"}}" for i in range(25)] + ["|no key"]
    query, _ = write_lines(spark, tmp_path, lines, key_value, broker.bootstrap_servers, topic)
    assert query.exception() is None
    records = read_topic(broker.bootstrap_servers, topic)
    expected = [(k.encode() or None, v.encode()) for k, v in (line.split("|") for line in lines)]
    assert sorted(((m.key(), m.value()) for m in records), key=repr) == sorted(expected, key=repr)
    partitions_of = {}
    for m in records:
        partitions_of.setdefault(m.key(), set()).add(m.partition())
    assert all(len(partitions) == 1 for key, partitions in partitions_of.items() if key is not None)


def test_a_record_the_broker_rejects_fails_the_batch_instead_of_being_dropped(spark, broker, tmp_path):
    small = f"small-{uuid.uuid4().hex[:8]}"
    ensure_topic({"bootstrap.servers": broker.bootstrap_servers}, small, partitions=1, retention_ms=3_600_000,
                 topic_config={"max.message.bytes": "2000"})

    def padded(lines):
        return lines.select(F.when(F.col("value") == "big", F.repeat(F.lit("x"), 5000))
                            .otherwise(F.col("value")).alias("value"))

    # The producer retries a refused record until its delivery timeout: a short one keeps the test short.
    query, checkpoint = write_lines(spark, tmp_path, ["ok1", "big", "ok2"], padded, broker.bootstrap_servers, small,
                                    **{"delivery.timeout.ms": "8000", "request.timeout.ms": "5000"})
    error = query.exception()
    assert error is not None, "a record Kafka rejected must fail the batch"
    assert "kafka" in str(error).lower(), str(error)[:2000]
    assert not (checkpoint / "commits" / "0").exists(), "the failed batch must not be committed"
