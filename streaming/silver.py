"""Silver: Kafka records -> typed, validated trades (pure DataFrame -> DataFrame functions).

`parse_trades` keeps every record and adds a `reason` column: NULL for a valid trade, else a
human-readable explanation of the first problem found; and `valid`, the same as a boolean.
`valid_trades` and `rejected_records` split on it, so nothing is dropped without a trace.
"""

from __future__ import annotations

import functools
import operator
from datetime import datetime, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streaming.lake.tables import QUARANTINE, SILVER
from streaming.lateness import EPOCH

TRADE_FIELDS = ("trade_id", "account_id", "symbol", "side", "quantity", "price", "channel", "event_time")
SIDES = ("BUY", "SELL")
MAX_VALUE_BYTES = 1024 * 1024
# Sanity bounds: anything beyond is a fat finger or a broken client, not a trade.
MAX_QUANTITY = 1_000_000_000
MAX_PRICE = 1_000_000_000.0

# Parsed with an explicit schema; event_time stays text until its zone is checked.
TRADE_SCHEMA = T.StructType([
    T.StructField("trade_id", T.StringType()),
    T.StructField("account_id", T.StringType()),
    T.StructField("symbol", T.StringType()),
    T.StructField("side", T.StringType()),
    T.StructField("quantity", T.LongType()),
    T.StructField("price", T.DoubleType()),
    T.StructField("channel", T.StringType()),
    T.StructField("event_time", T.StringType()),
])
# ISO-8601 date, 'T' or space, time, then a zone: Z or +hh:mm / +hhmm / +hh.
_ISO_WITH_ZONE = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?\s*(Z|z|[+-]\d{2}(:?\d{2})?)$"


def _raw(field: str) -> Column:
    """The field's JSON text, for error messages (the typed column is NULL when it mismatches)."""
    return F.coalesce(F.get_json_object("json_text", f"$.{field}"), F.lit("?"))


def _first_problem(checks: list[tuple[Column, Column]]) -> Column:
    expr = F.lit(None).cast("string")
    for failed, message in reversed(checks):
        expr = F.when(failed, message).otherwise(expr)
    return expr


def parse_trades(records: DataFrame, with_reason: bool = True) -> DataFrame:
    """Kafka records (key, value, topic, partition, offset, timestamp) -> trades + `reason`.

    Without the reason (gold only keeps the valid trades): Spark optimises a micro-batch's plan
    anew each time, and the reason's expression is most of this one, even where it is pruned."""
    text = F.col("value").cast("string")
    parsed = (
        records
        .withColumn("json_text", F.when(F.is_valid_utf8(text), text))
        .withColumn("trade", F.from_json("json_text", TRADE_SCHEMA))
        .select("*", *[F.col(f"trade.{f}").alias(f) for f in TRADE_FIELDS])
    )
    # The JSON is parsed again, strictly, for its keys only when a field came out NULL (missing,
    # null, mistyped, not an object) or non-finite (from_json accepts NaN and Infinity literals,
    # the strict parser does not): a valid trade pays for one parse.
    any_null = functools.reduce(operator.or_, [F.col(f).isNull() for f in TRADE_FIELDS]) \
        | F.isnan("price") | (F.abs("price") == float("inf"))
    json_keys = F.when(any_null, F.json_object_keys("json_text"))

    checks: list[tuple[Column, Column]] = [
        (F.col("value").isNull() | (F.length("value") == 0), F.lit("empty value")),
        (F.length("value") > MAX_VALUE_BYTES,
         F.format_string("value is %d bytes, over the %d-byte limit", F.length("value"), F.lit(MAX_VALUE_BYTES))),
        (F.col("json_text").isNull(), F.lit("value is not valid UTF-8")),
        (any_null & json_keys.isNull(),
         F.lit("value is not a JSON object (malformed JSON, NaN/Infinity literals, an array or a scalar)")),
    ]
    for field in TRADE_FIELDS:
        checks.append((F.col(field).isNull() & ~F.array_contains(json_keys, field), F.lit(f"missing field '{field}'")))
        # The typed column first: get_json_object re-parses the text, so only for a NULL field.
        checks.append((F.col(field).isNull() & F.get_json_object("json_text", f"$.{field}").isNull(),
                       F.lit(f"field '{field}' is null")))
    for field in ("trade_id", "account_id", "symbol", "channel"):
        checks.append((F.trim(F.col(field)) == "", F.lit(f"field '{field}' is empty")))
    checks += [
        (~F.col("side").isin(*SIDES), F.format_string("side must be BUY or SELL, got %s", _raw("side"))),
        (F.col("quantity").isNull() | (F.col("quantity") <= 0),
         F.format_string("quantity must be a positive integer, got %s", _raw("quantity"))),
        (F.col("quantity") > MAX_QUANTITY,
         F.format_string("quantity %s is over the limit of %d", _raw("quantity"), F.lit(MAX_QUANTITY))),
        (F.col("price").isNull() | F.isnan("price") | (F.col("price") <= 0)
         | (F.col("price") == float("inf")),
         F.format_string("price must be a finite positive number, got %s", _raw("price"))),
        (F.col("price") > MAX_PRICE,
         F.format_string("price %s is over the limit of %.0f", _raw("price"), F.lit(MAX_PRICE))),
        (~F.col("event_time").rlike(_ISO_WITH_ZONE),
         F.format_string("event_time must be ISO-8601 with a zone (e.g. 2026-03-02T09:32:00Z), got %s",
                         _raw("event_time"))),
        (F.col("event_time").try_cast("timestamp").isNull(),
         F.format_string("event_time is not a valid time: %s", _raw("event_time"))),
        # Checked last, so a record that is also broken in its value reports that first.
        (F.col("key").isNull() | (F.length("key") == 0), F.lit("missing Kafka key (the account_id)")),
    ]

    return parsed.select(
        "key", "value", "topic", "partition", "offset",
        F.col("timestamp").alias("kafka_timestamp"),
        "trade_id", "account_id", "symbol", "side", "quantity", "price",
        (F.col("quantity") * F.col("price")).alias("amount"),
        "channel",
        F.col("event_time").try_cast("timestamp").alias("event_time"),
        *([_first_problem(checks).alias("reason")] if with_reason else []),
        _is_valid().alias("valid"),
    )


