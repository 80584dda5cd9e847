"""The options we hand Spark's own format("kafka"), built and checked here before Spark sees them.

The run's Kafka client settings are librdkafka's (the producer, the admin and the health checks
use confluent-kafka); Spark's connector runs the Java client. `java_client_options` translates
the settings the two name differently (SASL credentials, the CA file), so one
`client.properties` or `TRADE_SUMMARY_KAFKA_*` set serves both, and passes through the ones a
Java client already understands. Settings only librdkafka knows are left out, with their names
logged, since the Java client would only warn about each.
"""

from __future__ import annotations

import json
import logging
import math
import re
from datetime import timedelta
from typing import Mapping

log = logging.getLogger(__name__)

# librdkafka name -> the Java client's, where only the name differs.
RENAMED = {"sasl.mechanisms": "sasl.mechanism"}
# Settings both clients read under one name (the Java client's ProducerConfig/ConsumerConfig).
SHARED = {
    "bootstrap.servers", "security.protocol", "sasl.mechanism", "client.id", "client.dns.lookup",
    "request.timeout.ms", "session.timeout.ms", "socket.connection.setup.timeout.ms",
    "socket.connection.setup.timeout.max.ms", "reconnect.backoff.ms", "reconnect.backoff.max.ms",
    "retry.backoff.ms", "metadata.max.age.ms", "connections.max.idle.ms", "ssl.endpoint.identification.algorithm",
    "ssl.key.password", "ssl.keystore.location", "ssl.keystore.password", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.truststore.type", "ssl.keystore.type", "sasl.jaas.config",
    "sasl.login.callback.handler.class", "sasl.client.callback.handler.class", "sasl.kerberos.service.name",
    "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.scope", "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret", "max.partition.fetch.bytes", "fetch.max.bytes", "fetch.min.bytes",
    "fetch.max.wait.ms", "receive.buffer.bytes", "send.buffer.bytes", "linger.ms", "batch.size",
    "compression.type", "acks", "enable.idempotence", "delivery.timeout.ms", "max.request.size",
    "max.in.flight.requests.per.connection", "default.api.timeout.ms", "isolation.level",
}
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
# Spark's connector rejects these: it manages its consumers' groups, offsets and (de)serialisers.
SPARK_MANAGED = {"group.id", "auto.offset.reset", "key.deserializer", "value.deserializer", "key.serializer",
                 "value.serializer", "enable.auto.commit", "interceptor.classes"}


class KafkaOptionsError(ValueError):
    """A client setting Spark's connector cannot take; the message says which and why."""


def _jaas_quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def java_client_options(librdkafka: Mapping[str, str]) -> dict[str, str]:
    """librdkafka client settings -> the Java client's, as `kafka.*` options of format("kafka")."""
    config = {str(k).strip(): str(v) for k, v in librdkafka.items()}
    if "bootstrap.servers" not in config:
        raise KafkaOptionsError("the Kafka setting 'bootstrap.servers' is required, e.g. 127.0.0.1:9092")
    java: dict[str, str] = {}
    skipped = []
    for key, value in config.items():
        key = RENAMED.get(key, key)
        if key in SPARK_MANAGED:
            raise KafkaOptionsError(f"the Kafka setting {key!r} is managed by Spark's connector and cannot be set")
        if key in SHARED:
            java[key] = value
        elif key not in ("sasl.username", "sasl.password", "ssl.ca.location"):
            skipped.append(key)
    username, password = config.get("sasl.username"), config.get("sasl.password")
    if (username is not None or password is not None) and "sasl.jaas.config" not in java:
        mechanism = java.get("sasl.mechanism", "PLAIN").upper()
        if mechanism not in LOGIN_MODULES:
            raise KafkaOptionsError(f"sasl.username/sasl.password work with SASL mechanism PLAIN or SCRAM-SHA-256/512, "
                                    f"not {mechanism}: give the Java client's sasl.jaas.config instead")
        java["sasl.jaas.config"] = (f"{LOGIN_MODULES[mechanism]} required username={_jaas_quoted(username or '')} "
                                    f"password={_jaas_quoted(password or '')};")
    if "ssl.ca.location" in config and "ssl.truststore.location" not in java:
        java["ssl.truststore.type"] = "PEM"  # librdkafka's CA file is PEM; the Java client reads it as is
        java["ssl.truststore.location"] = config["ssl.ca.location"]
    if skipped:
        log.info("Kafka settings only librdkafka reads, not given to Spark's connector: %s", ", ".join(sorted(skipped)))
    return {f"kafka.{key}": value for key, value in java.items()}


# Spark's source asks Kafka for offsets through an admin client, retrying a failed request
# fetchOffset.numRetries times, fetchOffset.retryIntervalMs apart, each waiting up to the
# client's default.api.timeout.ms.
OFFSET_REQUEST_TIMEOUT_MS = 10_000
OFFSET_RETRY_INTERVAL_MS = 1_000


