"""--replay-from a time older than what the broker still holds: bronze first, then Kafka.

Bronze keeps every record the pipeline read, with its Kafka partition, offset and time, for as
long as the lake; the broker keeps minutes to hours. So a replay from an earlier time reads, per
partition, bronze's records from the first one at or after that time up to the broker's log
start, in offset order and in bounded chunks, through the sink as a Kafka batch would go (the
records read again: silver replaces its own rows, the windows are recounted, the too-late
decisions kept). The streaming query then starts at the log start of those partitions (at the
time's offset in the others) and goes on from Kafka, its first watermark following from the
records bronze gave. The records are the same either way, so are the results.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Iterator

import pyarrow as pa

from streaming.config import Settings
from streaming.kafka.clients import offsets_at
from streaming.kafka.range_reader import KAFKA_RECORDS
from streaming.lake.checkpoints import OffsetLogEntry
from streaming.lake.lookups import bronze_first_offsets_since, bronze_records_in, latest_event_time_before
from streaming.lake.store import Lake
from streaming.medallion.lateness import EPOCH, ledger_rows
from streaming.sink.medallion_sink import MedallionSink
from streaming.sink.task_writes import MAX_RECORDS_PER_SHARE

log = logging.getLogger(__name__)

Partition = tuple[str, int]
RECORD_COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp"]


@dataclass(frozen=True)
class ReplayPlan:
    """Where each part of a replay comes from, per partition."""

    since: datetime
    from_bronze: dict[Partition, tuple[int, int]]  # [first offset, the broker's log start)
    kafka_from: dict[Partition, int]  # where the streaming query starts

    @property
    def bronze_records(self) -> int:
        """At most this many (bronze holds each offset once, unless Kafka gave offsets out again)."""
        return sum(end - start for start, end in self.from_bronze.values())


def plan_replay(lake: Lake, settings: Settings, since: datetime) -> ReplayPlan | None:
    """The replay's parts, or None when Kafka still holds every record from `since` on (or bronze
    holds none that it lacks)."""
    topic = settings.topic
    kafka = offsets_at(settings.kafka_client_config(), topic, int(since.timestamp() * 1000))
    log_starts = {(topic, p): low for p, (low, _, _) in kafka.items()}
    firsts = bronze_first_offsets_since(lake, since, log_starts)
    from_bronze = {tp: (first, log_starts[tp]) for tp, first in firsts.items() if first < log_starts[tp]}
    if not from_bronze:
        return None
    kafka_from = {(topic, p): low if (topic, p) in from_bronze else at for p, (low, _, at) in kafka.items()}
    return ReplayPlan(since, from_bronze, kafka_from)


def said_where_from(plan: ReplayPlan | None) -> str:
    """For the log: where each part of the replay comes from."""
    if plan is None:
        return "replay: Kafka still holds every record from that time on; reading it all from Kafka"
    parts = ", ".join(f"{t}/{p} offsets {start:,} to {end - 1:,}"
                      for (t, p), (start, end) in sorted(plan.from_bronze.items()))
    return (f"replay from {plan.since.isoformat()}: Kafka no longer holds the start of it, so bronze gives "
            f"{parts} (up to {plan.bronze_records:,} records), then Kafka from offsets "
            + ", ".join(f"{t}/{p} {o:,}" for (t, p), o in sorted(plan.kafka_from.items())))


def chunks(plan: ReplayPlan, records_per_chunk: int = MAX_RECORDS_PER_SHARE) -> Iterator[pa.Table]:
    """The bronze part's offset ranges, a chunk at a time: each partition moves on by its share of
    `records_per_chunk`, as a Kafka batch reads every partition a little."""
    step = max(1, records_per_chunk // len(plan.from_bronze))
    done = {tp: start for tp, (start, _) in plan.from_bronze.items()}
    while True:
        ranges = [(tp, done[tp], min(done[tp] + step, end)) for tp, (_, end) in sorted(plan.from_bronze.items())
                  if done[tp] < end]
        if not ranges:
            return
        for tp, _, end in ranges:
            done[tp] = end
        yield pa.table({"topic": [tp[0] for tp, _, _ in ranges], "partition": pa.array([tp[1] for tp, _, _ in ranges],
                                                                                        pa.int32()),
                        "start_offset": [s for _, s, _ in ranges], "end_offset": [e for _, _, e in ranges]})


def as_kafka_records(bronze: pa.Table) -> pa.Table:
    """Bronze's rows in the shape Spark's Kafka source gives (its time type unknown: 0, create time)."""
    rows = bronze.select(RECORD_COLUMNS).append_column("timestampType", pa.array([0] * bronze.num_rows, pa.int32()))
    return rows.cast(KAFKA_RECORDS)


def replay_from_bronze(lake: Lake, sink: MedallionSink, plan: ReplayPlan, writer: str) -> None:
    """Run the bronze part through the sink, as batches of `writer` (the query's own batch ids are
    Spark's), and leave the sink to go on from there."""
    total, replayed = plan.bronze_records, 0
    at = {**plan.kafka_from, **{tp: start for tp, (start, _) in plan.from_bronze.items()}}  # where each stands
    seen: datetime | None = None  # an event time of a trade before where each stands
    for batch_id, ranges in enumerate(chunks(plan)):
        parts = list(zip(zip(ranges["topic"].to_pylist(), ranges["partition"].to_pylist()),
                         ranges["start_offset"].to_pylist(), ranges["end_offset"].to_pylist()))
        # As in a Kafka replay, the first batch has no records before it; the next ones follow
        # from silver's trades before them, in every partition (the sink's rule).
        latest = None if batch_id == 0 else latest_event_time_before(lake, at, seen)
        watermark = EPOCH if latest is None else max(EPOCH, latest - sink.settings.watermark)
        ledger = ledger_rows(writer, batch_id, OffsetLogEntry({tp: end for tp, _, end in parts}),
                             OffsetLogEntry({tp: start for tp, start, _ in parts}), watermark, front=latest)
        records = bronze_records_in(lake, ranges, RECORD_COLUMNS)
        kept_latest = sink.write_on_driver(as_kafka_records(records), batch_id, ledger, latest, writer=writer)
        seen = max((t for t in (seen, latest, kept_latest) if t is not None), default=None)
        at.update({tp: end for tp, _, end in parts})
        replayed += records.num_rows
        log.info("replay from bronze: %s of %s records", f"{replayed:,}", f"{total:,}")
    sink.continue_from(latest_event_time_before(lake, plan.kafka_from, seen))