def _is_valid() -> Column:
    """`reason IS NULL`, as a lean predicate: a query that only keeps the valid trades (gold)
    filters on it, so Spark prunes the messages, the second parse for the JSON's keys and the
    raw-text lookups. Every field non-NULL is what the missing/null/mistyped checks come down to
    for a valid trade. Spark plans, generates and ships this expression every micro-batch, so
    its size is latency. tests/test_silver_parse.py checks it agrees with `reason`."""
    conditions = [
        F.length("value").between(1, MAX_VALUE_BYTES),
        F.col("json_text").isNotNull(),
        *[F.col(field).isNotNull() for field in TRADE_FIELDS],
        *[F.trim(F.col(field)) != "" for field in ("trade_id", "account_id", "symbol", "channel")],
        F.col("side").isin(*SIDES),
        F.col("quantity").between(1, MAX_QUANTITY),
        ~F.isnan("price"), F.col("price") > 0, F.col("price") <= MAX_PRICE,  # +-Infinity is out of range
        F.col("event_time").rlike(_ISO_WITH_ZONE),
        F.col("event_time").try_cast("timestamp").isNotNull(),
        F.length("key") > 0,
    ]
    return F.coalesce(functools.reduce(operator.and_, conditions), F.lit(False))


def valid_trades(parsed: DataFrame) -> DataFrame:
    return parsed.where(F.col("valid")).drop("reason", "valid", "value", "key")


def rejected_records(parsed: DataFrame) -> DataFrame:
    return parsed.where(~F.col("valid")).select(
        "key", "value", "topic", "partition", "offset", "kafka_timestamp", "reason"
    )


# -- splitting a collected micro-batch (Arrow) into the silver tables --------------------------
def silver_rows(parsed: pa.Table) -> pa.Table:
    """Valid trades in arrival order (Kafka timestamp, partition, offset), so that when one
    trade_id comes twice the first copy is the one kept."""
    valid = parsed.filter(pc.is_null(parsed["reason"]))
    valid = valid.sort_by([("kafka_timestamp", "ascending"), ("partition", "ascending"), ("offset", "ascending")])
    return valid.select(SILVER.columns).cast(SILVER.schema)


def quarantine_rows(parsed: pa.Table) -> pa.Table:
    return parsed.filter(pc.is_valid(parsed["reason"])).select(QUARANTINE.columns).cast(QUARANTINE.schema)


# -- event-time sanity: a trade far ahead of everything seen is quarantined (Arrow) -------------
_NO_TIME = np.iinfo(np.int64).min
_LAST_TIME = np.iinfo(np.int64).max


def _micros(moment: datetime | None) -> int:
    return _NO_TIME if moment is None else (moment - EPOCH) // timedelta(microseconds=1)


def _moment(micros: int) -> str:
    return (EPOCH + timedelta(microseconds=int(micros))).isoformat().replace("+00:00", "Z")


