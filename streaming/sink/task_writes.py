"""What each Spark task does with its share of a micro-batch, where the data is (medallion_sink.py runs
it through `mapInArrow` over the batch's Kafka records, one task per share: Spark's Kafka source
cuts a batch into at least one share per core and at most MAX_RECORDS_PER_SHARE records each;
a live batch of up to ONE_SHARE_UP_TO records is one share, which on a local master the driver
writes itself (ShareWriter.results_of) from the records it fetched from Kafka (range_reader.py),
or else collected from Spark as Arrow: a Spark job and a Python worker would add their fixed costs
to the batch's time, docs/live-batch.md):

* parses its share's records (silver.arrow.parse_records), so each record is parsed and written in
  one Python process;
* writes the share's bronze, quarantine and silver rows as new Parquet files into the tables'
  locations (lake/files.py); the driver commits them, so nothing is visible before it does;
* keeps for silver the first copy of each trade_id in the share (arrival order), each with its
  lateness (how far behind the batch's front it came, medallion/lateness.py). Whether silver
  holds any of them already the driver tells from their ids' hashes (seen_ids.TradeIds), without a
  read of silver per task: a batch with such a trade goes through the driver's MERGEs instead;
* sends a new trade whose event time jumps far ahead of all seen (silver.guard) to
  quarantine instead;
* judges the new trades against the batch's watermark and sends back, rather than rows, what
  the driver needs for gold: the on-time trades' window sums, the too-late trades, a hash of
  each new trade_id (so the driver can tell whether two tasks kept the same trade), their
  latest event time (the next batch's watermark) and the offsets the share read (what Kafka
  no longer held, medallion/losses.py).

Every result is one row of RESULT_COLUMNS; payloads are Arrow IPC streams.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streaming.kafka.range_reader import KAFKA_RECORDS
from streaming.lake.files import DataFile
from streaming.lake.lookups import offset_ranges
from streaming.lake.store import Lake
from streaming.lake.tables import BRONZE, QUARANTINE, SILVER, UTC_TIME, Table
from streaming.medallion.bronze import bronze_rows
from streaming.medallion.gold import window_sums
from streaming.medallion.lateness import LATE_CANDIDATE_COLUMNS, stamped, too_late
from streaming.medallion.losses import first_offsets
from streaming.medallion.silver.arrow import parse_records, quarantine_rows
from streaming.medallion.silver.guard import screened
from streaming.rows import no_cycle_collection
from streaming.sink.seen_ids import event_days, trade_id_hashes

# A share is held in memory as records, trades and files: Spark cuts a bigger range of a partition.
MAX_RECORDS_PER_SHARE = 100_000
# A batch this small is one share, whatever the partitions it spans: a task's fixed cost is most
# of a live batch's time, and more tasks than cores wait for one (docs/real-parts-ab.md).
ONE_SHARE_UP_TO = 20_000
FILE, SUMS, LATE, NEW_IDS, LATEST, READ = "file", "sums", "late", "new_ids", "latest", "read"
RESULT_COLUMNS = pa.schema([("kind", pa.string()), ("table", pa.string()), ("path", pa.string()),
                            ("size", pa.int64()), ("num_rows", pa.int64()), ("stats", pa.string()),
                            ("payload", pa.binary())])


@dataclass(frozen=True)
class BatchPlan:
    """What the driver tells every task of one micro-batch (pickled to the workers)."""

    lake_root: str
    storage_options: dict | None  # what a task on any host needs to reach the tables (locations.options_for_tasks)
    watermark: datetime  # the batch's: trades at or before it are too late
    window: timedelta
    ingested_at: datetime
    latest_seen: datetime | None = None  # the latest event time before the batch: its front (silver.guard)
    max_event_time_jump: timedelta = timedelta(days=1)
    closed_to: datetime | None = None  # the idle close in force for the batch (lateness.stamped)


def to_ipc(rows: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, rows.schema) as writer:
        writer.write_table(rows)
    return sink.getvalue().to_pybytes()


def from_ipc(payload: bytes) -> pa.Table:
    return pa.ipc.open_stream(payload).read_all()


def _result(kind: str, table: str = "", file: DataFile | None = None, payload: bytes | None = None) -> dict:
    return {"kind": kind, "table": table, "path": file.path if file else None, "size": file.size if file else None,
            "num_rows": file.rows if file else None, "stats": file.stats if file else None, "payload": payload}


class ShareWriter:
    """The task side of one micro-batch."""

    SCHEMA = "kind string, table string, path string, size long, num_rows long, stats string, payload binary"

    def __init__(self, plan: BatchPlan):
        self.plan = plan
        self.lake = Lake(plan.lake_root, plan.storage_options)

    def __call__(self, records: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """records: this task's share of the batch, as Spark's Kafka source gives them."""
        with no_cycle_collection():
            # Each Arrow batch is parsed as it comes, while Spark's reader fetches the next.
            parsed = [parse_records(pa.Table.from_batches([batch], KAFKA_RECORDS)) for batch in records]
            results = list(self.write_parsed(pa.concat_tables(parsed))) if parsed else []
        yield from results

    def results_of(self, records: pa.Table) -> pa.Table:
        """The share's results (RESULT_COLUMNS) from its records as one table, in this process."""
        return pa.Table.from_batches(list(self(records.to_batches())), RESULT_COLUMNS)

    def write_parsed(self, rows: pa.Table) -> Iterator[pa.RecordBatch]:
        """The share's records parsed (parse_records) -> the tables' files and the driver's results."""
        if rows.num_rows == 0:
            return
        rows = rows.append_column("ingested_at", pa.repeat(pa.scalar(self.plan.ingested_at, UTC_TIME), rows.num_rows))
        # Without silver at hand: the driver tells from the new ids' hashes whether silver held any.
        rows, new = screened(rows, self.plan.latest_seen, self.plan.max_event_time_jump)
        new = stamped(new, self.plan.latest_seen, self.plan.closed_to)
        results = [_result(READ, payload=to_ipc(offset_ranges(rows))),
                   *self.write(BRONZE, bronze_rows(rows)),
                   *self.write(QUARANTINE, quarantine_rows(rows)),
                   *self.write(SILVER, new)]
        late = too_late(new, self.plan.watermark)
        results += [
            _result(SUMS, payload=to_ipc(window_sums(new.filter(pc.invert(late)), self.plan.window))),
            _result(LATE, payload=to_ipc(new.filter(late).select(LATE_CANDIDATE_COLUMNS))),
            _result(NEW_IDS, payload=to_ipc(pa.table({"hash": trade_id_hashes(new["trade_id"]),
                                                      "day": event_days(new["event_time"])}))),
            _result(LATEST, payload=to_ipc(pa.table({"event_time": pa.array([pc.max(new["event_time"]).as_py()],
                                                                             UTC_TIME)}))),
        ]
        yield pa.RecordBatch.from_pylist([r for r in results if r is not None], schema=RESULT_COLUMNS)

    def write(self, table: Table, rows: pa.Table) -> list[dict]:
        if rows.num_rows == 0:
            return []
        return [_result(FILE, table.name, file) for file in self.lake.write_files(table, rows)]


