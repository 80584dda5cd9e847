"""Topic set-up and reachability checks that work against any Kafka, embedded or not."""

from __future__ import annotations

import logging
import time
from typing import Mapping

from confluent_kafka import KafkaException
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from streaming.kafka import clients

log = logging.getLogger(__name__)


class KafkaUnreachable(RuntimeError):
    pass


MAX_SEGMENT_MS = 3_600_000
MIN_SEGMENT_MS = 60_000  # the least Kafka 5 accepts


def retention_config(retention_ms: int) -> dict[str, str]:
    """retention.ms and a segment.ms that lets it act: Kafka deletes only closed segments, and
    its default one (7 days or 1 GiB) would keep a short retention's records for days. A segment
    rolls at a quarter of the retention, at most hourly, so records outlive it by a quarter."""
    config = {"retention.ms": str(retention_ms)}
    if retention_ms > 0:
        config["segment.ms"] = str(max(MIN_SEGMENT_MS, min(retention_ms // 4, MAX_SEGMENT_MS)))
    return config


def retention_text(retention_ms: int) -> str:
    """retention.ms as a person reads it; Kafka's -1 keeps records for ever."""
    if retention_ms < 0:
        return "unlimited"
    seconds, milliseconds = divmod(retention_ms, 1000)
    for unit, size in (("day", 86_400), ("hour", 3600), ("minute", 60), ("second", 1)):
        if retention_ms and not milliseconds and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'' if count == 1 else 's'}"
    return f"{retention_ms} ms"


def wait_until_reachable(config: Mapping[str, str], timeout_s: float = 30.0) -> None:
    """Block until the cluster answers a metadata request, or raise KafkaUnreachable."""
    admin = clients.admin(config)
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=min(5.0, max(0.5, deadline - time.monotonic())))
            return
        except KafkaException as exc:
            last_error = exc
            time.sleep(0.2)
    raise KafkaUnreachable(
        f"cannot reach Kafka at {config.get('bootstrap.servers')} within {timeout_s:.0f} s"
        + (f" ({last_error.args[0].str()})" if last_error and last_error.args else "")
    )


def ensure_topic(config: Mapping[str, str], topic: str, partitions: int, retention_ms: int,
                 topic_config: Mapping[str, str] | None = None) -> bool:
    """Create the topic if missing, with `retention_config` under `topic_config`. Returns True if
    it was created."""
    admin = clients.admin(config)
    if topic in admin.list_topics(timeout=10).topics:
        return False
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=-1,
                  config={**retention_config(retention_ms), **(topic_config or {})})],
        operation_timeout=10,
    )
    try:
        futures[topic].result(timeout=15)
    except KafkaException as exc:
        error = exc.args[0]
        if error.name() == "TOPIC_ALREADY_EXISTS":
            return False
        raise RuntimeError(f"cannot create topic '{topic}': {error.str()}") from None
    # Metadata can lag behind creation; wait until every partition is visible and has a leader
    # (the first reads would otherwise fail with NOT_LEADER_FOR_PARTITION).
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic=topic, timeout=5).topics.get(topic)
        if (meta is not None and meta.error is None and len(meta.partitions) == partitions
                and all(p.leader >= 0 and p.error is None for p in meta.partitions.values())):
            break
        time.sleep(0.1)
    return True


def apply_retention(config: Mapping[str, str], topic: str, retention_ms: int) -> int | None:
    """Give an existing topic `retention_config(retention_ms)`. Returns the retention.ms it had
    when it was another, None when it already had this one."""
    admin = clients.admin(config)
    resource = ConfigResource(ResourceType.TOPIC, topic)
    try:
        current = admin.describe_configs([resource])[resource].result(timeout=15)
        had = int(current["retention.ms"].value)
        wanted = retention_config(retention_ms)
        if all(current[key].value == value for key, value in wanted.items() if key in current):
            return None
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET) for key, value in wanted.items()])
        admin.incremental_alter_configs([resource])[resource].result(timeout=15)
    except KafkaException as exc:
        raise RuntimeError(f"cannot set the retention of topic '{topic}': {exc.args[0].str()}") from None
    return had
