"""Each write policy has two formulations, deltalake's MERGE (Lake.publish) and delta-spark's
(SparkLake.publish): the same batches through either leave the same table, and a batch either
writer recorded is not written again by the other."""

from datetime import datetime, timedelta, timezone

import pandas as pd
import pyarrow as pa
import pytest

from streaming.lake.spark_delta import SparkLake
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import CORRECTIONS, GOLD, LATE_TRADES, SILVER, Table, Write

BASE = datetime(2026, 3, 2, 9, tzinfo=timezone.utc)


def rows(table: Table, keys: list[int], variant: int, stable: tuple[str, ...] = (), **fixed) -> pa.Table:
    """Rows of the table's schema, key i in each: key columns (and `stable` ones) from i alone,
    the rest from i and `variant`, and `fixed` columns set as given."""
    columns = {}
    for field in table.schema:
        seed = [(i, 0 if field.name in table.keys or field.name in stable else variant) for i in keys]
        kind = field.type
        if field.name in fixed:
            values = [fixed[field.name]] * len(keys)
        elif pa.types.is_timestamp(kind):
            values = [BASE + timedelta(minutes=15 * i, seconds=v) for i, v in seed]
        elif pa.types.is_integer(kind):
            values = [10 * i + v for i, v in seed]
        elif pa.types.is_floating(kind):
            values = [i + v / 10 for i, v in seed]
        elif pa.types.is_binary(kind):
            values = [f"{field.name}-{i}-{v}".encode() for i, v in seed]
        else:
            values = [f"{field.name}-{i}-{v}" for i, v in seed]
        columns[field.name] = pa.array(values, kind)
    return pa.table(columns, schema=table.schema)


def table_as_read(lake: Lake, table: Table) -> pd.DataFrame:
    return lake.read(table).to_pandas().sort_values(list(table.keys)).reset_index(drop=True)


# (table, write, the two batches' rows)
CASES = {
    "gold upsert bumps the revision": (GOLD, None, lambda: [rows(GOLD, [0, 1, 2], 0), rows(GOLD, [1, 2, 3], 1)]),
    "gold add sums": (GOLD, Write.ADD, lambda: [rows(GOLD, [0, 1], 0), rows(GOLD, [1, 2], 1)]),
    "silver keeps the first copy unless it is the same record": (SILVER, None, lambda: [
        rows(SILVER, [0, 1, 2], 0),
        pa.concat_tables([rows(SILVER, [1], 1, stable=("event_time", "topic", "partition", "offset")),
                          rows(SILVER, [2, 3], 1, stable=("event_time",))])]),
    "corrections of the writer's own batches are appended": (CORRECTIONS, None, lambda: [
        rows(CORRECTIONS, [0, 1], 0, query_id="q", batch_id=1),
        rows(CORRECTIONS, [1, 2], 1, query_id="q", batch_id=2)]),
    "rows keyed otherwise keep their first copy": (CORRECTIONS, None, lambda: [
        rows(CORRECTIONS, [0, 1], 0, query_id="backfill", batch_id=7),
        rows(CORRECTIONS, [1, 2], 1, query_id="backfill", batch_id=7)]),
    "late trades keep their first copy": (LATE_TRADES, None, lambda: [rows(LATE_TRADES, [0, 1], 0),
                                                                      rows(LATE_TRADES, [1, 2], 1)]),
}


@pytest.mark.parametrize("case", CASES)
def test_both_writers_leave_the_same_table(spark, tmp_path, case):
    table, write, make = CASES[case]
    by_deltalake, by_spark = Lake(tmp_path / "deltalake"), Lake(tmp_path / "spark")
    spark_lake = SparkLake(by_spark, spark)
    for batch_id, batch_rows in enumerate(make(), start=1):
        batch = Batch("q", batch_id)
        assert by_deltalake.publish(table, batch_rows, batch, write=write)
        assert spark_lake.publish(table, spark.createDataFrame(batch_rows), batch, write=write)
        pd.testing.assert_frame_equal(table_as_read(by_spark, table), table_as_read(by_deltalake, table),
                                      obj=f"{table.name} after batch {batch_id}")


def test_a_batch_either_writer_recorded_is_not_written_again(spark, tmp_path):
    lake = Lake(tmp_path / "data")
    spark_lake = SparkLake(lake, spark)
    first, again = rows(GOLD, [0, 1], 0), rows(GOLD, [0, 1], 5)
    assert spark_lake.publish(GOLD, spark.createDataFrame(first), Batch("backfill", 3), write=Write.ADD)
    assert lake.published(GOLD, Batch("backfill", 3))  # deltalake sees delta-spark's app transaction
    assert not lake.publish(GOLD, again, Batch("backfill", 3), write=Write.ADD)
    assert not spark_lake.publish(GOLD, spark.createDataFrame(again), Batch("backfill", 2), write=Write.ADD)
    assert spark_lake.publish(GOLD, spark.createDataFrame(again), Batch("backfill", 4), write=Write.ADD)
    assert list(table_as_read(lake, GOLD)["trade_count"]) == [0 + 5, 10 + 15]  # 3 and 4 added, 2 skipped