class TaskResults:
    """The driver's view of what the tasks of one micro-batch sent back."""

    def __init__(self, rows: pa.Table):
        self.rows = rows.to_pylist()

    def files(self, table: Table) -> list[DataFile]:
        return [DataFile(r["path"], r["size"], r["num_rows"], r["stats"]) for r in self.rows
                if r["kind"] == FILE and r["table"] == table.name]

    def tables(self, kind: str) -> list[pa.Table]:
        return [from_ipc(r["payload"]) for r in self.rows if r["kind"] == kind]

    def table(self, kind: str) -> pa.Table:
        parts = self.tables(kind)
        return pa.concat_tables(parts) if parts else pa.table({})

    def latest_event_time(self) -> datetime | None:
        """The latest event time among the trades the tasks kept for silver."""
        times = [t["event_time"] for t in self.tables(LATEST) if t.num_rows]
        return pc.max(pa.chunked_array([c for t in times for c in t.chunks], UTC_TIME)).as_py() if times else None

    def new_id_keys(self) -> tuple[np.ndarray, np.ndarray]:
        """The trade_ids the tasks kept for silver, every task's: (their hashes, event days)."""
        kept = [t for t in self.tables(NEW_IDS) if t.num_rows]
        if not kept:
            return np.empty(0, np.uint64), np.empty(0, np.int32)
        return (np.concatenate([t["hash"].to_numpy() for t in kept]),
                np.concatenate([t["day"].to_numpy() for t in kept]))

    def first_offsets(self) -> dict[tuple[str, int], int]:
        """Per partition, the first offset any task read."""
        return first_offsets(self.tables(READ))

    def same_trade_kept_twice(self) -> bool:
        every, _ = self.new_id_keys()
        return len(np.unique(every)) < len(every)


def nothing(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A task that only has its Python worker import this module and its libraries
    (pipeline.start_python_workers). It reads its input to the end: else Spark ends the worker."""
    for _ in batches:
        pass
    return iter(())
