"""The pipeline's reads of the lake, by name: what the sink and the reconciliation ask of the
tables (by time range, Kafka offsets, trade ids, writer), so that no SQL is written outside it."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from streaming.lake.sql import (
    before_offsets,
    equals,
    from_offsets,
    in_offset_ranges,
    in_time_range,
    one_of,
    quote,
    sql_literal,
)
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import BATCH_WATERMARKS, BRONZE, SILVER, Table

log = logging.getLogger(__name__)

# Past this many ids, one pass over the table beats a long IN list.
IN_LIST_UP_TO = 1000


def offset_ranges(records: pa.Table) -> pa.Table:
    """Per topic partition, [first offset, last offset + 1) of these records."""
    spans = records.group_by(["topic", "partition"], use_threads=False).aggregate(
        [("offset", "min"), ("offset", "max")])
    return pa.table({"topic": spans["topic"], "partition": spans["partition"], "start_offset": spans["offset_min"],
                     "end_offset": pc.add(spans["offset_max"], 1)})


def rows_between(lake: Lake, table: Table, column: str, low: datetime, high: datetime, *,
                 columns: Sequence[str] | None = None, high_inclusive: bool = True,
                 before: dict[tuple[str, int], int] | None = None) -> pa.Table:
    """The table's rows whose `column` is from `low` up to `high` (included unless
    high_inclusive is False); with `before`, only those whose Kafka record lies before these
    offsets in its partition."""
    where = in_time_range(column, low, high, high_inclusive)
    if before is not None:
        where += f" AND ({before_offsets(before)})"
    return lake.read(table, columns, where)


def rows_written_by(lake: Lake, table: Table, query_id: str, columns: Sequence[str] | None = None) -> pa.Table:
    """The table's rows of one writer (a streaming query's id, or 'backfill')."""
    return lake.read(table, columns, equals("query_id", query_id))


def rows_of_trade_ids(lake: Lake, table: Table, ids: pa.ChunkedArray, columns: Sequence[str],
                      between: tuple[datetime, datetime] | None = None) -> pa.Table:
    """The table's rows of these trade_ids (with an event time in [between), when given)."""
    if len(ids) == 0:
        return table.schema_of(columns).empty_table()
    in_range = in_time_range("event_time", *between, high_inclusive=False) if between else None
    if len(ids) > IN_LIST_UP_TO:  # many (records read again)
        wanted = ids.combine_chunks()
        return pa.Table.from_batches([batch.filter(pc.is_in(batch["trade_id"], value_set=wanted))
                                      for batch in lake.scan(table, columns, in_range)], table.schema_of(columns))
    where = one_of("trade_id", ids.to_pylist())
    return lake.read(table, columns, f"{where} AND {in_range}" if in_range else where)


def silver_at_event_times_of(lake: Lake, trades: pa.Table, columns: Sequence[str]) -> pa.Table:
    """Silver's rows among the trades' event times (from the earliest to the latest)."""
    if trades.num_rows == 0:
        return SILVER.schema_of(columns).empty_table()
    low, high = pc.min_max(trades["event_time"]).values()
    return rows_between(lake, SILVER, "event_time", low.as_py(), high.as_py(), columns=columns)


def silver_rows_of_records(lake: Lake, trades: pa.Table, columns: Sequence[str]) -> pa.Table:
    """Silver's rows of the trades' Kafka records: the trades it kept from them."""
    if trades.num_rows == 0:
        return SILVER.schema_of(columns).empty_table()
    low, high = pc.min_max(trades["event_time"]).values()
    return lake.read(SILVER, columns, f"({in_offset_ranges(offset_ranges(trades))}) AND "
                                      f"{in_time_range('event_time', low.as_py(), high.as_py())}")


def latest_event_time_before(lake: Lake, offsets: dict[tuple[str, int], int],
                             at_least: datetime | None = None) -> datetime | None:
    """The latest event time among silver's trades from the Kafka records before `offsets`.
    at_least: a time known to be at or before it (an event time among those trades, or less),
    so that only the files of the recent event times are read, not all of silver's."""
    where = before_offsets(offsets)
    if at_least is not None:
        where = f"({where}) AND {quote('event_time')} >= {sql_literal(at_least)}"
    found = lake.query(SILVER, f"SELECT max({quote('event_time')}) AS latest FROM t WHERE {where}")
    latest = found["latest"][0].as_py() if found is not None and found.num_rows else None
    if latest is None and at_least is not None:  # the bound was wrong (rows deleted since): ask them all
        return latest_event_time_before(lake, offsets)
    return latest


def ledger_watermark(lake: Lake, query_id: str, batch_id: int) -> datetime | None:
    """The watermark a batch of a query ran with, from the ledger (None if it has no rows):
    the ledger's files are skipped on their batch ids' statistics."""
    found = lake.query(BATCH_WATERMARKS, f"SELECT max({quote('watermark')}) AS w FROM t WHERE "
                                         f"{equals('query_id', query_id)} AND {quote('batch_id')} = {int(batch_id)}")
    return found["w"][0].as_py() if found is not None and found.num_rows else None


def idle_closes(lake: Lake, closer_prefix: str) -> pa.Table:
    """The ledger's idle closes, every query's: the rows of writers whose id starts with
    `closer_prefix` (lateness.CLOSER_PREFIX); files that hold none are skipped on their query
    ids' statistics."""
    low, high = closer_prefix, closer_prefix[:-1] + chr(ord(closer_prefix[-1]) + 1)
    return lake.read(BATCH_WATERMARKS, ["query_id", "batch_id", "topic", "partition", "end_offset", "closed_to"],
                     f"{quote('query_id')} >= {sql_literal(low)} AND {quote('query_id')} < {sql_literal(high)}")


