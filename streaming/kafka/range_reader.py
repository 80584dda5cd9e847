"""Reads a micro-batch's Kafka records in this process: the offset ranges Spark's source chose
for the batch (its offset log), fetched by one long-lived librdkafka consumer, as the same
Arrow columns the source gives. A live batch is then written without a Spark job, whose
fixed cost was most of its time (docs/live-batch.md).

Spark still decides every batch's ranges and records them before the sink runs, so a batch
run again after a crash reads the same records either way. Anything unusual (a range that no
longer starts where asked, a broker error, a range not read in time) gives None, and the
caller reads the batch through Spark, whose rules for it (failOnDataLoss, losses) apply.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Mapping

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, TopicPartition

from streaming.kafka.clients import consumer

log = logging.getLogger(__name__)

# The columns of Spark's Kafka source, as its Arrow batches carry them (headers not included).
KAFKA_RECORDS = pa.schema([
    ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
    ("offset", pa.int64()), ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
])
# librdkafka's timestamp types -> the Java client's ids, which Spark's timestampType column holds.
TIMESTAMP_TYPE_IDS = {0: -1, 1: 0, 2: 1}  # not available, create time, log append time
# Our consumer's settings, under the user's: the Java client's isolation (Spark's source reads
# what it reads), no waiting on an empty fetch, and an error rather than a jump when a range's
# start is gone.
READER_DEFAULTS = {"isolation.level": "read_uncommitted", "fetch.wait.max.ms": "10"}
READER_OWN = {"enable.partition.eof": True, "auto.offset.reset": "error"}


class RangeReader:
    """One consumer, assigned a batch's ranges for the time of a read and then nothing (so it
    fetches nothing between batches). Not thread-safe: one query's batches run one at a time."""

    def __init__(self, config: Mapping[str, str], timeout_s: float = 2.0):
        self.config = dict(config)
        self.timeout_s = timeout_s
        self._consumer: Consumer | None = None
        self.gave_up: str | None = None  # why a read last fell back to Spark
        self._lock = threading.Lock()

    def read(self, ranges: pa.Table) -> pa.Table | None:
        """ranges: topic, partition, start_offset, end_offset (a batch's ledger rows) -> the
        records in them (KAFKA_RECORDS, by partition and offset), or None to read through Spark."""
        with self._lock:  # a stop's close() waits for a read under way (at most timeout_s)
            try:
                return self._read(ranges)
            except Exception as exc:  # noqa: BLE001 - any failure here is Spark's read instead
                self._give_up(f"the driver's read failed: {exc}")
                self._close()
                return None

    def _read(self, ranges: pa.Table) -> pa.Table | None:
        wanted = {(t, p): (s, e) for t, p, s, e in zip(*(ranges[c].to_pylist() for c in
                                                          ("topic", "partition", "start_offset", "end_offset")))
                  if e > s}
        if not wanted:
            return KAFKA_RECORDS.empty_table()
        client = self._consumer
        if client is None:
            client = self._consumer = consumer({**READER_DEFAULTS, **self.config}, "batch-reader", **READER_OWN)
        client.assign([TopicPartition(t, p, s) for (t, p), (s, _) in sorted(wanted.items())])
        try:
            columns = self._fetch(client, wanted)
        finally:
            client.unassign()
        if columns is None:
            return None
        records = pa.table(columns, schema=KAFKA_RECORDS).sort_by([("topic", "ascending"), ("partition", "ascending"),
                                                                     ("offset", "ascending")])
        return records if self._starts_as_asked(records, wanted) else None

    def _fetch(self, client: Consumer, wanted: dict[tuple[str, int], tuple[int, int]]) -> dict[str, list] | None:
        columns: dict[str, list] = {name: [] for name in KAFKA_RECORDS.names}
        pending = set(wanted)
        next_offset: dict[tuple[str, int], int] = {}
        deadline = time.monotonic() + self.timeout_s
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                self._give_up(f"ranges {sorted(pending)} not read within {self.timeout_s:g} s")
                return None
            # consume() waits until it has that many or its timeout has passed: ask for what is
            # left, so a batch's last record ends the wait, and a gap (a marker) costs 10 ms a round.
            left_to_read = sum(wanted[tp][1] - max(wanted[tp][0], next_offset.get(tp, 0)) for tp in pending)
            for message in client.consume(num_messages=max(1, min(left_to_read, 100_000)), timeout=min(left, 0.01)):
                where = (message.topic(), message.partition())
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        self._give_up(f"Kafka said {error.str()}")
                        return None
                    if where in pending and (message.offset() or 0) >= wanted[where][1]:
                        pending.discard(where)  # the end was a marker, not a record
                    continue
                if where not in wanted:
                    continue
                offset = message.offset()
                if offset is None:
                    continue
                if offset >= wanted[where][1]:
                    pending.discard(where)
                    continue
                if offset < next_offset.get(where, wanted[where][0]):
                    continue  # before the range, or had: left from an earlier assignment
                kind, millis = message.timestamp()
                columns["key"].append(message.key())
                columns["value"].append(message.value())
                columns["topic"].append(where[0])
                columns["partition"].append(where[1])
                columns["offset"].append(offset)
                columns["timestamp"].append(millis * 1000 if kind else None)
                columns["timestampType"].append(TIMESTAMP_TYPE_IDS.get(kind, -1))
                next_offset[where] = offset + 1
                if offset == wanted[where][1] - 1:
                    pending.discard(where)
        return columns

    def _starts_as_asked(self, records: pa.Table, wanted: dict[tuple[str, int], tuple[int, int]]) -> bool:
        """Whether each range's first record is at its start: otherwise Kafka no longer holds
        its head (or it is a marker), which Spark's source rules on."""
        firsts = records.group_by(["topic", "partition"], use_threads=False).aggregate([("offset", "min")])
        found = {(t, p): o for t, p, o in zip(firsts["topic"].to_pylist(), firsts["partition"].to_pylist(),
                                               firsts["offset_min"].to_pylist())}
        moved = sorted(tp for tp, (start, _) in wanted.items() if found.get(tp) != start)
        if moved:
            self._give_up(f"ranges {moved} do not start where the batch's offsets say")
            return False
        return True

    def _give_up(self, why: str) -> None:
        if why != self.gave_up:
            log.info("reading a batch through Spark: %s", why)
        self.gave_up = why

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        client, self._consumer = self._consumer, None
        if client is not None:
            try:
                client.close()
            except Exception as exc:  # noqa: BLE001 - a consumer that failed may not close cleanly
                log.debug("closing the batch reader: %s", exc)
