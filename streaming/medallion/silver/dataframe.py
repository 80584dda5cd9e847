"""Silver's parse as a pure Spark DataFrame -> DataFrame function, for Spark jobs over raw records."""

from __future__ import annotations

import functools
import operator

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streaming.medallion.silver import rules

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
        .select("*", *[F.col(f"trade.{f}").alias(f) for f in rules.TRADE_FIELDS])
    )
    # The JSON is parsed again, strictly, for its keys only when a field came out NULL (missing,
    # null, mistyped, not an object) or non-finite (from_json accepts NaN and Infinity literals,
    # the strict parser does not): a valid trade pays for one parse.
    any_null = functools.reduce(operator.or_, [F.col(f).isNull() for f in rules.TRADE_FIELDS]) \
        | F.isnan("price") | (F.abs("price") == float("inf"))
    json_keys = F.when(any_null, F.json_object_keys("json_text"))

    checks: list[tuple[Column, Column]] = [
        (F.col("value").isNull() | (F.length("value") == 0), F.lit(rules.EMPTY_VALUE)),
        (F.length("value") > rules.MAX_VALUE_BYTES,
         F.format_string(rules.TOO_LARGE, F.length("value"), F.lit(rules.MAX_VALUE_BYTES))),
        (F.col("json_text").isNull(), F.lit(rules.NOT_UTF8)),
        (any_null & json_keys.isNull(),
         F.lit(rules.NOT_AN_OBJECT)),
    ]
    for field in rules.TRADE_FIELDS:
        checks.append((F.col(field).isNull() & ~F.array_contains(json_keys, field), F.lit(rules.MISSING_FIELD % field)))
        # The typed column first: get_json_object re-parses the text, so only for a NULL field.
        checks.append((F.col(field).isNull() & F.get_json_object("json_text", f"$.{field}").isNull(),
                       F.lit(rules.NULL_FIELD % field)))
    for field in rules.NAME_FIELDS:
        checks.append((F.trim(F.col(field)) == "", F.lit(rules.EMPTY_FIELD % field)))
    checks += [
        (~F.col("side").isin(*rules.SIDES), F.format_string(rules.BAD_SIDE, _raw("side"))),
        (F.col("quantity").isNull() | (F.col("quantity") <= 0),
         F.format_string(rules.BAD_QUANTITY, _raw("quantity"))),
        (F.col("quantity") > rules.MAX_QUANTITY,
         F.format_string(rules.QUANTITY_OVER, _raw("quantity"), F.lit(rules.MAX_QUANTITY))),
        (F.col("price").isNull() | F.isnan("price") | (F.col("price") <= 0)
         | (F.col("price") == float("inf")),
         F.format_string(rules.BAD_PRICE, _raw("price"))),
        (F.col("price") > rules.MAX_PRICE,
         F.format_string(rules.PRICE_OVER, _raw("price"), F.lit(rules.MAX_PRICE))),
        (~F.col("event_time").rlike(rules.ISO_WITH_ZONE),
         F.format_string(rules.TIME_WITHOUT_ZONE, _raw("event_time"))),
        (F.col("event_time").try_cast("timestamp").isNull(),
         F.format_string(rules.INVALID_TIME, _raw("event_time"))),
        # Checked last, so a record that is also broken in its value reports that first.
        (F.col("key").isNull() | (F.length("key") == 0), F.lit(rules.MISSING_KEY)),
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
        F.length("value").between(1, rules.MAX_VALUE_BYTES),
        F.col("json_text").isNotNull(),
        *[F.col(field).isNotNull() for field in rules.TRADE_FIELDS],
        *[F.trim(F.col(field)) != "" for field in rules.NAME_FIELDS],
        F.col("side").isin(*rules.SIDES),
        F.col("quantity").between(1, rules.MAX_QUANTITY),
        ~F.isnan("price"), F.col("price") > 0, F.col("price") <= rules.MAX_PRICE,  # +-Infinity is out of range
        F.col("event_time").rlike(rules.ISO_WITH_ZONE),
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
