"""Silver: Kafka records -> typed, validated trades, in two formulations held to the same answers
(tests/integration/test_parse_agreement.py):

* `parse_records` (Arrow), what the pipeline's tasks run on the records they read;
* `parse_trades` (a pure DataFrame -> DataFrame function), for Spark jobs over bronze's raw
  records (on Databricks, say), with `valid_trades` and `rejected_records` to split its output.

Both keep every record and add a `reason` column: NULL for a valid trade, else a human-readable
explanation of the first problem found, so nothing is dropped without a trace.
"""

from __future__ import annotations

import decimal
import functools
import json
import math
import operator
import re
from datetime import datetime, timedelta

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streaming.lake.tables import QUARANTINE, SILVER
from streaming.medallion.lateness import EPOCH
from streaming.rows import no_cycle_collection

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

# The reasons, shared by the two formulations of the parse (Spark's and Arrow's).
EMPTY_VALUE = "empty value"
TOO_LARGE = "value is %d bytes, over the %d-byte limit"
NOT_UTF8 = "value is not valid UTF-8"
NOT_AN_OBJECT = "value is not a JSON object (malformed JSON, NaN/Infinity literals, an array or a scalar)"
MISSING_FIELD = "missing field '%s'"
NULL_FIELD = "field '%s' is null"
EMPTY_FIELD = "field '%s' is empty"
BAD_SIDE = "side must be BUY or SELL, got %s"
BAD_QUANTITY = "quantity must be a positive integer, got %s"
QUANTITY_OVER = "quantity %s is over the limit of %d"
BAD_PRICE = "price must be a finite positive number, got %s"
PRICE_OVER = "price %s is over the limit of %.0f"
TIME_WITHOUT_ZONE = "event_time must be ISO-8601 with a zone (e.g. 2026-03-02T09:32:00Z), got %s"
INVALID_TIME = "event_time is not a valid time: %s"
MISSING_KEY = "missing Kafka key (the account_id)"


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
        (F.col("value").isNull() | (F.length("value") == 0), F.lit(EMPTY_VALUE)),
        (F.length("value") > MAX_VALUE_BYTES,
         F.format_string(TOO_LARGE, F.length("value"), F.lit(MAX_VALUE_BYTES))),
        (F.col("json_text").isNull(), F.lit(NOT_UTF8)),
        (any_null & json_keys.isNull(),
         F.lit(NOT_AN_OBJECT)),
    ]
    for field in TRADE_FIELDS:
        checks.append((F.col(field).isNull() & ~F.array_contains(json_keys, field), F.lit(MISSING_FIELD % field)))
        # The typed column first: get_json_object re-parses the text, so only for a NULL field.
        checks.append((F.col(field).isNull() & F.get_json_object("json_text", f"$.{field}").isNull(),
                       F.lit(NULL_FIELD % field)))
    for field in ("trade_id", "account_id", "symbol", "channel"):
        checks.append((F.trim(F.col(field)) == "", F.lit(EMPTY_FIELD % field)))
    checks += [
        (~F.col("side").isin(*SIDES), F.format_string(BAD_SIDE, _raw("side"))),
        (F.col("quantity").isNull() | (F.col("quantity") <= 0),
         F.format_string(BAD_QUANTITY, _raw("quantity"))),
        (F.col("quantity") > MAX_QUANTITY,
         F.format_string(QUANTITY_OVER, _raw("quantity"), F.lit(MAX_QUANTITY))),
        (F.col("price").isNull() | F.isnan("price") | (F.col("price") <= 0)
         | (F.col("price") == float("inf")),
         F.format_string(BAD_PRICE, _raw("price"))),
        (F.col("price") > MAX_PRICE,
         F.format_string(PRICE_OVER, _raw("price"), F.lit(MAX_PRICE))),
        (~F.col("event_time").rlike(_ISO_WITH_ZONE),
         F.format_string(TIME_WITHOUT_ZONE, _raw("event_time"))),
        (F.col("event_time").try_cast("timestamp").isNull(),
         F.format_string(INVALID_TIME, _raw("event_time"))),
        # Checked last, so a record that is also broken in its value reports that first.
        (F.col("key").isNull() | (F.length("key") == 0), F.lit(MISSING_KEY)),
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


# -- the same parse in Arrow, for the tasks that read Kafka themselves ------------------------------
_ISO_PARTS = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?\s*"
                        r"(Z|z|([+-])(\d{2})(?::?(\d{2}))?)$", re.ASCII)
