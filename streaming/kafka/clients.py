"""Every librdkafka client of the project, built in one place: the shared logger, the
producer's idempotent defaults, and the one end-offsets lookup.

Consumers here never subscribe: they ask for metadata and offsets, or assign a known offset
range and close, so no consumer group holds our progress and no idle consumer is left polling.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from typing import Any, Mapping

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

LOGGER_NAME = "streaming.librdkafka"
# Our defaults; a client setting of the user's overrides them (e.g. a cluster without
# idempotent-write ACLs): retries never duplicate or reorder a record.
PRODUCER_DEFAULTS = {"enable.idempotence": "true", "acks": "all", "linger.ms": "5"}


class OncePerKind(logging.Filter):
    """Lets the first message of a kind through (the same text but for its numbers: ports,
    milliseconds, counts), then only counts its repeats, and lets the next one through once
    `window_s` has passed, saying how many it stood for. With the broker down, librdkafka
    otherwise writes a line per connection attempt: about 1,600 in 30 s."""

    MAX_KINDS = 1000

    def __init__(self, window_s: float = 60.0, clock=time.monotonic):
        super().__init__()
        self.window_s = window_s
        self._clock = clock
        self._kinds: dict[str, list] = {}  # kind -> [when let through, repeats since]
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        kind, now = re.sub(r"\d+", "#", text), self._clock()
        with self._lock:
            seen = self._kinds.get(kind)
            if seen is not None and now - seen[0] < self.window_s:
                seen[1] += 1
                return False
            if seen is None and len(self._kinds) >= self.MAX_KINDS:
                self._kinds.clear()
            repeats = seen[1] if seen else 0
            self._kinds[kind] = [now, 0]
        if repeats:
            record.msg, record.args = f"{text} (and {repeats} more like it in the last {self.window_s:g} s)", ()
        return True


def librdkafka_logger() -> logging.Logger:
    """librdkafka logs every failed connection attempt: only its warnings are shown, and a
    repeated one once a minute with a count."""
    logger = logging.getLogger(LOGGER_NAME)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.WARNING)
    if not any(isinstance(f, OncePerKind) for f in logger.filters):
        logger.addFilter(OncePerKind())
    return logger


def _logged(config: Mapping[str, Any]) -> dict[str, Any]:
    """librdkafka's settings with its log sent to ours (a logger object: its stubs allow only scalars)."""
    return {**config, "logger": librdkafka_logger()}


def producer_config(config: Mapping[str, str], **overrides) -> dict[str, Any]:
    return _logged({**PRODUCER_DEFAULTS, **config, **overrides})


def producer(config: Mapping[str, str], **overrides) -> Producer:
    """An idempotent, acks=all producer with the user's settings over ours."""
    return Producer(producer_config(config, **overrides))


def consumer(config: Mapping[str, str], purpose: str, **overrides) -> Consumer:
    """A consumer that commits nothing, in a group of its own (`purpose` names it in the broker)."""
    return Consumer(_logged({**config, "group.id": f"trade-summary-{purpose}-{uuid.uuid4().hex[:8]}",
                             "enable.auto.commit": False, **overrides}))


def admin(config: Mapping[str, str]) -> AdminClient:
    return AdminClient(_logged(config))


def partitions_of(client: Consumer, topic: str, timeout_s: float) -> list[int]:
    """The topic's partitions, or [] when it does not exist (yet)."""
    metadata = client.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if metadata is None or metadata.error is not None:
        return []
    return sorted(metadata.partitions)


def watermark_offsets(client: Consumer, topic: str, timeout_s: float,
                      partitions: list[int] | None = None) -> dict[int, tuple[int, int]]:
    """partition -> (low, high): the first retained offset and the end offset."""
    parts = partitions_of(client, topic, timeout_s) if partitions is None else partitions
    return {p: client.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s) for p in parts}


def log_starts(config: Mapping[str, str], partitions: list[tuple[str, int]], timeout_s: float = 5.0
               ) -> dict[tuple[str, int], int]:
    """(topic, partition) -> the first offset the broker still holds, asked by a consumer of its own."""
    client = consumer(config, "log-starts")
    try:
        return {(t, p): client.get_watermark_offsets(TopicPartition(t, p), timeout=timeout_s)[0] for t, p in partitions}
    finally:
        client.close()


def offsets_at(config: Mapping[str, str], topic: str, since_ms: int, timeout_s: float = 10.0
               ) -> dict[int, tuple[int, int, int]]:
    """partition -> (log start, end, the first offset with a Kafka time at or after `since_ms`,
    or the end when there is none)."""
    client = consumer(config, "replay-offsets")
    try:
        ends = watermark_offsets(client, topic, timeout_s)
        found = client.offsets_for_times([TopicPartition(topic, p, since_ms) for p in ends], timeout=timeout_s)
        return {tp.partition: (ends[tp.partition][0], ends[tp.partition][1],
                               tp.offset if tp.offset >= 0 else ends[tp.partition][1]) for tp in found}
    finally:
        client.close()


class EndOffsets:
    """The topic's end offsets, asked of the broker by one long-lived consumer that never
    subscribes (for the health monitor and the benchmark): one request for all partitions,
    whose list is asked again every `partitions_every_s` (or while the topic has none)."""

    def __init__(self, config: Mapping[str, str], topic: str, partitions_every_s: float = 30.0):
        self.topic = topic
        self._config = config
        self._consumer = consumer(config, "end-offsets")
        self._partitions: list[int] = []
        self._partitions_at = float("-inf")
        self._partitions_every_s = partitions_every_s

    def read(self, timeout_s: float = 2.0) -> dict[str, int]:
        """"topic:partition" -> end offset. After a failure the next read starts from a new
        consumer, with the broker's metadata as it is then: after a stall the old one's next
        read failed on a leader epoch the broker had fenced meanwhile."""
        try:
            return self._read(timeout_s)
        except KafkaException:
            self._partitions = []
            old, self._consumer = self._consumer, consumer(self._config, "end-offsets")
            old.close()
            raise

    def _read(self, timeout_s: float) -> dict[str, int]:
        if not self._partitions or time.monotonic() - self._partitions_at >= self._partitions_every_s:
            self._partitions = partitions_of(self._consumer, self.topic, timeout_s)
            self._partitions_at = time.monotonic()
        if not self._partitions:
            return {}
        # A timestamp of -1 asks for the end offset (ListOffsets' LATEST), all partitions at once.
        ends = self._consumer.offsets_for_times([TopicPartition(self.topic, p, -1) for p in self._partitions],
                                                timeout=timeout_s)
        found = {end.partition: end.offset for end in ends if end.error is None}
        for end in ends:
            if end.error is not None:  # its leader moved (or is not known yet): asked alone, which finds it
                self._partitions = []  # and the list asked again next time
                found[end.partition] = self._consumer.get_watermark_offsets(
                    TopicPartition(self.topic, end.partition), timeout=timeout_s)[1]
        return {f"{self.topic}:{p}": found[p] for p in sorted(found)}

    def close(self) -> None:
        self._consumer.close()
