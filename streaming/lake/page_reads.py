"""The dashboard's reads that need SQL (aggregates, top-k, filtered reads), each named by what it answers.

The reads that follow a table's versions file by file are in increments.py."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Sequence

import pyarrow as pa

from streaming.lake.sql import before_offsets, equals, in_time_range, quote
from streaming.lake.store import Lake
from streaming.lake.tables import BATCH_WATERMARKS, BRONZE, GOLD, GOLD_WRITES, LATE_TRADES, QUARANTINE, SILVER

BY_PARTITION = f"GROUP BY {quote('topic')}, {quote('partition')}"


def silver_day(lake: Lake, start: datetime, columns: Sequence[str], channel: str | None = None,
               symbol: str | None = None) -> pa.Table:
    """Silver's valid trades with an event time in the day from `start`, optionally of one
    channel and/or symbol."""
    conditions = [in_time_range("event_time", start, start + timedelta(days=1), high_inclusive=False)]
    if channel:
        conditions.append(equals("channel", channel))
    if symbol:
        conditions.append(equals("symbol", symbol))
    return lake.read(SILVER, columns, " AND ".join(conditions))


def _per_partition(rows: pa.Table | None, *columns: str) -> dict[str, dict]:
    """Query rows with topic and partition -> {"topic:partition": {column: value}}."""
    if rows is None:
        return {}
    return {f"{r['topic']}:{r['partition']}": {c: int(r[c] or 0) for c in columns} for r in rows.to_pylist()}


def _first(rows: pa.Table | None, column: str) -> int:
    return int(rows[column][0].as_py() or 0) if rows is not None and rows.num_rows else 0


def exactly_once_counts(lake: Lake) -> dict:
    """What each table holds at one point, over the key columns only (offsets, ids): up to the
    offsets gold's ledger has recorded per "topic:partition" (`counted`), read with gold and the
    too-late list at one micro-batch (`at`: when). Bronze, silver and quarantine are counted
    below those offsets only (the batch being written is in the next count): bronze's records,
    distinct records (offset and Kafka time) and distinct offsets, silver's trades,
    quarantine's records. Then gold's trade count, the too-late trades not backfilled among
    those, and the trades silver holds twice."""
    topic, partition, offset = quote("topic"), quote("partition"), quote("offset")
    with lake.writing(*GOLD_WRITES):  # gold, the ledger and the too-late list at one micro-batch
        at = datetime.now(timezone.utc)
        counted = _per_partition(lake.query(BATCH_WATERMARKS, f"SELECT {topic}, {partition}, max(end_offset) AS "
                                                              f"end_offset FROM t {BY_PARTITION}"), "end_offset")
        gold = lake.query(GOLD, "SELECT sum(trade_count) AS trades FROM t")
        late = lake.read(LATE_TRADES, ["topic", "partition", "offset"], f"{quote('backfilled_at')} IS NULL")
    ends = {tp: values["end_offset"] for tp, values in counted.items()}
    # Below the ledger's ends the batches are done: bronze, silver and quarantine commit before it.
    cut = before_offsets({(tp.rsplit(":", 1)[0], int(tp.rsplit(":", 1)[1])): end for tp, end in ends.items()})
    # A record is its offset and Kafka time: a broker that lost its tail gives offsets out again.
    bronze = _per_partition(lake.query(BRONZE, f"SELECT {topic}, {partition}, sum(copies) AS records, count(*) AS "
                                               f"distinct_records, count(DISTINCT {offset}) AS offsets FROM (SELECT "
                                               f"{topic}, {partition}, {offset}, count(*) AS copies FROM t WHERE {cut} "
                                               f"GROUP BY {topic}, {partition}, {offset}, {quote('timestamp')}) "
                                               f"{BY_PARTITION}"),
                            "records", "distinct_records", "offsets")
    silver = _per_partition(lake.query(SILVER, f"SELECT {topic}, {partition}, count(*) AS trades FROM t WHERE {cut} "
                                               f"{BY_PARTITION}"), "trades")
    quarantined = _per_partition(lake.query(QUARANTINE, f"SELECT {topic}, {partition}, count(*) AS records FROM t "
                                                        f"WHERE {cut} {BY_PARTITION}"), "records")
    doubled = lake.query(SILVER, f"SELECT count(*) AS n FROM (SELECT trade_id, event_time FROM t WHERE {cut} "
                                 "GROUP BY trade_id, event_time HAVING count(*) > 1)")
    late_counted = sum(1 for r in late.to_pylist() if r["offset"] < ends.get(f"{r['topic']}:{r['partition']}", 0))
    silver_trades = {tp: values["trades"] for tp, values in silver.items()}
    return {"at": at, "counted": ends, "bronze": bronze, "silver": silver_trades,
            "quarantine": {tp: values["records"] for tp, values in quarantined.items()},
            "gold_trades": _first(gold, "trades"), "silver_counted": sum(silver_trades.values()),
            "late_counted": late_counted, "silver_doubled": _first(doubled, "n")}
