"""A Kafka streaming source for Spark on PySpark's Python Data Source API.

Spark's own `format("kafka")` needs a connector jar that cannot be installed here, so this
source mirrors it: the same columns (key, value, topic, partition, offset, timestamp,
timestampType) and the same option names (options.py lists them).

Offsets are {topic: {partition: next offset to read}} dicts that Spark keeps in the query
checkpoint, so a restart resumes exactly where the last committed batch ended.

The driver never subscribes: it asks for watermark offsets, and each task assigns one
partition, reads a known offset range and closes its consumer. No consumer sits idle in
a poll loop (the embedded broker has no fetch long-poll, so an idle one would spin).

The same format("pykafka") also writes a stream to Kafka: see writer.py and datasource.py.
"""

from __future__ import annotations

import ctypes
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Mapping

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

try:  # Spark >= 4.2: read limits and Trigger.AvailableNow support
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - older Spark
    ReadLimit = ReadAllAvailable = ReadMaxRows = None

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass

from streaming.kafka import clients
from streaming.kafka.options import EARLIEST, LATEST, KafkaSourceError, SourceOptions, parse_starting_offsets

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

RECORDS_PER_ARROW_BATCH = 20_000
MIN_RECORDS_PER_TASK = 20_000  # with maxTasks: a smaller batch is read by fewer tasks
MAX_RESPONSE_BYTES = 2_147_483_647  # librdkafka's upper bound for receive.message.max.bytes
TRIM_AFTER_RECORDS = 10_000  # a read at least this large gives its freed memory back to the OS


# Offsets: {topic: {"partition": offset}}. Spark needs primitive keys, so partitions are strings.
Offsets = dict[str, dict[str, int]]


def flatten(offsets: Offsets) -> dict[tuple[str, int], int]:
    return {(topic, int(p)): int(o) for topic, parts in offsets.items() for p, o in parts.items()}


