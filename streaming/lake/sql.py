"""SQL text for delta-rs's engine: quoted names, literals, and the conditions the lake reads and
merges by (time ranges, Kafka offsets, ids); and its results in the tables' types. Only the lake
builds SQL; the rest asks it by name."""

from __future__ import annotations

from datetime import date, datetime, timezone
from typing import Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc


def quote(column: str) -> str:
    return f'"{column}"'


def sql_literal(value) -> str:
    """A value as SQL for delta-rs: times in UTC at the tables' microsecond precision (a plain
    ::timestamp is nanoseconds, which end in 2262: a valid trade dated 2999 would fail the
    batch, again after every restart), text quoted."""
    if isinstance(value, datetime):
        iso = value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return f"""arrow_cast('{iso}', 'Timestamp(Microsecond, Some("UTC"))')"""
    if isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


def equals(column: str, value) -> str:
    """SQL: `column` is `value`."""
    return f"{quote(column)} = {sql_literal(value)}"


def one_of(column: str, values: Iterable) -> str:
    """SQL: `column` is any of `values`."""
    return f"{quote(column)} IN ({', '.join(sql_literal(value) for value in values)})"


def in_time_range(column: str, low: datetime, high: datetime, high_inclusive: bool = True) -> str:
    """SQL: `column` from `low` up to `high` (included unless high_inclusive is False)."""
    return (f"{quote(column)} >= {sql_literal(low)} AND {quote(column)} {'<=' if high_inclusive else '<'} "
            f"{sql_literal(high)}")


def before_offsets(offsets: dict[tuple[str, int], int]) -> str:
    """SQL: rows whose Kafka record lies before `offsets` in its partition (none if it is empty)."""
    return " OR ".join(f"({quote('topic')} = {sql_literal(topic)} AND {quote('partition')} = {int(partition)} "
                       f"AND {quote('offset')} < {int(end)})" for (topic, partition), end in offsets.items()) or "FALSE"


def from_offsets(offsets: dict[tuple[str, int], int]) -> str:
    """SQL: rows whose Kafka record lies at or after `offsets` in its partition."""
    return " OR ".join(f"({quote('topic')} = {sql_literal(topic)} AND {quote('partition')} = {partition} "
                       f"AND {quote('offset')} >= {start})" for (topic, partition), start in offsets.items())


def in_offset_ranges(ranges: pa.Table) -> str:
    """SQL: records in any of these (topic, partition, start_offset, end_offset) ranges."""
    return " OR ".join(
        f"({quote('topic')} = {sql_literal(topic)} AND {quote('partition')} = {int(partition)} "
        f"AND {quote('offset')} >= {int(start)} AND {quote('offset')} < {int(end)})"
        for topic, partition, start, end in zip(*(ranges[c].to_pylist() for c in
                                                  ("topic", "partition", "start_offset", "end_offset"))))


def key_ranges(rows: pa.Table, keys: Sequence[str]) -> list[str]:
    """`t.k >= low AND t.k <= high` over the source's range of each integer, time or day key
    (offsets, batch ids, event times, partitions): only a target row inside it can match, and
    delta-rs then reads just the partitions and files whose statistics overlap it instead of the
    whole table, which grows all day."""
    conditions = []
    for key in keys:
        kind = rows.schema.field(key).type
        if pa.types.is_integer(kind) or pa.types.is_timestamp(kind) or pa.types.is_date(kind):
            low, high = pc.min_max(rows[key]).values()
            if low.is_valid:
                conditions.append(f"t.{quote(key)} >= {sql_literal(low.as_py())} "
                                  f"AND t.{quote(key)} <= {sql_literal(high.as_py())}")
    return conditions


def plain_strings(rows: pa.Table) -> pa.Table:
    """delta-rs's engine returns strings as string_view, which not every pyarrow kernel (nor
    Spark's Python data sources) takes: plain strings, as the tables have."""
    if not any(pa.types.is_string_view(field.type) for field in rows.schema):
        return rows
    return rows.cast(pa.schema([field.with_type(pa.string()) if pa.types.is_string_view(field.type) else field
                                for field in rows.schema]))