_LONG = (-(2 ** 63), 2 ** 63 - 1)
_STRING_FIELDS = ("trade_id", "account_id", "symbol", "channel")
PARSE_CHUNK = 16_384  # records whose Python objects live at once: a task's share can be 100,000s


def parse_records(records: pa.Table) -> pa.Table:
    """Kafka records (key, value, topic, partition, offset, timestamp) -> trades + `reason`,
    as `parse_trades` gives them (tests/integration/test_parse_agreement.py holds the two to
    the same answers). Most records take the fast check; any doubt goes to `checked_trade`,
    which mirrors Spark's parse rule by rule."""
    with no_cycle_collection():
        if records.num_rows <= PARSE_CHUNK:
            return _parse_chunk(records)
        return pa.concat_tables([_parse_chunk(records.slice(start, PARSE_CHUNK))
                                 for start in range(0, records.num_rows, PARSE_CHUNK)])


def _parse_chunk(records: pa.Table) -> pa.Table:
    keyed = pc.fill_null(pc.greater(pc.binary_length(records["key"]), 0), False).to_pylist()
    values = records["value"].to_pylist()
    rows = [_plain_trade(value) if has_key else None for value, has_key in zip(values, keyed)]
    times = usual_event_micros(pa.array([row[7] if row is not None else None for row in rows], pa.string()))
    micros = times.to_pylist()
    for i, row in enumerate(rows):
        if row is not None and micros[i] is None:
            micros[i] = event_micros(row[7])  # a rarer form: a zone offset, no fraction, ...
        if row is None or micros[i] is None:
            rows[i] = checked_trade(values[i], keyed[i])
            micros[i] = rows[i][7]
    n = records.num_rows
    columns = list(zip(*rows)) if rows else [[]] * 9
    quantity = pa.array(columns[4], pa.int64())
    price = pa.array(columns[5], pa.float64())
    return pa.table({
        "key": records["key"], "value": records["value"], "topic": records["topic"],
        "partition": records["partition"], "offset": records["offset"],
        "kafka_timestamp": records["timestamp"].cast(pa.timestamp("us", tz="UTC")),
        **{f: pa.array(columns[i], pa.string()) for i, f in enumerate(TRADE_FIELDS[:4])},
        "quantity": quantity, "price": price,
        "amount": pc.multiply(pc.cast(quantity, pa.float64()), price),
        "channel": pa.array(columns[6], pa.string()),
        "event_time": pa.array(micros, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        "reason": pa.array(columns[8], pa.string()) if n else pa.array([], pa.string()),
    })


def _plain_trade(value: bytes | None) -> tuple | None:
    """A plainly valid trade's typed fields, event_time as text (reason None), or None when
    anything is in doubt."""
    if not value or len(value) > MAX_VALUE_BYTES:
        return None
    try:
        doc = orjson.loads(value)
        trade_id, account_id, symbol, side = doc["trade_id"], doc["account_id"], doc["symbol"], doc["side"]
        quantity, price, channel, event_time = doc["quantity"], doc["price"], doc["channel"], doc["event_time"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    if (type(trade_id) is str and type(account_id) is str and type(symbol) is str and type(channel) is str
            and (side == "BUY" or side == "SELL") and type(quantity) is int and 0 < quantity <= MAX_QUANTITY
            and (type(price) is float or type(price) is int) and 0 < price <= MAX_PRICE and type(event_time) is str
            and trade_id.strip(" ") and account_id.strip(" ") and symbol.strip(" ") and channel.strip(" ")):
        return trade_id, account_id, symbol, side, quantity, float(price), channel, event_time, None
    return None


_USUAL_DIGITS = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18, 20, 21, 22]
_USUAL_MARKS = {4: "-", 7: "-", 10: "T", 13: ":", 16: ":", 19: ".", 23: "Z"}


def usual_event_micros(texts: pa.Array) -> pa.Array:
    """event_micros() of each time in the usual form, 2026-03-02T09:32:00.123Z, all at once;
    null for any other form (the caller asks event_micros) and for no valid time."""
    usual = pc.fill_null(pc.equal(pc.binary_length(texts), 24), False)
    picked = texts.filter(usual)
    out = np.zeros(len(texts), np.int64)
    valid = np.zeros(len(texts), bool)
    if len(picked):
        first = np.frombuffer(picked.buffers()[1], np.int32, count=1, offset=4 * picked.offset)[0]
        chars = np.frombuffer(picked.buffers()[2], np.uint8, count=24 * len(picked), offset=first).reshape(-1, 24)
        digits = chars.astype(np.int64) - ord("0")
        ok = ((digits[:, _USUAL_DIGITS] >= 0) & (digits[:, _USUAL_DIGITS] <= 9)).all(axis=1)
        for at, mark in _USUAL_MARKS.items():
            ok &= chars[:, at] == ord(mark)

        def number(*at):
            return functools.reduce(lambda total, i: total * 10 + digits[:, i], at, 0)

        year, month, day = number(0, 1, 2, 3), number(5, 6), number(8, 9)
        hour, minute, second, millis = number(11, 12), number(14, 15), number(17, 18), number(20, 21, 22)
        leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
        month_days = np.where(month == 2, np.where(leap, 29, 28), np.where(np.isin(month, (4, 6, 9, 11)), 30, 31))
        ok &= (month >= 1) & (month <= 12) & (day >= 1) & (day <= month_days) & (hour <= 23) & (minute <= 59)
        ok &= second <= 59
        shifted = year - (month <= 2)
        era = shifted // 400
        of_era = shifted - era * 400
        day_of_year = (153 * (month + np.where(month > 2, -3, 9)) + 2) // 5 + day - 1
        days = era * 146097 + of_era * 365 + of_era // 4 - of_era // 100 + day_of_year - 719468
        seconds = days * 86400 + hour * 3600 + minute * 60 + second
        at = np.flatnonzero(usual.to_numpy(zero_copy_only=False))
        out[at] = seconds * 1_000_000 + millis * 1000
        valid[at] = ok
    return pa.array(out, pa.int64(), mask=~valid)


class _Number(str):
    """A JSON number kept as its text (for the reasons) with its value."""

    def __new__(cls, text: str, value):
        number = super().__new__(cls, text)
        number.value = value
        return number


_LENIENT = json.JSONDecoder(parse_int=lambda s: _Number(s, int(s)), parse_float=lambda s: _Number(s, float(s)),
                            parse_constant=lambda s: _Number(s, float(s)))


def _lenient(text: str):
    """Spark's from_json: the first JSON value (what follows it is ignored), NaN and Infinity
    literals being numbers too."""
    return _LENIENT.raw_decode(text.lstrip(" \t\n\r"))[0]


def _strict_keys(text: str) -> list | None:
    """Spark's json_object_keys: the keys of a strictly valid JSON object, else None."""
    def reject(literal):
        raise ValueError(literal)
    try:
        doc = json.loads(text, parse_constant=reject)
    except ValueError:
        return None
    return list(doc) if isinstance(doc, dict) else None


def _json_text(value) -> str:
    """A JSON value as Spark's get_json_object returns it: a string's own text, else compact JSON."""
    if isinstance(value, _Number):
        return _java_number_text(value)
    if isinstance(value, str):
        return value
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{_json_value(v)}" for k, v in value.items()) + "}"
    return "[" + ",".join(_json_value(v) for v in value) + "]"


