"""A Kafka streaming sink for Spark on PySpark's Python Data Source API: the writing half of
format("pykafka"), mirroring Spark's kafka sink.

    df.writeStream.format("pykafka")
      .option("kafka.bootstrap.servers", "127.0.0.1:9092")
      .option("topic", "trades")
      .option("checkpointLocation", "...")
      .start()

Columns, as in Spark:
    value      string or binary     required
    key        string or binary     optional (NULL: no key)
    topic      string               optional; the `topic` option wins over it
    partition  int                  optional (NULL: the producer's partitioner, by key)
    headers    array<struct<key: string, value: binary>>   optional
Any other column is ignored.

Options:
    kafka.bootstrap.servers   required
    topic                     the topic of every row (else the `topic` column)
    kafka.*                   passed to the confluent-kafka (librdkafka) producer

Delivery guarantee: at-least-once, as with Spark's sink. Each task produces its rows with an
idempotent producer (librdkafka's retries never duplicate or reorder), flushes, and checks
every delivery report; any failed record fails the task, so the micro-batch fails and is run
again from the checkpoint. What a failed or interrupted batch had already delivered is then
sent a second time, so consumers must tolerate duplicates (the pipeline deduplicates by
`trade_id`). Nothing is dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping

from pyspark.sql import types as T
from pyspark.sql.datasource import WriterCommitMessage

from streaming.kafka.options import KafkaSinkError, SinkOptions

try:  # Spark >= 4.1: tasks receive Arrow record batches instead of one Python Row per record
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamWriterBase
except ImportError:  # pragma: no cover - Spark 4.0
    from pyspark.sql.datasource import DataSourceStreamWriter as _StreamWriterBase

HEADERS_TYPE = "array<struct<key: string, value: binary>>"


def _is_string_or_binary(data_type: T.DataType) -> bool:
    return isinstance(data_type, (T.StringType, T.BinaryType))


def _is_headers(data_type: T.DataType) -> bool:
    if not isinstance(data_type, T.ArrayType) or not isinstance(data_type.elementType, T.StructType):
        return False
    fields = {f.name: f.dataType for f in data_type.elementType.fields}
    return (set(fields) == {"key", "value"} and isinstance(fields["key"], T.StringType)
            and _is_string_or_binary(fields["value"]))


COLUMN_CHECKS = {  # column -> (type check, what it must be)
    "value": (_is_string_or_binary, "string or binary"),
    "key": (_is_string_or_binary, "string or binary"),
    "topic": (lambda t: isinstance(t, T.StringType), "string"),
    "partition": (lambda t: isinstance(t, (T.IntegerType, T.LongType)), "int"),
    "headers": (_is_headers, HEADERS_TYPE),
}
REQUIRED_COLUMNS_TEXT = (
    "a 'value' column (string or binary), and optionally 'key' (string or binary), "
    f"'topic' (string), 'partition' (int) and 'headers' ({HEADERS_TYPE})"
)


def check_schema(schema: T.StructType, topic_option: str | None) -> None:
    """Validate the stream's columns up front, with a message that says what is needed."""
    columns = {f.name: f.dataType for f in schema.fields}
    got = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in schema.fields) or "no columns"
    if "value" not in columns:
        raise KafkaSinkError(
            f"the Kafka sink needs {REQUIRED_COLUMNS_TEXT}; got {got}. "
            "Build them with e.g. select(col('account_id').alias('key'), to_json(struct('*')).alias('value'))"
        )
    for name, (fits, expected) in COLUMN_CHECKS.items():
        if name in columns and not fits(columns[name]):
            raise KafkaSinkError(f"the Kafka sink's '{name}' column must be {expected}, "
                                 f"got {columns[name].simpleString()} (it needs {REQUIRED_COLUMNS_TEXT})")
    if topic_option is None and "topic" not in columns:
        raise KafkaSinkError("the Kafka sink needs a topic: set the 'topic' option or add a 'topic' column")


@dataclass
class SentRecords(WriterCommitMessage):
    records: int


def _as_bytes(value) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def _rows(iterator: Iterable) -> Iterator[Mapping]:
    """Arrow record batches (Spark >= 4.1) or Rows, as mappings of column -> value."""
    for item in iterator:
        if hasattr(item, "to_pylist"):
            yield from item.to_pylist()
        else:
            yield item.asDict()


class DeliveryReports:
    """Counts librdkafka's delivery reports; remembers the first failure."""

    def __init__(self):
        self.delivered = 0
        self.failed = 0
        self.first_error: str | None = None

    def __call__(self, err, msg) -> None:
        if err is None:
            self.delivered += 1
            return
        self.failed += 1
        if self.first_error is None:
            self.first_error = f"{err.name()}: {err.str()} (topic '{msg.topic()}')"


class KafkaStreamWriter(_StreamWriterBase):
    def __init__(self, options: SinkOptions):
        self.options = options

    @classmethod
    def create(cls, options: Mapping[str, str], schema: T.StructType) -> "KafkaStreamWriter":
        """Fail at query start, on the driver, for a wrong schema or a wrong client setting."""
        from confluent_kafka import KafkaException, Producer

        parsed = SinkOptions.parse(options)
        check_schema(schema, parsed.topic)
        try:
            Producer(parsed.producer_config())  # librdkafka rejects unknown or invalid settings here
        except KafkaException as exc:
            raise KafkaSinkError(f"invalid Kafka producer setting: {exc.args[0].str()}") from None
        return cls(parsed)

    def write(self, iterator) -> SentRecords:
        from confluent_kafka import KafkaException, Producer

        producer = Producer(self.options.producer_config())
        reports = DeliveryReports()
        sent = 0
        try:
            for row in _rows(iterator):
                if reports.failed:
                    break  # the batch fails anyway: stop sending more of it
                self._produce(producer, row, reports)
                sent += 1
            undelivered = producer.flush(self.options.flush_timeout_s)
        except KafkaException as exc:  # rejected before sending, e.g. over message.max.bytes
            raise KafkaSinkError(f"Kafka rejected a record: {exc.args[0].str()}; the batch fails and "
                                 "is retried from the checkpoint") from None
        if reports.failed or undelivered:
            raise KafkaSinkError(
                f"Kafka did not acknowledge {reports.failed + undelivered} of {sent} records "
                f"(first error: {reports.first_error or 'no delivery report before the timeout'}); "
                "the batch fails and is retried from the checkpoint"
            )
        return SentRecords(records=reports.delivered)

    def _produce(self, producer, row: Mapping, reports: DeliveryReports) -> None:
        topic = self.options.topic or row.get("topic")
        if topic is None:
            raise KafkaSinkError("a row has a null 'topic': set the 'topic' option for a default topic")
        extra = {}
        if row.get("partition") is not None:
            extra["partition"] = int(row["partition"])
        if row.get("headers"):
            extra["headers"] = [(h["key"], _as_bytes(h["value"])) for h in row["headers"]]
        while True:
            try:
                producer.produce(topic, value=_as_bytes(row["value"]), key=_as_bytes(row.get("key")),
                                 on_delivery=reports, **extra)
                break
            except BufferError:  # the local queue is full: serve delivery reports, then retry
                producer.poll(0.1)
        producer.poll(0)

    def commit(self, messages, batchId) -> None:
        pass  # every record was acknowledged in write(); progress lives in Spark's checkpoint

    def abort(self, messages, batchId) -> None:
        pass  # records already delivered stay: at-least-once, the retry sends them again