def holds_records_from(lake: Lake, table: Table, starts: dict[tuple[str, int], int]) -> bool:
    """Whether the table (keyed by Kafka record) holds a record at or after `starts` in any of
    their partitions."""
    return _any_record(lake, table, from_offsets(starts))


def holds_records_of(lake: Lake, table: Table, records: pa.Table) -> bool:
    """Whether the table (keyed by Kafka record) holds a record from these records' offset ranges."""
    return records.num_rows > 0 and _any_record(lake, table, in_offset_ranges(offset_ranges(records)))


def _any_record(lake: Lake, table: Table, where: str) -> bool:
    found = lake.query(table, f"SELECT {quote('offset')} FROM t WHERE {where} LIMIT 1")
    return found is not None and found.num_rows > 0


def trade_ids_between(lake: Lake, low: datetime, high: datetime) -> Iterator[pa.Array]:
    """Silver's trade_ids with an event time from `low` up to (not including) `high`, a record
    batch at a time: the files outside the range are skipped on their statistics."""
    for batch in lake.scan(SILVER, ["trade_id"], in_time_range("event_time", low, high, high_inclusive=False)):
        yield batch["trade_id"]


def records_lost_so_far(lake: Lake) -> int:
    """The records Kafka removed before the pipeline read them, as the ledger counts them: only
    its rows with a loss are read (the others' files are skipped on their statistics)."""
    lost = quote("records_lost")
    found = lake.query(BATCH_WATERMARKS, f"SELECT sum({lost}) AS n FROM t WHERE {lost} > 0")
    return int(found["n"][0].as_py() or 0) if found is not None and found.num_rows else 0


def bronze_first_offsets_since(lake: Lake, since: datetime, before: dict[tuple[str, int], int]
                               ) -> dict[tuple[str, int], int]:
    """Per partition, the first offset before `before` of a record bronze holds with a Kafka
    time at or after `since` (partitions with none are left out)."""
    topic, partition, offset = quote("topic"), quote("partition"), quote("offset")
    found = lake.query(BRONZE, f"SELECT {topic}, {partition}, min({offset}) AS first FROM t WHERE "
                               f"{quote('timestamp')} >= {sql_literal(since)} AND ({before_offsets(before)}) "
                               f"GROUP BY {topic}, {partition}")
    if found is None:
        return {}
    return {(t, p): first for t, p, first in zip(found["topic"].to_pylist(), found["partition"].to_pylist(),
                                                  found["first"].to_pylist())}


def bronze_records_in(lake: Lake, ranges: pa.Table, columns: Sequence[str]) -> pa.Table:
    """Bronze's records in these offset ranges (topic, partition, start_offset, end_offset), in
    partition and offset order."""
    if ranges.num_rows == 0:
        return BRONZE.schema_of(columns).empty_table()
    rows = lake.read(BRONZE, columns, in_offset_ranges(ranges))
    return rows.sort_by([("partition", "ascending"), ("offset", "ascending")])


def latest_watermark_of(lake: Lake, query_id: str, since_batch: int) -> datetime | None:
    """The latest watermark in the ledger of a query's batches from `since_batch` on (the files
    of older batches are skipped on their statistics)."""
    where = f"{equals('query_id', query_id)} AND {quote('batch_id')} >= {int(since_batch)}"
    found = lake.query(BATCH_WATERMARKS, f"SELECT max({quote('watermark')}) AS w FROM t WHERE {where}")
    return found["w"][0].as_py() if found is not None and found.num_rows else None


def ledger_ends(lake: Lake, at_least: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """Per partition, the largest end offset any batch in the ledger read to, given ends it is
    known to reach (`at_least`: only rows beyond them are read; a partition not in it is read
    whole)."""
    topic, partition, end = quote("topic"), quote("partition"), quote("end_offset")
    beyond = " OR ".join(f"({topic} = {sql_literal(t)} AND {partition} = {int(p)} AND {end} > {int(o)})"
                         for (t, p), o in at_least.items())
    known = " AND ".join(f"NOT ({topic} = {sql_literal(t)} AND {partition} = {int(p)})" for t, p in at_least)
    where = " OR ".join(f"({part})" for part in (beyond, known) if part)
    found = lake.query(BATCH_WATERMARKS, f"SELECT {topic}, {partition}, max({end}) AS e FROM t"
                                         f"{f' WHERE {where}' if where else ''} GROUP BY {topic}, {partition}")
    ends = dict(at_least)
    for t, p, e in ([] if found is None else zip(*(found[c].to_pylist() for c in ("topic", "partition", "e")))):
        ends[(t, p)] = max(e, ends.get((t, p), e))
    return ends


def key_range_before(lake: Lake, table: Table, batch: Batch, low: datetime, high: datetime,
                     look_back: int = 20) -> pa.Table | None:
    """The rows whose key lies in [low, high] as the table held them just before the commit that
    recorded `batch`, found among its last `look_back` commits (a batch a crash cut short is
    among them); None if the batch is not there, or not that recent."""
    opened = lake.open(table)
    if opened is None or not lake.published(table, batch):
        return None
    app, latest = batch.app_id(table), opened.version()
    for version in range(latest - 1, max(latest - 1 - look_back, -1), -1):
        then = lake.open_version(table, version)
        if then is None:
            break
        done = then.transaction_version(app)
        if done is None or done < batch.id:
            return lake.read(table, where=in_time_range(table.keys[0], low, high), version=version)
    log.warning("%s holds batch %d of %s, but not the version before it among its last %d commits: what the "
                "batch changed there is judged against the table as it is now", table.name, batch.id, batch.writer,
                look_back)
    return None
