"""Records a batch was to read but Kafka no longer held: retention (or a delete-records call)
moved a partition's start past them before the query read them.

Spark's source, with failOnDataLoss=false, skips from the offset the checkpoint expects to the
first one the broker still has, and logs it; the batch's offset range still starts where the
checkpoint said. So the records the batch read start later than its range: that head is either
lost or offsets that hold no record (a transaction's markers). The broker's log start tells the
two apart: what lies before it was removed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from streaming.lake.tables import BATCH_WATERMARKS

Partition = tuple[str, int]


def first_offsets(ranges: list[pa.Table]) -> dict[Partition, int]:
    """Per partition, the first offset read: the least `start_offset` of these offset ranges
    (lookups.offset_ranges of each share of the batch)."""
    first: dict[Partition, int] = {}
    for table in ranges:
        for topic, partition, start in zip(table["topic"].to_pylist(), table["partition"].to_pylist(),
                                           table["start_offset"].to_pylist()):
            first[(topic, partition)] = min(start, first.get((topic, partition), start))
    return first


def unread_heads(ledger: pa.Table, first_read: Mapping[Partition, int]) -> dict[Partition, tuple[int, int]]:
    """Per partition of the batch's ledger rows, the offsets [start, until) before its first record
    read (all its range when none was read), where there are any."""
    heads = {}
    for topic, partition, start, end in zip(ledger["topic"].to_pylist(), ledger["partition"].to_pylist(),
                                            ledger["start_offset"].to_pylist(), ledger["end_offset"].to_pylist()):
        until = min(first_read.get((topic, partition), end), end)
        if until > start:
            heads[(topic, partition)] = (start, until)
    return heads


def lost_records(heads: Mapping[Partition, tuple[int, int]],
                 log_starts: Mapping[Partition, int] | None) -> dict[Partition, int]:
    """Per partition, how many of its head's offsets the broker removed: those before the
    partition's log start now. Offsets the log still starts before held no record (markers).
    log_starts None: the broker could not be asked; every head counts (a topic without
    transactions has no markers)."""
    lost = {}
    for tp, (start, until) in heads.items():
        removed_until = until if log_starts is None else min(until, log_starts.get(tp, start))
        if removed_until > start:
            lost[tp] = removed_until - start
    return lost


def with_losses(ledger: pa.Table, lost: Mapping[Partition, int]) -> pa.Table:
    """The ledger rows with each partition's `records_lost` set."""
    counts = pa.array([lost.get((t, p), 0) for t, p in zip(ledger["topic"].to_pylist(),
                                                            ledger["partition"].to_pylist())], pa.int64())
    index = ledger.schema.get_field_index("records_lost")
    if index < 0:
        return ledger.append_column(BATCH_WATERMARKS.schema.field("records_lost"), counts)
    return ledger.set_column(index, BATCH_WATERMARKS.schema.field("records_lost"), counts)


def said(lost: Mapping[Partition, int], heads: Mapping[Partition, tuple[int, int]], total: int,
         now: datetime) -> str:
    """The loss, for the operator's log and health panel."""
    parts = "; ".join(f"{n:,} of partition {t}/{p} (from offset {heads[(t, p)][0]:,})"
                      for (t, p), n in sorted(lost.items()))
    return (f"{now:%Y-%m-%d %H:%M:%S} UTC: Kafka no longer held records the pipeline had not read yet "
            f"(retention removed them, or a delete-records call): {sum(lost.values()):,} lost, {parts}. "
            f"{total:,} records lost in all, as the ledger gold/batch_watermarks counts them. "
            "Lengthen --broker-retention, or keep the pipeline running.")


def total_lost(ledger: pa.Table) -> int:
    return int(pc.sum(ledger["records_lost"]).as_py() or 0) if ledger.num_rows else 0