def _json_value(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, str) and not isinstance(value, _Number):
        return json.dumps(value, ensure_ascii=False)
    return _json_text(value)


def _java_number_text(number: _Number) -> str:
    """A JSON number as Jackson writes it back: an integer's own digits, a fraction as Java's
    Double.toString (1.0E10, 1000.0), a non-finite one quoted ("Infinity")."""
    value = number.value
    if isinstance(value, int):
        return str(number)
    if value != value:
        return '"NaN"'
    if value in (math.inf, -math.inf):
        return '"Infinity"' if value > 0 else '"-Infinity"'
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)
    sign, digits, exponent = decimal.Decimal(repr(value)).normalize().as_tuple()
    mantissa = "".join(map(str, digits))
    return f"{'-' if sign else ''}{mantissa[0]}.{mantissa[1:] or '0'}E{exponent + len(digits) - 1}"


def _typed(doc: dict, field: str):
    """A field as from_json types it under TRADE_SCHEMA (None: missing, null or mistyped)."""
    value = doc.get(field)
    if value is None:
        return None
    if field == "quantity":
        if isinstance(value, _Number) and isinstance(value.value, int) and _LONG[0] <= value.value <= _LONG[1]:
            return value.value
        return None
    if field == "price":
        if not isinstance(value, _Number):
            return None
        try:
            return float(value.value)
        except OverflowError:  # an integer past the double range, as Java reads it
            return math.copysign(math.inf, value.value)
    # A lone surrogate escape (\ud800) is no UTF-8: Java writes it as '?'.
    return _json_text(value).encode("utf-8", "replace").decode("utf-8")