def time_jump_reasons(trades: pa.Table, latest_seen: datetime | None, max_jump: timedelta) -> pa.Array:
    """Per trade: why its event time is implausibly far ahead, or null.

    A trade jumps when its event time is more than `max_jump` past both the latest event time
    seen before it and its own Kafka timestamp. Seen before it: `latest_seen` (the trades of
    earlier micro-batches), then the trades before it in its Kafka partition that did not jump
    themselves. With nothing seen yet, the Kafka timestamp alone is the reference; with it, a
    feed that resumes after a quiet weekend is not mistaken for a jump.
    trades: event_time, kafka_timestamp, partition, offset (at microsecond precision)."""
    n = trades.num_rows
    reasons: list[str | None] = [None] * n
    if n == 0:
        return pa.array(reasons, pa.string())
    jump = max_jump // timedelta(microseconds=1)
    event = pc.cast(trades["event_time"], pa.int64()).to_numpy(zero_copy_only=False)
    sent = pc.fill_null(pc.cast(trades["kafka_timestamp"], pa.int64()), _NO_TIME).to_numpy(zero_copy_only=False)
    latest = _micros(latest_seen)

    def bound(reference):  # reference + jump, short of overflowing; with no reference at all, no bound
        return np.where(reference == _NO_TIME, _LAST_TIME, np.minimum(reference, _LAST_TIME - jump) + jump)

    # Only a trade past the batch's own reference can jump: the rest never needs the sequential pass.
    if not (event > bound(np.maximum(latest, sent))).any():
        return pa.array(reasons, pa.string())
    partitions = trades["partition"].to_numpy(zero_copy_only=False)
    offsets = trades["offset"].to_numpy(zero_copy_only=False)
    for partition in np.unique(partitions[event > bound(np.maximum(latest, sent))]):
        rows = np.flatnonzero(partitions == partition)
        running = latest
        for i in rows[np.argsort(offsets[rows], kind="stable")]:
            reference = max(running, int(sent[i]))
            if event[i] > int(bound(reference)):
                seen = _moment(running) if running != _NO_TIME else "none yet"
                reasons[i] = (f"event_time {_moment(event[i])} is more than {max_jump} ahead of the latest event "
                              f"time seen ({seen}) and of its Kafka timestamp "
                              f"({_moment(sent[i]) if sent[i] != _NO_TIME else 'none'}): a clock error? "
                              "(--max-event-time-jump)")
            else:
                running = max(running, int(event[i]))
    return pa.array(reasons, pa.string())


def with_reasons(records: pa.Table, rejected: pa.Table, reasons: pa.Array) -> pa.Table:
    """parse_trades() rows with `reasons` set on the records of `rejected` (matched by Kafka
    record), which then go to quarantine instead of silver."""
    if rejected.num_rows == 0:
        return records

    def record_key(rows):
        return pc.binary_join_element_wise(rows["topic"], pc.cast(rows["partition"], pa.string()),
                                           pc.cast(rows["offset"], pa.string()), "\x00")

    position = pc.index_in(record_key(records), value_set=record_key(rejected).combine_chunks())
    new_reason = pc.take(reasons, position)
    return records.set_column(records.schema.get_field_index("reason"), "reason",
                              pc.coalesce(records["reason"], new_reason))


def split_time_jumps(new: pa.Table, latest_seen: datetime | None,
                     max_jump: timedelta) -> tuple[pa.Table, pa.Table, pa.Array]:
    """Trades new to silver -> (those that stay, those that jump, the jumpers' reasons)."""
    reasons = time_jump_reasons(new, latest_seen, max_jump)
    jumped = pc.is_valid(reasons)
    if not pc.any(jumped).as_py():
        return new, new.slice(0, 0), reasons.slice(0, 0)
    return new.filter(pc.invert(jumped)), new.filter(jumped), reasons.filter(jumped)


# -- a known trade_id with another event time: the first copy wins, the other is quarantined ---------
def conflict_reasons(trades: pa.Table, first_copies: pa.Table) -> pa.Array:
    """Per trade: why it conflicts with the first copy of its trade_id, or null. A record with
    the trade_id of another Kafka record but another event time is not a redelivery: it would
    count the trade twice. first_copies: trade_id, event_time, topic, partition, offset."""
    reasons: list[str | None] = [None] * trades.num_rows
    if trades.num_rows == 0 or first_copies.num_rows == 0:
        return pa.array(reasons, pa.string())
    columns = ["trade_id", "event_time", "topic", "partition", "offset"]
    mine = trades.select(columns).append_column("row", pa.array(range(trades.num_rows), pa.int64()))
    first = first_copies.select(columns).rename_columns(["trade_id", *(f"first_{c}" for c in columns[1:])])
    pairs = mine.join(first, "trade_id", join_type="inner", use_threads=False)
    same_record = functools.reduce(pc.and_, [pc.equal(pairs[c], pairs[f"first_{c}"]) for c in columns[2:]])
    # The same record read again (a replay after a parser fix) replaces its own row: no conflict.
    hits = pairs.filter(pc.and_(pc.not_equal(pairs["event_time"], pairs["first_event_time"]), pc.invert(same_record)))
    for hit in hits.to_pylist():
        first_time, this_time = _moment(_micros(hit["first_event_time"])), _moment(_micros(hit["event_time"]))
        reasons[hit["row"]] = (f"trade_id {hit['trade_id']} is already a trade with event_time {first_time} "
                               f"({hit['first_topic']}/{hit['first_partition']} offset {hit['first_offset']}); "
                               f"this record says {this_time}: the first copy wins")
    return pa.array(reasons, pa.string())


def split_conflicts(trades: pa.Table, first_copies: pa.Table) -> tuple[pa.Table, pa.Table, pa.Array]:
    """Trades -> (those that stay, those that conflict with a first copy, their reasons)."""
    reasons = conflict_reasons(trades, first_copies)
    conflicting = pc.is_valid(reasons)
    if not pc.any(conflicting).as_py():
        return trades, trades.slice(0, 0), reasons.slice(0, 0)
    return trades.filter(pc.invert(conflicting)), trades.filter(conflicting), reasons.filter(conflicting)
