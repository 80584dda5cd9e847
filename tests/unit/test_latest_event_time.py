"""The latest event time before a batch (its watermark's base), asked of silver with and without
a lower bound: the two agree, and a bound above every trade still gets the answer."""

from datetime import datetime, timedelta, timezone

import pyarrow as pa

from streaming.lake.lookups import latest_event_time_before
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import SILVER

DAY0 = datetime(2026, 3, 2, 9, tzinfo=timezone.utc)


def silver_rows(first_offset: int, times: list[datetime], partition: int = 0) -> pa.Table:
    n = len(times)
    row = {c: [None] * n for c in SILVER.columns}
    row.update(trade_id=[f"p{partition}-{first_offset + i}" for i in range(n)], event_time=times, topic=["trades"] * n,
               partition=[partition] * n, offset=list(range(first_offset, first_offset + n)))
    return pa.table(row).cast(SILVER.schema)


def test_a_bound_reads_only_the_recent_event_times_and_agrees_with_the_whole_read(tmp_path):
    lake = Lake(tmp_path)
    offset = 0
    for day in range(5):  # a file per day, as the pipeline's files hold the event times of their time
        times = [DAY0 + timedelta(days=day, minutes=m) for m in range(0, 480, 7)]
        lake.publish(SILVER, silver_rows(offset, times), Batch("q", day))
        offset += len(times)
    late = DAY0 + timedelta(days=4, hours=9)  # the latest, then an earlier one at a higher offset
    lake.publish(SILVER, silver_rows(0, [late, DAY0 + timedelta(days=4, hours=1)], partition=1), Batch("q", 9))
    ends = {("trades", 0): offset, ("trades", 1): 2}
    whole = latest_event_time_before(lake, ends)
    assert whole == late
    assert latest_event_time_before(lake, ends, DAY0 + timedelta(days=4)) == whole
    assert latest_event_time_before(lake, {("trades", 0): offset, ("trades", 1): 0}, DAY0 + timedelta(days=3)) == \
        DAY0 + timedelta(days=4, minutes=476)
    assert latest_event_time_before(lake, ends, DAY0 + timedelta(days=9)) == whole  # a wrong bound: all read
