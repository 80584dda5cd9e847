"""What a batch was to read and Kafka no longer held (streaming/medallion/losses.py)."""

from datetime import datetime, timezone

import pyarrow as pa

from streaming.lake.checkpoints import OffsetLogEntry
from streaming.medallion.lateness import ledger_rows
from streaming.medallion.losses import first_offsets, lost_records, said, unread_heads, with_losses

T = "trades"


def ledger(starts: dict[int, int], ends: dict[int, int]) -> pa.Table:
    def entry(offsets):
        return OffsetLogEntry(ends={(T, p): o for p, o in offsets.items()})
    return ledger_rows("q", 7, entry(ends), entry(starts), datetime(2026, 1, 1, tzinfo=timezone.utc))


def test_the_first_offset_read_is_the_least_of_every_shares():
    shares = [pa.table({"topic": [T, T], "partition": [0, 1], "start_offset": [50, 10], "end_offset": [60, 20]}),
              pa.table({"topic": [T], "partition": [0], "start_offset": [40], "end_offset": [50]})]
    assert first_offsets(shares) == {(T, 0): 40, (T, 1): 10}


def test_a_head_is_what_lies_before_the_first_record_read_or_the_whole_range_when_none_was():
    rows = ledger({0: 10, 1: 10, 2: 10}, {0: 20, 1: 20, 2: 20})
    assert unread_heads(rows, {(T, 0): 10, (T, 1): 14}) == {(T, 1): (10, 14), (T, 2): (10, 20)}


def test_only_offsets_before_the_log_start_are_lost_the_rest_were_markers():
    heads = {(T, 1): (10, 14), (T, 2): (10, 20)}
    assert lost_records(heads, {(T, 1): 10, (T, 2): 20}) == {(T, 2): 10}
    assert lost_records(heads, {(T, 1): 12, (T, 2): 0}) == {(T, 1): 2}
    assert lost_records(heads, None) == {(T, 1): 4, (T, 2): 10}  # the broker not asked: every head


def test_the_ledger_carries_each_partitions_loss_and_the_operator_is_told_what_to_do():
    rows = with_losses(ledger({0: 10, 1: 10}, {0: 20, 1: 20}), {(T, 1): 4})
    assert rows["records_lost"].to_pylist() == [0, 4]
    message = said({(T, 1): 4}, {(T, 1): (10, 14)}, 9, datetime(2026, 1, 1, tzinfo=timezone.utc))
    assert "4 lost, 4 of partition trades/1 (from offset 10)" in message and "9 records lost in all" in message
    assert "--broker-retention" in message
