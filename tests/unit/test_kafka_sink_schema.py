"""The Kafka sink's checks before any write: the stream's columns and the options (no Spark
session, no broker)."""

import pytest
from pyspark.sql import types as T

from streaming.kafka.options import KafkaSinkError, SinkOptions
from streaming.kafka.writer import check_schema

HEADERS = T.ArrayType(T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())]))


def schema(**columns: T.DataType) -> T.StructType:
    return T.StructType([T.StructField(name, data_type) for name, data_type in columns.items()])


def test_a_stream_without_a_value_column_is_refused_with_the_columns_it_needs():
    with pytest.raises(KafkaSinkError, match=r"needs a 'value' column \(string or binary\).*got trade_id string"):
        check_schema(schema(trade_id=T.StringType(), quantity=T.LongType()), "trades")


@pytest.mark.parametrize("columns, message", [
    (dict(value=T.LongType()), "'value' column must be string or binary, got bigint"),
    (dict(key=T.IntegerType(), value=T.StringType()), "'key' column must be string or binary"),
    (dict(value=T.StringType(), partition=T.StringType()), "'partition' column must be int"),
    (dict(value=T.StringType(), headers=T.ArrayType(T.StringType())),
     r"'headers' column must be array<struct<key: string, value: binary>>"),
])
def test_mistyped_kafka_columns_are_named(columns, message):
    with pytest.raises(KafkaSinkError, match=message):
        check_schema(schema(**columns), "trades")


def test_a_topic_comes_from_the_option_or_a_column():
    check_schema(schema(key=T.StringType(), value=T.BinaryType(), headers=HEADERS), "t")
    check_schema(schema(value=T.StringType(), topic=T.StringType(), partition=T.IntegerType()), None)
    with pytest.raises(KafkaSinkError, match="'topic' option or add a 'topic' column"):
        check_schema(schema(value=T.StringType()), None)


def test_options_mirror_spark_and_pass_kafka_settings_through():
    options = SinkOptions.parse({"kafka.bootstrap.servers": "h:1", "kafka.sasl.password": "s", "topic": "t"})
    assert options.topic == "t" and options.client == {"bootstrap.servers": "h:1", "sasl.password": "s"}
    config = options.producer_config()
    assert config["enable.idempotence"] == "true" and config["acks"] == "all" and config["sasl.password"] == "s"
    assert SinkOptions.parse({"kafka.bootstrap.servers": "h:1", "kafka.acks": "1"}).producer_config()["acks"] == "1"
    with pytest.raises(KafkaSinkError, match="kafka.bootstrap.servers"):
        SinkOptions.parse({"topic": "t"})