def checked_trade(value: bytes | None, has_key: bool) -> tuple:
    """A record's typed fields and the first problem found, each check as `parse_trades` has it."""
    nothing = (None,) * 8

    def rejected(reason):
        return (*nothing, reason)

    if not value:
        return rejected(EMPTY_VALUE)
    if len(value) > MAX_VALUE_BYTES:
        return rejected(TOO_LARGE % (len(value), MAX_VALUE_BYTES))
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return rejected(NOT_UTF8)
    try:
        doc = _lenient(text)
    except (ValueError, RecursionError):
        doc = None
    if not isinstance(doc, dict):
        doc = {}
    typed = {f: _typed(doc, f) for f in TRADE_FIELDS}
    price = typed["price"]
    if any(v is None for v in typed.values()) or price != price or abs(price) == math.inf:
        keys = _strict_keys(text)
        if keys is None:
            return rejected(NOT_AN_OBJECT)
        for field in TRADE_FIELDS:
            if typed[field] is None and field not in keys:
                return rejected(MISSING_FIELD % field)
            if typed[field] is None and doc.get(field) is None:
                return rejected(NULL_FIELD % field)

    def raw(field):
        return "?" if doc.get(field) is None else _json_text(doc[field])

    for field in _STRING_FIELDS:
        if typed[field] is not None and typed[field].strip(" ") == "":
            return rejected(EMPTY_FIELD % field)
    quantity, event_time = typed["quantity"], typed["event_time"]
    micros = event_micros(event_time) if event_time is not None else None
    problem = (
        BAD_SIDE % raw("side") if typed["side"] is not None and typed["side"] not in SIDES else
        BAD_QUANTITY % raw("quantity") if quantity is None or quantity <= 0 else
        QUANTITY_OVER % (raw("quantity"), MAX_QUANTITY) if quantity > MAX_QUANTITY else
        BAD_PRICE % raw("price") if price is None or price != price or price <= 0 or price == math.inf else
        PRICE_OVER % (raw("price"), MAX_PRICE) if price > MAX_PRICE else
        TIME_WITHOUT_ZONE % raw("event_time") if event_time is not None and not _ISO_PARTS.match(event_time) else
        INVALID_TIME % raw("event_time") if micros is None else
        MISSING_KEY if not has_key else None)
    return (*(typed[f] for f in TRADE_FIELDS[:7]), micros, problem)


def event_micros(text: str) -> int | None:
    """An ISO-8601 time with a zone -> microseconds since the epoch (UTC), or None where Spark's
    cast to timestamp gives NULL (no seconds, a lowercase z, an offset past 18 hours)."""
    parts = _ISO_PARTS.match(text)
    if parts is None:
        return None
    year, month, day, hour, minute, second, fraction, zone, sign, zone_hours, zone_minutes = parts.groups()
    year, month, day, hour, minute = int(year), int(month), int(day), int(hour), int(minute)
    if (second is None or zone == "z" or not 1 <= month <= 12 or not 1 <= day <= _days_in_month(year, month)
            or hour > 23 or minute > 59 or int(second) > 59):
        return None
    offset = 0
    if sign:
        zone_hours, zone_minutes = int(zone_hours), int(zone_minutes or 0)
        offset = zone_hours * 3600 + zone_minutes * 60
        if zone_minutes > 59 or offset > 18 * 3600:
            return None
        offset = offset if sign == "+" else -offset
    seconds = _days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + int(second) - offset
    return seconds * 1_000_000 + (int(fraction[:6].ljust(6, "0")) if fraction else 0)


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 in the proleptic Gregorian calendar (as java.time counts them)."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    return era * 146097 + year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year - 719468


# -- splitting a collected micro-batch (Arrow) into the silver tables --------------------------
def silver_rows(parsed: pa.Table) -> pa.Table:
    """Valid trades in arrival order (Kafka timestamp, partition, offset), so that when one
    trade_id comes twice the first copy is the one kept."""
    valid = parsed.filter(pc.is_null(parsed["reason"])).select(SILVER.columns)
    order = pc.sort_indices(valid, [("kafka_timestamp", "ascending"), ("partition", "ascending"),
                                    ("offset", "ascending")])
    if len(order) and not pc.all(pc.equal(order, pa.array(np.arange(len(order)), order.type))).as_py():
        valid = valid.take(order)  # most often they came in that order
    return valid.cast(SILVER.schema)


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
