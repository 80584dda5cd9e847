"""The page's reader of a day's lateness (dashboard/readers.py LatenessReader) on real Delta tables:
trades whose batch's ledger rows are not committed yet are not judged, and are once they are;
a file's lateness already worked out is kept as more files come."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pyarrow as pa

from dashboard.readers import LatenessReader
from streaming.lake.checkpoints import OffsetLogEntry
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import BATCH_WATERMARKS, SILVER
from streaming.medallion.lateness import ledger_rows

FRONT = datetime(2026, 3, 2, 10, 0, tzinfo=timezone.utc)
MINUTE_US = 60_000_000


def silver(offsets: range, minutes_behind: int) -> pa.Table:
    n = len(offsets)
    event_time = FRONT - timedelta(minutes=minutes_behind)
    return pa.table({
        "trade_id": [f"t{o}" for o in offsets], "account_id": ["A"] * n, "symbol": ["AAPL"] * n, "side": ["BUY"] * n,
        "quantity": [1] * n, "price": [1.0] * n, "amount": [1.0] * n, "channel": ["web"] * n,
        "event_time": [event_time] * n, "topic": ["trades"] * n, "partition": [0] * n, "offset": list(offsets),
        "kafka_timestamp": [FRONT] * n, "ingested_at": [FRONT] * n,
    }).cast(SILVER.schema)


def ledger(batch_id: int, start: int, end: int) -> pa.Table:
    return ledger_rows("q", batch_id, OffsetLogEntry({("trades", 0): end}), OffsetLogEntry({("trades", 0): start}),
                       FRONT - timedelta(minutes=30), front=FRONT)


def test_trades_are_judged_once_their_batchs_ledger_rows_are_committed(tmp_path):
    lake = Lake(tmp_path / "data")
    lake.ensure_all()
    reader = LatenessReader(lake, timedelta(minutes=30))
    lake.publish(SILVER, silver(range(0, 3), minutes_behind=45), Batch("q", 1))

    assert reader.read("2026-03-02").isna().tolist() == [True] * 3

    lake.publish(BATCH_WATERMARKS, ledger(1, 0, 3), Batch("q", 1))
    assert reader.read("2026-03-02").tolist() == [45 * MINUTE_US] * 3


def test_a_files_lateness_is_kept_as_more_files_come(tmp_path):
    lake = Lake(tmp_path / "data")
    lake.ensure_all()
    reader = LatenessReader(lake, timedelta(minutes=30))
    lake.publish(SILVER, silver(range(0, 2), minutes_behind=10), Batch("q", 1))
    lake.publish(BATCH_WATERMARKS, ledger(1, 0, 2), Batch("q", 1))
    first = reader.read("2026-03-02")
    kept = dict(reader._days.of("2026-03-02").by_file)

    lake.publish(SILVER, silver(range(2, 3), minutes_behind=90), Batch("q", 2))
    lake.publish(BATCH_WATERMARKS, ledger(2, 2, 3), Batch("q", 2))

    assert sorted(reader.read("2026-03-02").tolist()) == [10 * MINUTE_US, 10 * MINUTE_US, 90 * MINUTE_US]
    assert all(reader._days.of("2026-03-02").by_file[path] is lateness for path, lateness in kept.items())
    assert first.tolist() == [10 * MINUTE_US] * 2
