"""delta-spark reads every table the pipeline writes, and sees what deltalake sees: the same
rows through `spark.read.format("delta")` and `DeltaTable.forPath` as through
`deltalake.DeltaTable(path).to_pandas()` (PRODUCT.md's two readers)."""

import pandas as pd
from delta.tables import DeltaTable as SparkDeltaTable

from streaming.lake.store import Lake
from streaming.lake.tables import ALL, CORRECTIONS, LATE_TRADES, QUARANTINE
from tests.support.corpus import DAY, trade


def comparable(frame: pd.DataFrame, keys) -> pd.DataFrame:
    """Rows in key order, times as UTC instants, so both readers' frames compare equal."""
    frame = frame.copy()
    for column in frame.columns:
        if pd.api.types.is_datetime64_any_dtype(frame[column]):
            times = pd.to_datetime(frame[column])
            times = times.dt.tz_localize("UTC") if times.dt.tz is None else times.dt.tz_convert("UTC")
            frame[column] = times.dt.as_unit("us")  # a column with a null comes in ns from one reader
        elif frame[column].dtype == object:
            frame[column] = frame[column].map(lambda v: bytes(v) if isinstance(v, (bytearray, memoryview)) else v)
    return frame.sort_values(list(keys)).reset_index(drop=True)


def test_every_table_reads_the_same_through_delta_spark_and_deltalake(spark, stream):
    stream.add(trade("t1", "BUY", 10, 100.0, DAY + "09:00:00Z"), trade("t2", "SELL", 5, 100.0, DAY + "09:31:00Z"),
               trade("t2", "SELL", 5, 100.0, DAY + "09:31:00Z"), b"\xff not utf-8")
    stream.process()
    stream.add(trade("t3", "BUY", 3, 10.0, DAY + "09:05:00Z"))  # late, within the watermark: a correction
    stream.process()
    stream.add(trade("t4", "BUY", 1, 1.0, DAY + "10:30:00Z"))
    stream.process()
    stream.add(trade("t5", "SELL", 1, 7.0, DAY + "09:10:00Z"))  # too late
    stream.process()
    for table in (QUARANTINE, CORRECTIONS, LATE_TRADES):
        assert len(stream.table(table)) == 1, table.name

    lake = Lake(stream.settings.data_dir)
    for table in ALL:
        expected = comparable(stream.table(table), table.keys)
        location = lake.spark_location(table)
        through_read = spark.read.format("delta").load(location).toPandas()
        through_for_path = SparkDeltaTable.forPath(spark, location).toDF().toPandas()
        for frame in (through_read, through_for_path):
            assert list(frame.columns) == list(expected.columns), table.name
            pd.testing.assert_frame_equal(comparable(frame, table.keys), expected, check_dtype=False,
                                          obj=table.name)
