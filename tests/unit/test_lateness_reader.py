"""The page's reader of a day's lateness (dashboard/readers.py LatenessReader) on real Delta tables:
trades stamped with their lateness are tallied from that one column, a file once; trades written
before lateness was stamped are judged from the ledger, and those whose batch's ledger rows are
not committed yet are once they are."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pyarrow as pa
from deltalake import write_deltalake

from dashboard.api import lateness_points
from dashboard.readers import LatenessReader
from streaming.lake.checkpoints import OffsetLogEntry
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import BATCH_WATERMARKS, DAY, SILVER
from streaming.medallion.lateness import LATENESS, ledger_rows

FRONT = datetime(2026, 3, 2, 10, 0, tzinfo=timezone.utc)
DELAY = timedelta(minutes=30)
MINUTE_US = 60_000_000
POINTS = lateness_points(DELAY)


def silver(offsets: range, minutes_behind: int, stamped: bool) -> pa.Table:
    n = len(offsets)
    event_time = FRONT - timedelta(minutes=minutes_behind)
    return pa.table({
        "trade_id": [f"t{o}" for o in offsets], "account_id": ["A"] * n, "symbol": ["AAPL"] * n, "side": ["BUY"] * n,
        "quantity": [1] * n, "price": [1.0] * n, "amount": [1.0] * n, "channel": ["web"] * n,
        "event_time": [event_time] * n, "topic": ["trades"] * n, "partition": [0] * n, "offset": list(offsets),
        "kafka_timestamp": [FRONT] * n, "ingested_at": [FRONT] * n,
        LATENESS: pa.array([minutes_behind * MINUTE_US if stamped else None] * n, pa.int64()),
    }).cast(SILVER.schema)


def ledger(batch_id: int, start: int, end: int) -> pa.Table:
    return ledger_rows("q", batch_id, OffsetLogEntry({("trades", 0): end}), OffsetLogEntry({("trades", 0): start}),
                       FRONT - DELAY, front=FRONT)


def at(tally, minutes: int) -> int:
    return tally.too_late(minutes * MINUTE_US)


def test_stamped_trades_are_tallied_from_their_column_and_a_file_is_read_once(tmp_path):
    lake = Lake(tmp_path / "data")
    lake.ensure_all()
    reader = LatenessReader(lake, DELAY, POINTS)
    lake.publish(SILVER, silver(range(0, 2), minutes_behind=10, stamped=True), Batch("q", 1))
    first = reader.read("2026-03-02")
    assert (first.judged, at(first, 5), at(first, 30)) == (2, 2, 0)
    assert reader.read("2026-03-02") is first  # nothing new: the same tally

    lake.publish(SILVER, silver(range(2, 3), minutes_behind=90, stamped=True), Batch("q", 2))
    after = reader.read("2026-03-02")

    assert (after.judged, at(after, 5), at(after, 60), after.not_judged) == (3, 3, 1, 0)
    assert reader._days.of("2026-03-02").increments.files_read == 2


def test_trades_written_before_lateness_was_stamped_are_judged_once_their_ledger_rows_are_committed(tmp_path):
    lake = Lake(tmp_path / "data")
    lake.ensure_all()
    reader = LatenessReader(lake, DELAY, POINTS)
    lake.publish(SILVER, silver(range(0, 3), minutes_behind=45, stamped=False), Batch("q", 1))
    lake.publish(SILVER, silver(range(3, 4), minutes_behind=5, stamped=True), Batch("q", 2))

    before = reader.read("2026-03-02")
    assert (before.judged, before.not_judged, at(before, 1)) == (1, 3, 1)

    lake.publish(BATCH_WATERMARKS, ledger(1, 0, 3), Batch("q", 1))
    judged = reader.read("2026-03-02")

    assert (judged.judged, judged.not_judged, at(judged, 1), at(judged, 45), at(judged, 60)) == (4, 0, 4, 3, 0)
    assert reader.read("2026-03-02") is judged


def test_a_lake_written_before_lateness_was_stored_answers_from_its_ledger(tmp_path):
    lake = Lake(tmp_path / "data")
    old_silver = silver(range(0, 3), minutes_behind=45, stamped=False).drop_columns([LATENESS])
    write_deltalake(lake.location(SILVER), old_silver.append_column(DAY, pa.array([date(2026, 3, 2)] * 3)),
                    partition_by=[DAY])
    lake.ensure(BATCH_WATERMARKS)
    lake.publish(BATCH_WATERMARKS, ledger(1, 0, 3), Batch("q", 1))

    as_it_was = LatenessReader(lake, DELAY, POINTS).read("2026-03-02")
    lake.ensure(SILVER)  # the app's start adds the column to the table
    lake.publish(SILVER, silver(range(3, 4), minutes_behind=5, stamped=True), Batch("q", 2))
    added = LatenessReader(lake, DELAY, POINTS).read("2026-03-02")

    assert (as_it_was.judged, as_it_was.not_judged, at(as_it_was, 45)) == (3, 0, 3)
    assert (added.judged, added.not_judged, at(added, 1), at(added, 45)) == (4, 0, 4, 3)