def offset_retries(ride_out: timedelta, request_timeout_ms: int | str | None = None) -> dict[str, str]:
    """How long an unreachable Kafka is ridden out, as the source's retry options (an admin
    request waits at least its client's request.timeout.ms)."""
    request_ms = int(request_timeout_ms or OFFSET_REQUEST_TIMEOUT_MS)
    tries = max(1, math.ceil(ride_out.total_seconds() * 1000 / (request_ms + OFFSET_RETRY_INTERVAL_MS)))
    return {"fetchOffset.numRetries": str(tries), "fetchOffset.retryIntervalMs": str(OFFSET_RETRY_INTERVAL_MS),
            "kafka.request.timeout.ms": str(request_ms), "kafka.default.api.timeout.ms": str(request_ms)}


def source_options(client: Mapping[str, str], topic: str, *, fail_on_data_loss: bool = True,
                   ride_out: timedelta = timedelta(minutes=2), starting_timestamp_ms: int | None = None,
                   starting_offsets: Mapping[tuple[str, int], int] | None = None,
                   max_offsets_per_trigger: int | None = None, min_partitions: int | None = None,
                   max_records_per_partition: int | None = None) -> dict[str, str]:
    """The reading options: the topic from its earliest retained record (a restart resumes from
    the checkpoint instead), from a Kafka time, or from given offsets."""
    java = java_client_options(client)
    options = {
        # Bigger fetches while catching up (the Java client's default is 1 MiB a partition), and a
        # task's new consumer not left waiting on its first fetches for the default 500 ms: the
        # tasks read ranges the log already holds (docs/real-parts-ab.md).
        "kafka.max.partition.fetch.bytes": str(8 * 2**20),
        "kafka.fetch.max.wait.ms": "50",
        **java,
        "subscribe": topic,
        "startingOffsets": "earliest",
        "failOnDataLoss": str(fail_on_data_loss).lower(),
        # Spark includes headers only when asked; the rest of the columns are the usual seven.
        "includeHeaders": "false",
        **offset_retries(ride_out, java.get("kafka.request.timeout.ms")),
    }
    if starting_offsets:
        by_topic: dict[str, dict[str, int]] = {}
        for (name, partition), offset in sorted(starting_offsets.items()):
            by_topic.setdefault(name, {})[str(partition)] = int(offset)
        options["startingOffsets"] = json.dumps(by_topic)
    elif starting_timestamp_ms is not None:
        options["startingTimestamp"] = str(int(starting_timestamp_ms))
        # A partition with no record at or after that time starts at its end, not with an error.
        options["startingOffsetsByTimestampStrategy"] = "latest"
    if max_offsets_per_trigger:
        options["maxOffsetsPerTrigger"] = str(int(max_offsets_per_trigger))
    if min_partitions:
        options["minPartitions"] = str(int(min_partitions))
    if max_records_per_partition:
        options["maxRecordsPerPartition"] = str(int(max_records_per_partition))
    return options


def sink_options(client: Mapping[str, str], topic: str) -> dict[str, str]:
    """The writing options: every row to `topic`, with an idempotent acks=all producer unless the
    user's settings say otherwise."""
    java = java_client_options(client)
    return {"kafka.acks": "all", "kafka.enable.idempotence": "true", **java, "topic": topic}


OFFSET_CHANGED = re.compile(r"Partition (?P<topic>\S+)-(?P<partition>\d+)(?:'s)? offset was changed from "
                            r"(?P<before>\d+) to (?P<after>\d+)")
DATA_LOSS = re.compile(r"Some data may have been lost[^\n]*(?:\n[^\n]*){0,6}?\n?Reason: ?(?P<reason>[^\n]+)")
WHAT_TO_DO = ("Records read before are in bronze. To read on from what the broker holds, restart with "
              "--fail-on-data-loss false; to read again from a time, use --replay-from "
              "(docs/kafka.md#when-kafka-loses-records)")


UNREACHABLE = re.compile(r"org\.apache\.kafka\.common\.errors\.(?:TimeoutException|DisconnectException): ?"
                         r"(?P<what>[^\n]*)")


def explain_kafka_failure(error_text: str) -> str | None:
    """A query's failure that Kafka caused, said in the operator's terms (what was lost, or that
    Kafka did not answer, and what to do); None for another error."""
    lost = explain_data_loss(error_text)
    if lost is not None:
        return lost
    unreachable = UNREACHABLE.search(error_text)
    if unreachable is not None:
        return (f"cannot reach Kafka: no answer within --kafka-retry-timeout ({unreachable['what'].strip()}). "
                "Check that the broker is up and the client settings")
    return None


def explain_data_loss(error_text: str) -> str | None:
    """Spark's data-loss failure -> what was lost and what to do, or None for another error."""
    changed = OFFSET_CHANGED.search(error_text)
    if changed is not None:
        return (f"Kafka partition {changed['topic']}/{changed['partition']} ends at offset {changed['after']}, but "
                f"the query has read up to {changed['before']}: the broker lost records, retention removed them, or "
                f"the topic was recreated. {WHAT_TO_DO}")
    lost = DATA_LOSS.search(error_text)
    if lost is not None:
        return f"Kafka no longer holds records the query expects ({lost['reason'].strip()}). {WHAT_TO_DO}"
    return None
