"""Silver: Kafka records -> typed, validated trades (pure DataFrame -> DataFrame functions).

`parse_trades` keeps every record and adds a `reason` column: NULL for a valid trade, else a
human-readable explanation of the first problem found; and `valid`, the same as a boolean.
`valid_trades` and `rejected_records` split on it, so nothing is dropped without a trace.
"""

from __future__ import annotations

import functools
import operator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streaming.lake.tables import QUARANTINE, SILVER

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
