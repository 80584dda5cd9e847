"""The ledger's lookups that read only its recent batches agree with a read of all of it."""

from datetime import datetime, timedelta, timezone

from streaming.lake.checkpoints import OffsetLogEntry
from streaming.lake.lookups import latest_watermark_of, ledger_ends, ledger_watermark
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import BATCH_WATERMARKS
from streaming.medallion.lateness import ledger_rows

T0 = datetime(2026, 3, 2, 9, tzinfo=timezone.utc)


def write_batches(lake: Lake, query_id: str, ends_by_batch: list[dict[int, int]]) -> None:
    previous = None
    for batch_id, ends in enumerate(ends_by_batch):
        read = OffsetLogEntry({("trades", p): o for p, o in ends.items()})
        rows = ledger_rows(query_id, batch_id, read, previous, T0 + timedelta(minutes=batch_id))
        lake.publish(BATCH_WATERMARKS, rows, Batch(query_id, batch_id))
        previous = read


def whole_ends(lake: Lake) -> dict[tuple[str, int], int]:
    rows = lake.read(BATCH_WATERMARKS, ["topic", "partition", "end_offset"]).to_pylist()
    ends: dict[tuple[str, int], int] = {}
    for r in rows:
        ends[(r["topic"], r["partition"])] = max(r["end_offset"], ends.get((r["topic"], r["partition"]), 0))
    return ends


def test_the_ends_read_beyond_the_committed_ones_equal_the_whole_ledgers(tmp_path):
    lake = Lake(tmp_path)
    write_batches(lake, "old", [{0: 10 * b, 1: 5 * b} for b in range(1, 30)])  # read further, before a replay
    write_batches(lake, "replay", [{0: 7 * b, 1: 2 * b, 2: b} for b in range(1, 12)])
    committed = {("trades", 0): 77, ("trades", 1): 22, ("trades", 2): 11}
    assert ledger_ends(lake, committed) == whole_ends(lake) == {("trades", 0): 290, ("trades", 1): 145,
                                                                ("trades", 2): 11}
    assert ledger_ends(lake, {}) == whole_ends(lake)


def test_a_batchs_watermark_and_the_latest_of_recent_batches(tmp_path):
    lake = Lake(tmp_path)
    write_batches(lake, "q", [{0: b} for b in range(1, 40)])
    assert ledger_watermark(lake, "q", 5) == T0 + timedelta(minutes=5)
    assert ledger_watermark(lake, "q", 99) is None
    assert latest_watermark_of(lake, "q", 30) == T0 + timedelta(minutes=38)
    assert latest_watermark_of(lake, "other", 0) is None
