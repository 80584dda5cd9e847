"""The Kafka sink: real writes from Spark to the embedded broker, and the failures Kafka reports."""

import uuid

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import functions as F

from streaming.kafka.admin import ensure_topic
from streaming.kafka.datasource import SOURCE_NAME
from tests.support.kafka import read_topic


def write_lines(spark, tmp_path, lines, to_columns, **options):
    """Stream the text lines through `to_columns` into the sink with Trigger.AvailableNow;
    return the finished query and its checkpoint."""
    run = uuid.uuid4().hex[:6]
    landing, checkpoint = tmp_path / f"in-{run}", tmp_path / f"cp-{run}"
    landing.mkdir()
    (landing / "lines.txt").write_text("".join(f"{line}\n" for line in lines))
    writer = (to_columns(spark.readStream.text(str(landing))).writeStream.format(SOURCE_NAME)
              .option("checkpointLocation", str(checkpoint)).options(**options).trigger(availableNow=True))
    query = writer.start()
    try:
        query.awaitTermination(120)
    except StreamingQueryException:
        pass  # the caller looks at query.exception()
    return query, checkpoint


def key_value(lines):
    """'key|value' lines -> key, value columns; an empty key is a NULL key."""
    parts = F.split("value", r"\|")
    return lines.select(F.when(parts[0] != "", parts[0]).alias("key"), parts[1].alias("value"))


def test_writes_exact_keys_and_values(spark, broker, topic, tmp_path):
    lines = [f"ACC-{i % 4}|{{\"n\": {i}, \"text\": \"caf\u00e9\"}}" for i in range(25)] + ["|no key"]
    query, _ = write_lines(spark, tmp_path, lines, key_value,
                           **{"kafka.bootstrap.servers": broker.bootstrap_servers, "topic": topic})
    assert query.exception() is None
    records = read_topic(broker.bootstrap_servers, topic)
    expected = [(k.encode() or None, v.encode()) for k, v in (line.split("|") for line in lines)]
    assert sorted(((m.key(), m.value()) for m in records), key=repr) == sorted(expected, key=repr)
    # the producer partitions by key like any Kafka client: one key, one partition
    partitions_of = {}
    for m in records:
        partitions_of.setdefault(m.key(), set()).add(m.partition())
    assert all(len(partitions) == 1 for key, partitions in partitions_of.items() if key is not None)


def test_topic_partition_and_headers_columns_are_used_and_the_topic_option_wins(spark, broker, topic, tmp_path):
    other = f"{topic}-other"
    ensure_topic({"bootstrap.servers": broker.bootstrap_servers}, other, partitions=1, retention_ms=3_600_000)

    def routed(lines):
        return lines.select(F.when(F.col("value").startswith("a"), topic).otherwise(other).alias("topic"),
                            F.col("value"), F.lit(0).alias("partition"),
                            F.array(F.struct(F.lit("line").alias("key"), F.col("value").cast("binary").alias("value")))
                            .alias("headers"))

    write_lines(spark, tmp_path, ["a1", "b1", "a2"], routed, **{"kafka.bootstrap.servers": broker.bootstrap_servers})
    assert sorted(m.value() for m in read_topic(broker.bootstrap_servers, topic)) == [b"a1", b"a2"]
    assert [(m.value(), m.partition(), m.headers()) for m in read_topic(broker.bootstrap_servers, other)] == [
        (b"b1", 0, [("line", b"b1")])]
    write_lines(spark, tmp_path, ["b2"], routed, **{"kafka.bootstrap.servers": broker.bootstrap_servers,
                                                   "topic": topic})
    assert sorted(m.value() for m in read_topic(broker.bootstrap_servers, topic)) == [b"a1", b"a2", b"b2"]


def test_a_stream_without_a_value_column_fails_at_start_with_a_clear_message(spark, broker, topic, tmp_path):
    with pytest.raises(Exception, match="needs a 'value' column") as failure:
        query, _ = write_lines(spark, tmp_path, ["x"], lambda lines: lines.select(F.col("value").alias("payload")),
                               **{"kafka.bootstrap.servers": broker.bootstrap_servers, "topic": topic})
        raise query.exception() or AssertionError("the query did not fail")
    assert "payload string" in str(failure.value)
    assert read_topic(broker.bootstrap_servers, topic) == []


def test_a_record_the_broker_rejects_fails_the_batch_instead_of_being_dropped(spark, broker, tmp_path):
    small = f"small-{uuid.uuid4().hex[:8]}"
    ensure_topic({"bootstrap.servers": broker.bootstrap_servers}, small, partitions=1, retention_ms=3_600_000,
                 topic_config={"max.message.bytes": "2000"})

    def padded(lines):
        return lines.select(F.when(F.col("value") == "big", F.repeat(F.lit("x"), 5000))
                            .otherwise(F.col("value")).alias("value"))

    query, checkpoint = write_lines(spark, tmp_path, ["ok1", "big", "ok2"], padded,
                                    **{"kafka.bootstrap.servers": broker.bootstrap_servers, "topic": small})
    error = query.exception()
    assert error is not None, "a record Kafka rejected must fail the batch"
    assert "Kafka did not acknowledge" in str(error) and "MSG_SIZE_TOO_LARGE" in str(error)
    assert "retried from the checkpoint" in str(error)
    assert not (checkpoint / "commits" / "0").exists(), "the failed batch must not be committed"
