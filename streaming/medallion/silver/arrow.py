"""Silver's parse in Arrow, what the pipeline's tasks run on the records they read, and the split
of parsed rows into silver and quarantine rows."""

from __future__ import annotations

import decimal
import json
import math
import re

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from streaming.lake.tables import QUARANTINE, SILVER
from streaming.medallion.lateness import LATENESS
from streaming.medallion.silver import rules
from streaming.medallion.silver.rules import (
    ISO_WITH_ZONE,
    MAX_PRICE,
    MAX_QUANTITY,
    MAX_VALUE_BYTES,
    NAME_FIELDS,
    SIDES,
    TRADE_FIELDS,
)
from streaming.rows import no_cycle_collection

_ISO_PARTS = re.compile(ISO_WITH_ZONE, re.ASCII)
_LONG = (-(2 ** 63), 2 ** 63 - 1)
# Silver's columns that parsing gives (the lateness is the sink's).
PARSED_COLUMNS = [c for c in SILVER.columns if c != LATENESS]
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
            rows[i] = checked = checked_trade(values[i], keyed[i])
            micros[i] = checked[7]
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
        for position, mark in _USUAL_MARKS.items():
            ok &= chars[:, position] == ord(mark)

        def number(*positions: int) -> np.ndarray:
            total = np.zeros(len(digits), np.int64)
            for i in positions:
                total = total * 10 + digits[:, i]
            return total

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

    value: int | float

    def __new__(cls, text: str, value: int | float):
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
    assert isinstance(exponent, int)  # a finite number: NaN and the infinities are handled above
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
        return rejected(rules.EMPTY_VALUE)
    if len(value) > MAX_VALUE_BYTES:
        return rejected(rules.TOO_LARGE % (len(value), MAX_VALUE_BYTES))
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return rejected(rules.NOT_UTF8)
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
            return rejected(rules.NOT_AN_OBJECT)
        for field in TRADE_FIELDS:
            if typed[field] is None and field not in keys:
                return rejected(rules.MISSING_FIELD % field)
            if typed[field] is None and doc.get(field) is None:
                return rejected(rules.NULL_FIELD % field)

    def raw(field):
        return "?" if doc.get(field) is None else _json_text(doc[field])

    for field in NAME_FIELDS:
        if typed[field] is not None and typed[field].strip(" ") == "":
            return rejected(rules.EMPTY_FIELD % field)
    quantity, event_time = typed["quantity"], typed["event_time"]
    micros = event_micros(event_time) if event_time is not None else None
    problem = (
        rules.BAD_SIDE % raw("side") if typed["side"] is not None and typed["side"] not in SIDES else
        rules.BAD_QUANTITY % raw("quantity") if quantity is None or quantity <= 0 else
        rules.QUANTITY_OVER % (raw("quantity"), MAX_QUANTITY) if quantity > MAX_QUANTITY else
        rules.BAD_PRICE % raw("price") if price is None or price != price or price <= 0 or price == math.inf else
        rules.PRICE_OVER % (raw("price"), MAX_PRICE) if price > MAX_PRICE else
        rules.TIME_WITHOUT_ZONE % raw("event_time") if event_time is not None and not _ISO_PARTS.match(event_time) else
        rules.INVALID_TIME % raw("event_time") if micros is None else
        rules.MISSING_KEY if not has_key else None)
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


def silver_rows(parsed: pa.Table) -> pa.Table:
    """Valid trades in arrival order (Kafka timestamp, partition, offset), so that when one
    trade_id comes twice the first copy is the one kept; their lateness not judged yet (null:
    the sink stamps it, lateness.stamped)."""
    valid = parsed.filter(pc.is_null(parsed["reason"])).select(PARSED_COLUMNS)
    valid = valid.append_column(LATENESS, pa.nulls(valid.num_rows, pa.int64()))  # the sink stamps it
    order = pc.sort_indices(valid, [("kafka_timestamp", "ascending"), ("partition", "ascending"),
                                    ("offset", "ascending")])
    if len(order) and not pc.all(pc.equal(order, pa.array(np.arange(len(order)), order.type))).as_py():
        valid = valid.take(order)  # most often they came in that order
    return valid.cast(SILVER.schema)


def quarantine_rows(parsed: pa.Table) -> pa.Table:
    return parsed.filter(pc.is_valid(parsed["reason"])).select(QUARANTINE.columns).cast(QUARANTINE.schema)