def nest(flat: Mapping[tuple[str, int], int]) -> Offsets:
    out: Offsets = {}
    for (topic, partition), offset in sorted(flat.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def cap_offsets(
    start: Mapping[tuple[str, int], int], latest: Mapping[tuple[str, int], int], max_records: int
) -> dict[tuple[str, int], int]:
    """Advance each partition from start towards latest, at most max_records in total.

    Shares are proportional to each partition's backlog (as Spark's Kafka source does), and
    at least one record per non-empty partition so that a small limit never stalls one.
    """
    backlog = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(backlog.values())
    if total <= max_records:
        return dict(latest)
    shares = {tp: 0 if lag == 0 else min(lag, max(1, int(lag * max_records / total))) for tp, lag in backlog.items()}
    # Rounding down leaves a few records over: give them out too, or they trail as a batch of their own.
    left = max_records - sum(shares.values())
    for tp in sorted(backlog, key=lambda tp: backlog[tp] - shares[tp], reverse=True):
        extra = max(0, min(left, backlog[tp] - shares[tp]))
        shares[tp] += extra
        left -= extra
    return {tp: start.get(tp, high) + shares[tp] for tp, high in latest.items()}


@dataclass(frozen=True)
class DataLoss:
    """Offsets of one partition the query expected to read that the broker no longer has."""

    topic: str
    partition: int
    expected: int  # the next offset the checkpoint says to read
    low: int  # the broker's earliest offset
    high: int  # the broker's end offset

    def __str__(self) -> str:
        where = f"Kafka partition {self.topic}/{self.partition}"
        if self.high < self.expected:
            return (f"{where} ends at offset {self.high}, but the query has read up to {self.expected}: offsets "
                    f"{self.high} to {self.expected - 1} are gone from the broker (it lost its tail in a crash, "
                    "or the topic was recreated), and new records will take them again")
        return (f"{where} starts at offset {self.low}, but the query has read only up to {self.expected}: "
                f"offsets {self.expected} to {self.low - 1} were removed (retention) before they were read")


def data_losses(expected: Mapping[tuple[str, int], int],
                marks: Mapping[tuple[str, int], tuple[int, int]]) -> list[DataLoss]:
    """Partitions whose (low, high) offsets no longer hold the offset the query reads next."""
    return [DataLoss(topic, partition, offset, *marks[(topic, partition)])
            for (topic, partition), offset in sorted(expected.items())
            if (topic, partition) in marks
            and (marks[(topic, partition)][1] < offset or marks[(topic, partition)][0] > offset)]


DATA_LOSS_ADVICE = ("Records the query read before are in bronze. To read on from what the broker holds "
                    "(records that now reuse those offsets included), run with --fail-on-data-loss false "
                    "(format(\"pykafka\") option failOnDataLoss=false); to read the topic again from a time, "
                    "--replay-from.")


class KafkaPartitionRange(InputPartition):
    def __init__(self, topic: str, partition: int, from_offset: int, until_offset: int):
        super().__init__((topic, partition, from_offset, until_offset))
        self.topic = topic
        self.partition = partition
        self.from_offset = from_offset
        self.until_offset = until_offset

    @property
    def records(self) -> int:
        return self.until_offset - self.from_offset


class KafkaRangeGroup(InputPartition):
    """The ranges one Spark task reads, one after another."""

    def __init__(self, ranges: list[KafkaPartitionRange]):
        super().__init__(tuple(r.value for r in ranges))
        self.ranges = ranges

    @property
    def records(self) -> int:
        return sum(r.records for r in self.ranges)


def group_ranges(ranges: list[KafkaPartitionRange], max_tasks: int | None,
                 min_records_per_task: int = MIN_RECORDS_PER_TASK) -> list[KafkaRangeGroup]:
    """At most `max_tasks` tasks, and no more than one per `min_records_per_task` records,
    each with about the same number of records (largest range first, into the lightest task).
    A task costs a Python worker round trip, a fixed cost that dominates a small micro-batch
    (docs/operations.md#spark-settings), so a live batch of a few thousand records is one task,
    and a catch-up batch one wave of tasks. Ranges are never split: each partition has one
    reader per batch, as Spark's Kafka source has."""
    if not max_tasks:
        return [KafkaRangeGroup([r]) for r in ranges]
    total = sum(r.records for r in ranges)
    tasks = max(1, min(max_tasks, -(-total // max(1, min_records_per_task))))
    if len(ranges) <= tasks:
        return [KafkaRangeGroup([r]) for r in ranges]
    groups: list[list[KafkaPartitionRange]] = [[] for _ in range(tasks)]
    loads = [0] * tasks
    for part in sorted(ranges, key=lambda r: r.records, reverse=True):
        lightest = loads.index(min(loads))
        groups[lightest].append(part)
        loads[lightest] += part.records
    return [KafkaRangeGroup(group) for group in groups if group]


def even_shares(ranges: list[KafkaPartitionRange], cores: int, max_records_per_task: int,
                min_records_per_task: int = MIN_RECORDS_PER_TASK) -> list[KafkaRangeGroup]:
    """Tasks with the same number of records each, in whole waves of `cores` tasks, none over
    `max_records_per_task`: ranges are cut where whole ones would leave a core idle (3
    partitions on 2 cores). A small batch is one task, as with group_ranges."""
    total = sum(r.records for r in ranges)
    tasks = max(1, min(cores, -(-total // max(1, min_records_per_task))))
    if total > tasks * max_records_per_task:
        tasks = -(-total // max_records_per_task)
        tasks = -(-tasks // cores) * cores
    per_task = -(-total // tasks)
    whole = group_ranges(ranges, tasks, min_records_per_task=1)
    if len(whole) == tasks and max(g.records for g in whole) <= per_task * 1.1:
        return whole
    groups, current, room = [], [], per_task
    for part in ranges:
        start = part.from_offset
        while start < part.until_offset:
            until = min(part.until_offset, start + room)
            current.append(KafkaPartitionRange(part.topic, part.partition, start, until))
            room -= until - start
            start = until
            if room == 0:
                groups.append(KafkaRangeGroup(current))
                current, room = [], per_task
    if current:
        groups.append(KafkaRangeGroup(current))
    return groups


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions):
        self.options = options
        self._consumer = None
        self._available_now_target: dict[tuple[str, int], int] | None = None
        self._unreachable_since: float | None = None  # time.monotonic() of the first failed try

    # -- broker queries (driver side) ------------------------------------------------------
    @property
    def _timeout_s(self) -> float:
        return min(15.0, self.options.read_timeout_ms / 1000)

    def _client(self):
        if self._consumer is None:
            self._consumer = clients.consumer(self.options.client, "source")  # metadata and offsets only
        return self._consumer

    def _topic_partitions(self) -> list[tuple[str, int]]:
        from confluent_kafka import KafkaException

        try:
            metadata = self._client().list_topics(timeout=self._timeout_s)
        except KafkaException as exc:
            raise KafkaSourceError(
                f"cannot reach Kafka at {self.options.client.get('bootstrap.servers')}: {exc.args[0].str()}"
            ) from None
        found = []
        for topic in self.options.topics:
            meta = metadata.topics.get(topic)
            if meta is None or meta.error is not None:
                continue  # not created yet: no data, and new partitions are picked up later
            found.extend((topic, p) for p in meta.partitions)
        return sorted(found)

    def _watermarks(self, tps) -> dict[tuple[str, int], tuple[int, int]]:
        from confluent_kafka import KafkaException

        out = {}
        for topic in sorted({topic for topic, _ in tps}):
            try:
                marks = clients.watermark_offsets(self._client(), topic, self._timeout_s,
                                                  partitions=[p for t, p in tps if t == topic])
            except KafkaException as exc:
                raise KafkaSourceError(
                    f"cannot read offsets of topic {topic} from "
                    f"{self.options.client.get('bootstrap.servers')}: {exc.args[0].str()}"
                ) from None
            out.update({(topic, partition): low_high for partition, low_high in marks.items()})
        return out

    def _offsets_for_time(self, tps, timestamp_ms: int, highs) -> dict[tuple[str, int], int]:
        from confluent_kafka import TopicPartition

        found = self._client().offsets_for_times(
            [TopicPartition(t, p, timestamp_ms) for t, p in tps], timeout=self._timeout_s
        )
        # A partition with nothing at or after the time starts at its end (Spark's "latest" strategy).
        return {(tp.topic, tp.partition): (tp.offset if tp.offset >= 0 else highs[(tp.topic, tp.partition)])
                for tp in found}

    # -- DataSourceStreamReader -----------------------------------------------------------
    def initialOffset(self) -> dict:
        tps = self._topic_partitions()
        marks = self._watermarks(tps)
        lows = {tp: lo for tp, (lo, _) in marks.items()}
        highs = {tp: hi for tp, (_, hi) in marks.items()}
        if self.options.starting_timestamp is not None:
            return nest(self._offsets_for_time(tps, self.options.starting_timestamp, highs))
        start = parse_starting_offsets(self.options.starting_offsets, self.options.topics)
        if start == "earliest":
            return nest(lows)
        if start == "latest":
            return nest(highs)
        given = flatten(start)
        resolved = {}
        for tp in tps:
            offset = given.get(tp, EARLIEST)
            resolved[tp] = lows[tp] if offset == EARLIEST else highs[tp] if offset == LATEST else offset
        return nest(resolved)

    def getDefaultReadLimit(self):
        if self.options.max_offsets_per_trigger and ReadMaxRows is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self._topic_partitions()
        self._available_now_target = {tp: hi for tp, (_, hi) in self._watermarks(tps).items()}

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        """Spark < 4.2 calls latestOffset(); 4.2+ calls latestOffset(start, limit)."""
        begin = flatten(start) if start else {}
        try:
            marks = self._watermarks(self._topic_partitions()) if begin or self._available_now_target is None else {}
        except KafkaSourceError as exc:
            if not begin:
                raise
            self._wait_for_kafka(exc)
            return start  # nothing new this trigger: the next one tries again
        if self._unreachable_since is not None:
            log.warning("Kafka reachable again after %.0f s", time.monotonic() - self._unreachable_since)
            self._unreachable_since = None
        if self._available_now_target is not None:
            latest = dict(self._available_now_target)
        else:
            latest = {tp: hi for tp, (_, hi) in marks.items()}
        rewound = self._data_loss(begin, marks)
        # Never go backwards (a partition missing from metadata for a moment keeps its offset),
        # except to where a broker that lost its tail ends now (failOnDataLoss=false).
        for tp, offset in begin.items():
            latest[tp] = rewound[tp] if tp in rewound else max(latest.get(tp, offset), offset)
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows) and begin:
            latest = cap_offsets({tp: {**begin, **rewound}.get(tp, 0) for tp in latest}, latest, limit.max_rows)
        return nest(latest)

    def _wait_for_kafka(self, error: KafkaSourceError) -> None:
        """Ride out a broker that cannot be reached (a restart, a leader election, a network blip)
        for fetchOffset.retryTimeoutMs, one try per trigger, said once; then fail the query."""
        now = time.monotonic()
        if self._unreachable_since is None:
            self._unreachable_since = now
            log.warning("%s; trying again each trigger for up to %g s", error, self.options.retry_timeout_ms / 1000)
        waited = now - self._unreachable_since
        if waited >= self.options.retry_timeout_ms / 1000:
            raise KafkaSourceError(f"{error} (still, after {waited:.0f} s of trying)")

    def _data_loss(self, begin: dict[tuple[str, int], int],
                   marks: dict[tuple[str, int], tuple[int, int]]) -> dict[tuple[str, int], int]:
        """Fail on offsets the broker no longer has (failOnDataLoss, as Spark's Kafka source), or
        log them and return where each partition whose tail was lost reads on from."""
        losses = data_losses(begin, marks)
        if not losses:
            return {}
        if self.options.fail_on_data_loss:
            raise KafkaSourceError("; ".join(map(str, losses)) + ". " + DATA_LOSS_ADVICE)
        for loss in losses:
            log.warning("%s; reading on from what the broker holds (failOnDataLoss=false)", loss)
        return {(loss.topic, loss.partition): loss.high for loss in losses if loss.high < loss.expected}

    def reportLatestOffset(self):
        try:
            tps = self._topic_partitions()
            return nest({tp: hi for tp, (_, hi) in self._watermarks(tps).items()})
        except KafkaSourceError:
            return None

    def partitions(self, start: dict, end: dict):
        begin, finish = flatten(start), flatten(end)
        ranges = []
        for (topic, partition), until in sorted(finish.items()):
            # A partition that appeared after `start` was planned is read from its beginning.
            since = begin.get((topic, partition), 0)
            if until > since:
                ranges.append(KafkaPartitionRange(topic, partition, since, until))
        return group_ranges(ranges, self.options.max_tasks)

    def read(self, partition: KafkaRangeGroup) -> Iterator:
        for part in partition.ranges:
            yield from read_range(self.options, part)

    def commit(self, end: dict) -> None:
        pass  # progress lives in Spark's checkpoint, not in Kafka consumer groups

    def stop(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def record_schema():
    """The columns of Spark's Kafka source, as Arrow."""
    import pyarrow as pa

    return pa.schema([
        ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
        ("offset", pa.int64()), ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
    ])


def read_ranges(options: SourceOptions, ranges) -> pa.Table:
    """(topic, partition, from_offset, until_offset) ranges, read one after another, as one table."""
    import pyarrow as pa

    batches = [batch for r in ranges for batch in read_range(options, KafkaPartitionRange(*r))]
    return pa.Table.from_batches(batches, record_schema())


def read_range(options: SourceOptions, part: KafkaPartitionRange) -> Iterator:
    """Read [from_offset, until_offset) of one partition as Arrow record batches."""
    import pyarrow as pa
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    consumer = clients.consumer({
        "max.partition.fetch.bytes": 8 * 1024 * 1024,  # bigger fetches while catching up; overridable
        # The embedded broker ignores the fetch size limits and answers with the whole log from
        # the fetch offset on: accept any response size, or a backlog over 100 MB never reads.
        "receive.message.max.bytes": MAX_RESPONSE_BYTES,
        **options.client,
    }, "source", **{
        "auto.offset.reset": "earliest",  # offsets below the log start (retention) jump ahead
        "enable.partition.eof": True,
    })
    schema = record_schema()
    keys: list = []
    values: list = []
    offsets: list = []
    stamps: list = []  # (librdkafka timestamp type, milliseconds)

    def flush():
        n = len(offsets)
        batch = pa.RecordBatch.from_arrays([
            pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
            pa.array([part.topic] * n, pa.string()), pa.array([part.partition] * n, pa.int32()),
            pa.array(offsets, pa.int64()),
            pa.array([ms * 1000 if kind else None for kind, ms in stamps],
                     pa.int64()).cast(schema.field("timestamp").type),
            pa.array([max(0, kind - 1) for kind, _ in stamps], pa.int32()),  # librdkafka 1/2 -> Spark 0/1
        ], schema=schema)
        for column in (keys, values, offsets, stamps):
            column.clear()
        return batch

    try:
        consumer.assign([TopicPartition(part.topic, part.partition, part.from_offset)])
        next_offset = part.from_offset
        last_progress = time.monotonic()
        while next_offset < part.until_offset:
            messages = consumer.consume(num_messages=min(10_000, part.until_offset - next_offset), timeout=1.0)
            if not messages:
                if time.monotonic() - last_progress > options.read_timeout_ms / 1000:
                    raise KafkaSourceError(
                        f"no records from {part.topic}/{part.partition} at offset {next_offset} "
                        f"(expected up to {part.until_offset}) within {options.read_timeout_ms} ms: "
                        f"is Kafka at {options.client.get('bootstrap.servers')} reachable?"
                    )
                continue
            last_progress = time.monotonic()
            tail = messages[-1]
            if tail.error() is None and tail.offset() < part.until_offset and all(
                    msg.error() is None for msg in messages):
                # The usual case, column by column: every message is a record inside the range.
                keys.extend([msg.key() for msg in messages])
                values.extend([msg.value() for msg in messages])
                offsets.extend([msg.offset() for msg in messages])
                stamps.extend([msg.timestamp() for msg in messages])
                next_offset = tail.offset() + 1
                messages = ()
            for msg in messages:
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        # End of log reached: offsets up to `until` that never came were gaps
                        # (compaction, transaction markers).
                        if msg.offset() < part.until_offset:
                            loss = (f"Kafka partition {part.topic}/{part.partition} ends at offset {msg.offset()}, "
                                    f"before the {part.until_offset} this micro-batch was planned to read up to: "
                                    "the broker lost records")
                            if options.fail_on_data_loss:
                                raise KafkaSourceError(f"{loss}. {DATA_LOSS_ADVICE}")
                            log.warning("%s (failOnDataLoss=false: reading on)", loss)
                        next_offset = part.until_offset
                        break
                    raise KafkaSourceError(f"reading {part.topic}/{part.partition}: {error.str()}")
                offset = msg.offset()
                if offset >= part.until_offset:
                    next_offset = part.until_offset
                    break
                keys.append(msg.key())
                values.append(msg.value())
                offsets.append(offset)
                stamps.append(msg.timestamp())
                next_offset = offset + 1
            if len(offsets) >= RECORDS_PER_ARROW_BATCH:
                yield flush()
        if offsets:
            yield flush()
    except KafkaException as exc:
        raise KafkaSourceError(f"reading {part.topic}/{part.partition}: {exc.args[0].str()}") from None
    finally:
        consumer.close()
        if part.records >= TRIM_AFTER_RECORDS:
            release_freed_memory()


def release_freed_memory() -> None:
    """Hand the memory librdkafka freed back to the OS. A broker that answers a fetch with the
    whole rest of the log (the embedded one does) leaves much memory freed but still held after
    a large read, in each of Spark's long-lived Python workers (docs/performance.md#memory)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc: nothing to do
