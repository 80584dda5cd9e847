"""Records read again: whether a micro-batch's records may have been read before (then the driver
writes them through MERGEs), and the offsets Kafka gave out again after losing its log's tail."""

from __future__ import annotations

from datetime import datetime

import pyarrow as pa

from streaming.lake.checkpoints import OffsetLogEntry
from streaming.lake.lookups import holds_records_from
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import BRONZE, QUARANTINE, SILVER


def rewinds(read: OffsetLogEntry | None, previous: OffsetLogEntry | None, now: datetime) -> list[str]:
    """For the operator, each partition a batch ends before the batch before it did: the source
    found the broker's log shorter than what the query had read, and (failOnDataLoss=false)
    reads on from where it ends now, so the records that take those offsets again are read."""
    if read is None or previous is None:
        return []
    said = []
    for (topic, partition), end in sorted(read.ends.items()):
        before = previous.ends.get((topic, partition), end)
        if end < before:
            said.append(f"{now:%Y-%m-%d %H:%M:%S} UTC: Kafka partition {topic}/{partition} went back from offset "
                        f"{before} to {end} (the broker lost its tail, or the topic was recreated); reading on "
                        f"from {end}. Records the broker lost before they were read are gone; those read before "
                        "are in bronze.")
    return said


def _by_partition(ledger: pa.Table, column: str) -> dict[tuple[str, int], int]:
    return dict(zip(zip(ledger["topic"].to_pylist(), ledger["partition"].to_pylist()), ledger[column].to_pylist()))


class ReadBefore:
    """Whether any of a batch's records may have been read before: by this batch, before a
    crash (a table has its id), or by an earlier run (bronze has a record at or after the
    batch's start offsets). This app is bronze's only writer, so once bronze is known to hold
    nothing from some offset on, the batches that follow need not ask it again."""

    def __init__(self, lake: Lake):
        self.lake = lake
        # (topic, partition) -> an offset from which bronze is known to hold no record yet
        self.bronze_free_from: dict[tuple[str, int], int] = {}

    def __call__(self, ledger: pa.Table, batch: Batch, may_run_again: bool) -> bool:
        """may_run_again: the batch is not the one after the last this sink did (Spark runs a
        batch again only in a new run of the query, with a new sink)."""
        if may_run_again and any(self.lake.published(table, batch) for table in (BRONZE, SILVER, QUARANTINE)):
            return True
        starts = _by_partition(ledger, "start_offset")
        if all(start >= self.bronze_free_from.get(tp, start + 1) for tp, start in starts.items()):
            return False
        if holds_records_from(self.lake, BRONZE, starts):
            return True
        self.bronze_free_from.update(starts)
        return False

    def written(self, ledger: pa.Table) -> None:
        """The batch's records are in bronze now, and nothing after them."""
        self.bronze_free_from.update(_by_partition(ledger, "end_offset"))
