"""A live batch's one share is written in the driver (no Python worker to hand it to); a catch-up
batch's shares by Spark tasks through mapInArrow. Both run ShareWriter: given the same Kafka
records they must send back the same results and write the same rows."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming.kafka.range_reader import KAFKA_RECORDS
from streaming.lake.store import Lake
from streaming.lake.tables import BRONZE, QUARANTINE, SILVER
from streaming.sink.task_writes import LATE, SUMS, BatchPlan, ShareWriter, TaskResults
from tests.support.corpus import BAD, DAY, raw, trade

UTC = timezone.utc
SENT = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


def kafka_records() -> pa.Table:
    """Trades in two partitions: on time, too late, one sent twice, and every bad kind."""
    values = [trade("t1", "BUY", 2, 50.0, DAY + "09:01:00Z"), trade("t2", "SELL", 1, 30.0, DAY + "09:16:00Z"),
              trade("t3", "BUY", 1, 10.0, DAY + "08:01:00Z"), trade("t1", "BUY", 2, 50.0, DAY + "09:01:00Z"),
              *(value for value, _ in BAD.values())]
    n = len(values)
    return pa.table({
        "key": [f"k{i}".encode() for i in range(n)], "value": [raw(v) for v in values],
        "topic": ["trades"] * n, "partition": [i % 2 for i in range(n)], "offset": list(range(n)),
        "timestamp": [SENT + timedelta(milliseconds=i) for i in range(n)], "timestampType": [0] * n,
    }, schema=KAFKA_RECORDS)


def plan(root) -> BatchPlan:
    """A batch's plan over a lake whose tables exist, as the pipeline makes them before its first batch."""
    for table in (BRONZE, SILVER, QUARANTINE):
        Lake(str(root)).ensure(table)
    return BatchPlan(str(root), None, watermark=datetime(2026, 3, 2, 8, 30, tzinfo=UTC),
                     window=timedelta(minutes=15), ingested_at=SENT + timedelta(seconds=1))


def rows_of(results: TaskResults, root, table) -> pa.Table:
    """The rows of the files the share wrote for the table (their paths are the table's own)."""
    files = results.files(table)
    if not files:
        return pa.table({})
    rows = pa.concat_tables([pq.read_table(f"{Lake(str(root)).location(table)}/{f.path}") for f in files])
    return rows.sort_by([(name, "ascending") for name in ("partition", "offset") if name in rows.column_names])


@pytest.mark.parametrize("table", [BRONZE, SILVER, QUARANTINE], ids=lambda t: t.name)
def test_a_share_written_in_the_driver_equals_the_same_share_written_by_a_spark_task(spark, tmp_path, table):
    records = kafka_records()
    in_driver = TaskResults(ShareWriter(plan(tmp_path / "driver")).results_of(records))
    frame = spark.createDataFrame(records).coalesce(1)
    in_task = TaskResults(frame.mapInArrow(ShareWriter(plan(tmp_path / "task")), ShareWriter.SCHEMA).toArrow())

    written = rows_of(in_driver, tmp_path / "driver", table)
    assert written.num_rows > 0 and written.equals(rows_of(in_task, tmp_path / "task", table))
    assert in_driver.table(SUMS).equals(in_task.table(SUMS)) and in_driver.table(SUMS).num_rows == 2
    assert in_driver.table(LATE).equals(in_task.table(LATE)) and in_driver.table(LATE).num_rows == 1
    assert [list(keys) for keys in in_driver.new_id_keys()] == [list(keys) for keys in in_task.new_id_keys()]
    assert in_driver.latest_event_time() == in_task.latest_event_time() == datetime(2026, 3, 2, 9, 16, tzinfo=UTC)
    assert in_driver.first_offsets() == in_task.first_offsets() == {("trades", 0): 0, ("trades", 1): 1}
