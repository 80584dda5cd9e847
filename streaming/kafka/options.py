"""The options of format("pykafka"), parsed once for both halves (reader.py, writer.py).

They mirror Spark's format("kafka"):

    kafka.bootstrap.servers   required
    kafka.*                   passed to the confluent-kafka (librdkafka) client

Reading:
    subscribe                 comma-separated topics
    startingOffsets           "earliest" | "latest" | '{"trades": {"0": 42, "1": -2}}'
                              (-2 = earliest, -1 = latest, as in Spark)
    startingTimestamp         milliseconds since the epoch; wins over startingOffsets
    maxOffsetsPerTrigger      records per micro-batch, spread over partitions
    kafkaConsumer.pollTimeoutMs  how long a task waits for records before failing (default 120000)
    fetchOffset.retryTimeoutMs   how long the driver keeps trying to reach Kafka for offsets, a try
                              per trigger with no batch meanwhile, before failing the query (ours;
                              default 120000)
    failOnDataLoss            "true" (default) | "false": whether a query fails when offsets it expects
                              are gone (the broker lost its tail, retention removed unread records,
                              the topic was recreated); with false it logs the loss and reads on from
                              what the broker holds (reader.data_losses)
    maxTasks                  at most this many tasks per micro-batch, and one per 20,000 records,
                              partitions grouped by size (ours, not Spark's: a Python task has a fixed
                              cost; default: one task per partition)

Writing:
    topic                     the topic of every row (else the `topic` column)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping

from streaming.kafka.clients import producer_config

EARLIEST, LATEST = -2, -1
# A task that sees no record for this long while offsets remain declares the broker gone.
DEFAULT_READ_TIMEOUT_MS = 120_000
# The driver rides out a broker this long unreachable before failing the query.
DEFAULT_RETRY_TIMEOUT_MS = 120_000
LIBRDKAFKA_DELIVERY_TIMEOUT_MS = 300_000
# flush() waits for every delivery report; librdkafka reports a failure by its delivery timeout.
FLUSH_MARGIN_S = 30


class KafkaSourceError(RuntimeError):
    pass


class KafkaSinkError(RuntimeError):
    pass


def kafka_client_options(options: Mapping[str, str], error: type[Exception]) -> dict[str, str]:
    """The `kafka.*` options with the prefix stripped, for librdkafka; bootstrap servers required."""
    client = {k[len("kafka."):]: v for k, v in options.items() if k.lower().startswith("kafka.")}
    if "bootstrap.servers" not in client:
        raise error("option 'kafka.bootstrap.servers' is required, e.g. 127.0.0.1:9092")
    return client


def spark_kafka_options(client_config: Mapping[str, str]) -> dict[str, str]:
    """librdkafka settings -> the `kafka.*` options of format("pykafka"), for reading or writing."""
    return {f"kafka.{key}": value for key, value in client_config.items()}


@dataclass(frozen=True)
class SourceOptions:
    client: Mapping[str, str]
    topics: tuple[str, ...]
    starting_offsets: str = "earliest"
    starting_timestamp: int | None = None
    max_offsets_per_trigger: int | None = None
    read_timeout_ms: int = DEFAULT_READ_TIMEOUT_MS
    retry_timeout_ms: int = DEFAULT_RETRY_TIMEOUT_MS
    max_tasks: int | None = None
    fail_on_data_loss: bool = True

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> "SourceOptions":
        opts = {str(k): str(v) for k, v in options.items()}
        lower = {k.lower(): v for k, v in opts.items()}
        client = kafka_client_options(opts, KafkaSourceError)
        if "subscribe" not in lower:
            raise KafkaSourceError("option 'subscribe' is required: a comma-separated list of topics")
        topics = tuple(t.strip() for t in lower["subscribe"].split(",") if t.strip())
        max_offsets = lower.get("maxoffsetspertrigger")
        timestamp = lower.get("startingtimestamp")
        max_tasks = lower.get("maxtasks")
        try:
            max_offsets_value = int(max_offsets) if max_offsets else None
            timestamp_value = int(timestamp) if timestamp else None
            timeout = int(lower.get("kafkaconsumer.polltimeoutms", DEFAULT_READ_TIMEOUT_MS))
            retry_timeout = int(lower.get("fetchoffset.retrytimeoutms", DEFAULT_RETRY_TIMEOUT_MS))
            max_tasks_value = int(max_tasks) if max_tasks else None
        except ValueError as exc:
            raise KafkaSourceError(f"invalid numeric option: {exc}") from None
        if max_offsets_value is not None and max_offsets_value <= 0:
            raise KafkaSourceError("maxOffsetsPerTrigger must be positive")
        if max_tasks_value is not None and max_tasks_value <= 0:
            raise KafkaSourceError("maxTasks must be positive")
        fail_on_data_loss = lower.get("failondataloss", "true").strip().lower()
        if fail_on_data_loss not in ("true", "false"):
            raise KafkaSourceError(f"failOnDataLoss must be 'true' or 'false', got {fail_on_data_loss!r}")
        return cls(
            client=client,
            topics=topics,
            starting_offsets=lower.get("startingoffsets", "latest").strip(),
            starting_timestamp=timestamp_value,
            max_offsets_per_trigger=max_offsets_value,
            read_timeout_ms=timeout,
            retry_timeout_ms=retry_timeout,
            max_tasks=max_tasks_value,
            fail_on_data_loss=fail_on_data_loss == "true",
        )


def parse_starting_offsets(text: str, topics: tuple[str, ...]) -> dict[str, dict[str, int]] | str:
    text = text.strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        raise KafkaSourceError(
            f"startingOffsets must be 'earliest', 'latest' or JSON like "
            f'{{"{topics[0] if topics else "topic"}": {{"0": 42}}}}, got {text!r}'
        ) from None
    if not isinstance(parsed, dict) or not all(isinstance(v, dict) for v in parsed.values()):
        raise KafkaSourceError(f"startingOffsets JSON must map topic -> {{partition: offset}}, got {text!r}")
    return {t: {str(p): int(o) for p, o in parts.items()} for t, parts in parsed.items()}


@dataclass(frozen=True)
class SinkOptions:
    client: Mapping[str, str]
    topic: str | None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> "SinkOptions":
        opts = {str(k): str(v) for k, v in options.items()}
        topic = {k.lower(): v for k, v in opts.items()}.get("topic")
        return cls(client=kafka_client_options(opts, KafkaSinkError), topic=topic.strip() if topic else None)

    def producer_config(self) -> dict:
        return producer_config(self.client)

    @property
    def flush_timeout_s(self) -> float:
        timeout_ms = self.client.get("delivery.timeout.ms", self.client.get("message.timeout.ms"))
        return int(timeout_ms or LIBRDKAFKA_DELIVERY_TIMEOUT_MS) / 1000 + FLUSH_MARGIN_S
