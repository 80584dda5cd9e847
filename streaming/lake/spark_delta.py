"""The lake through delta-spark, for Spark-side work (the reconciliation's recompute, a
backfill): the same tables, locks and write policies as the Lake's deltalake path, with the
batch recorded as the same Delta app transaction, so either writer sees what the other did.

Each table's write policy (tables.Write) has its deltalake formulation in store.py and its
delta-spark one here; tests/integration/test_delta_spark_writes.py holds them to the same
tables.
"""

from __future__ import annotations

import logging
import re
import threading
from datetime import datetime

from streaming.lake.store import Batch, Lake
from streaming.lake.tables import Table, Write, same_values

log = logging.getLogger(__name__)

# delta-spark's idempotent DML: the next MERGE, UPDATE or DELETE records this app transaction,
# and is skipped if the table has it at this version or later.
TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
# Those two settings are a session's: one MERGE at a time sets them, on a session of its own.
_txn_lock = threading.Lock()


def spark_sql(condition: str) -> str:
    """A catalog condition, whose names are quoted as delta-rs SQL quotes them ("c"), in Spark
    SQL's quoting (`c`)."""
    return re.sub(r'"(\w+)"', r"`\1`", condition)


def _name(column: str) -> str:
    return f"`{column}`"


class SparkLake:
    """A Lake's tables as Spark DataFrames, read and written with delta-spark."""

    def __init__(self, lake: Lake, spark):
        self.lake = lake
        self.spark = spark
        self._session = None  # for MERGEs: the app transaction is set on it (TXN_APP_ID)

    def frame(self, table: Table):
        """The table's latest version. A remote data dir (Spark's object-store file systems need
        Hadoop jars and settings of their own) is read here and handed to Spark."""
        location = self.lake.spark_location(table)
        if location is None:
            return self.spark.createDataFrame(self.lake.read(table))
        return self.spark.read.format("delta").load(location)

    def frame_between(self, table: Table, column: str, start: datetime, end: datetime,
                      before: dict[tuple[str, int], int]):
        """The table's rows whose `column` is in [start, end) and whose Kafka record lies before
        `before`'s offsets in its partition (none if it is empty)."""
        from pyspark.sql import functions as F

        before_offsets = F.lit(False)
        for (topic, partition), end_offset in before.items():
            before_offsets = before_offsets | ((F.col("topic") == topic) & (F.col("partition") == partition)
                                               & (F.col("offset") < end_offset))
        return self.frame(table).where((F.col(column) >= start) & (F.col(column) < end) & before_offsets)

    def publish(self, table: Table, rows, batch: Batch, *, write: Write | None = None, narrow: bool = True) -> bool:
        """Write `rows` (a DataFrame in the table's columns, one row per key) by the table's policy
        (or `write`), recording the batch in the same commit; False if the batch is there already.
        narrow=False: match on the keys alone, as Lake.publish. A remote data dir goes through the
        Lake's own writer."""
        write = write or table.write
        location = self.lake.spark_location(table)
        if location is None or table.day_of:  # a table by day: its day is the Lake's to add (Table.stored_rows)
            return self.lake.publish(table, rows.toArrow(), batch, write=write, narrow=narrow)
        rows = rows.select(*table.columns)
        with self.lake.writing(table):
            if self.lake.published(table, batch):
                log.info("skipping %s batch %d of %s: already committed", table.name, batch.id, batch.writer)
                return False
            self.lake.ensure(table)
            if write is Write.APPEND_ONCE_PER_BATCH and self._own_batch(rows, batch):
                (rows.write.format("delta").mode("append").option("txnAppId", batch.app_id(table))
                 .option("txnVersion", batch.id).save(location))
            else:
                self._merge(table, location, rows, batch, write, narrow)
        return True

    @staticmethod
    def _own_batch(rows, batch: Batch) -> bool:
        """Whether every row is keyed by this very (writer, batch), as Lake._own_batch."""
        from pyspark.sql import functions as F

        return rows.where((F.col("query_id") != batch.writer) | (F.col("batch_id") != batch.id)).limit(1).count() == 0

    def _merge(self, table: Table, location: str, rows, batch: Batch, write: Write, narrow: bool) -> None:
        from delta.tables import DeltaTable

        with _txn_lock:
            session = self._txn_session()
            merge = self._merge_plan(DeltaTable.forPath(session, location), table, rows, write, narrow)
            session.conf.set(TXN_APP_ID, batch.app_id(table))
            session.conf.set(TXN_VERSION, str(batch.id))
            try:
                merge.execute()
            finally:
                session.conf.unset(TXN_APP_ID)
                session.conf.unset(TXN_VERSION)

    def _txn_session(self):
        if self._session is None:
            self._session = self.spark.newSession()
        return self._session

    @staticmethod
    def _merge_plan(target, table: Table, rows, write: Write, narrow: bool):
        matched_on = (*table.keys, *(table.narrow_on if narrow else ()))
        merge = target.alias("t").merge(rows.alias("s"), spark_sql(same_values(matched_on)))
        if write in (Write.UPSERT, Write.ADD) or table.replace_when:
            updates = {_name(c): f"s.{_name(c)}" for c in table.columns if c not in table.keys}
            if write is Write.ADD:
                updates.update({_name(c): f"t.{_name(c)} + s.{_name(c)}" for c in table.sums})
            updates.update({_name(c): f"t.{_name(c)} + 1" for c in table.bump})
            replace_when = table.replace_when if write is Write.FIRST_COPY_WINS else None
            merge = merge.whenMatchedUpdate(condition=spark_sql(replace_when) if replace_when else None, set=updates)
        return merge.whenNotMatchedInsertAll()
