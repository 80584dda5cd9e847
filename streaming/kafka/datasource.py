"""format("pykafka"): the one registration point of our Kafka data source, naming both halves.

    spark.dataSource.register(KafkaDataSource)
    spark.readStream.format("pykafka").option("subscribe", "trades")...   # reader.py
    df.writeStream.format("pykafka").option("topic", "trades")...         # writer.py

Spark's own format("kafka") needs a connector jar that cannot be installed here; this mirrors
its columns and option names (options.py), so the pipeline reads as Spark code does.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource

from streaming.kafka.options import SourceOptions
from streaming.kafka.reader import KafkaStreamReader
from streaming.kafka.writer import KafkaStreamWriter

SOURCE_NAME = "pykafka"
KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)


class KafkaDataSource(DataSource):
    """Register with spark.dataSource.register(KafkaDataSource); read and write with
    format("pykafka"), as Spark's format("kafka") does both."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return KAFKA_SCHEMA

    def streamReader(self, schema) -> KafkaStreamReader:
        return KafkaStreamReader(SourceOptions.parse(self.options))

    def streamWriter(self, schema, overwrite) -> KafkaStreamWriter:
        return KafkaStreamWriter.create(self.options, schema)
