"""Test data: the trade maker and the bad-input corpus (each bad value with the reason silver
must give it). The parse tests check each reason; the medallion test sends them all through Kafka."""

from __future__ import annotations

import json

DAY = "2026-03-02T"


def trade(trade_id: str, side: str, quantity: int, price: float, event_time: str, **extra) -> dict:
    """A trade message as the topic carries it; `extra` overrides or adds fields."""
    return {"trade_id": trade_id, "account_id": extra.pop("account_id", "ACC-1"), "symbol": "AAPL",
            "side": side, "quantity": quantity, "price": price, "channel": "web",
            "event_time": event_time, **extra}


def raw(value) -> bytes | None:
    """A corpus value as Kafka bytes: dicts as JSON, bytes and None as they are."""
    return value if isinstance(value, bytes) or value is None else json.dumps(value).encode()


GOOD = trade("t-1", "BUY", 10, 101.25, "2026-03-02T09:32:00Z")

# kind -> (value, a part of the reason silver gives it)
BAD = {
    "malformed json": (b'{"trade_id": ', "not a JSON object"),
    "json array": (b"[1, 2]", "not a JSON object"),
    "json scalar": (b"42", "not a JSON object"),
    "empty value": (b"", "empty value"),
    "null value": (None, "empty value"),
    "not utf-8": (b"\xff\xfe{}", "not valid UTF-8"),
    "missing trade_id": ({k: v for k, v in GOOD.items() if k != "trade_id"}, "missing field 'trade_id'"),
    "null price": ({**GOOD, "price": None}, "field 'price' is null"),
    "quantity as word": ({**GOOD, "quantity": "ten"}, "quantity must be a positive integer, got ten"),
    "fractional quantity": ({**GOOD, "quantity": 1.5}, "quantity must be a positive integer"),
    "zero quantity": ({**GOOD, "quantity": 0}, "quantity must be a positive integer"),
    "negative price": ({**GOOD, "price": -3}, "price must be a finite positive number"),
    "price as object": ({**GOOD, "price": {"amount": 3}}, "price must be a finite positive number"),
    "nan price": (json.dumps(GOOD).replace("101.25", "NaN").encode(), "NaN/Infinity literals"),
    "infinite price": (json.dumps(GOOD).replace("101.25", "1e400").encode(), "price must be a finite positive"),
    "minus infinite price": (json.dumps(GOOD).replace("101.25", "-1e400").encode(), "price must be a finite positive"),
    "null side": ({**GOOD, "side": None}, "field 'side' is null"),
    "null event_time": ({**GOOD, "event_time": None}, "field 'event_time' is null"),
    "absurd quantity": ({**GOOD, "quantity": 10**12}, "over the limit"),
    "unknown side": ({**GOOD, "side": "HOLD"}, "side must be BUY or SELL, got HOLD"),
    "time without zone": ({**GOOD, "event_time": "2026-03-02T09:32:00"}, "with a zone"),
    "unparseable time": ({**GOOD, "event_time": "yesterday"}, "with a zone"),
    "impossible date": ({**GOOD, "event_time": "2026-02-31T09:00:00Z"}, "not a valid time"),
    "empty symbol": ({**GOOD, "symbol": " "}, "field 'symbol' is empty"),
    "huge value": (json.dumps({**GOOD, "pad": "x" * (1024 * 1024)}).encode(), "over the 1048576-byte limit"),
}

# Values at the edges of the JSON and time formats, where the two formulations of the parse
# (Spark's and Arrow's) could part: name -> value. Valid or not, they must agree.
EDGE = {
    "int price": {**GOOD, "price": 101},
    "string price": {**GOOD, "price": "12.5"},
    "NaN string price": {**GOOD, "price": "NaN"},
    "Infinity string price": {**GOOD, "price": "Infinity"},
    "bool price": {**GOOD, "price": True},
    "huge int price": {**GOOD, "price": 10**30},
    "price 1.50": json.dumps(GOOD).replace("101.25", "1.50").encode(),
    "price 1E10": json.dumps(GOOD).replace("101.25", "1E10").encode(),
    "price 1e-7": json.dumps(GOOD).replace("101.25", "1e-7").encode(),
    "price -0.0": json.dumps(GOOD).replace("101.25", "-0.0").encode(),
    "price 2e9": json.dumps(GOOD).replace("101.25", "2e9").encode(),
    "quantity 10.0": {**GOOD, "quantity": 10.0},
    "quantity string 10": {**GOOD, "quantity": "10"},
    "quantity huge": {**GOOD, "quantity": 10**20},
    "quantity bool": {**GOOD, "quantity": True},
    "quantity 1e3": json.dumps(GOOD).replace('"quantity": 10', '"quantity": 1e3').encode(),
    "quantity over": {**GOOD, "quantity": 2_000_000_000},
    "trade_id int": {**GOOD, "trade_id": 123},
    "trade_id float": json.dumps({**GOOD, "trade_id": 1.5}).encode(),
    "trade_id obj": {**GOOD, "trade_id": {"a": 1, "b": [1, "x", None]}},
    "trade_id bool": {**GOOD, "trade_id": False},
    "trade_id tab": {**GOOD, "trade_id": "\t"},
    "trade_id empty": {**GOOD, "trade_id": ""},
    "side lower": {**GOOD, "side": "buy"},
    "side int": {**GOOD, "side": 1},
    "channel list": {**GOOD, "channel": [1, 2]},
    "no seconds": {**GOOD, "event_time": "2026-03-02T09:32Z"},
    "space sep": {**GOOD, "event_time": "2026-03-02 09:32:00Z"},
    "space zone": {**GOOD, "event_time": "2026-03-02T09:32:00 Z"},
    "lower z": {**GOOD, "event_time": "2026-03-02T09:32:00z"},
    "fraction 3": {**GOOD, "event_time": "2026-03-02T09:32:00.123Z"},
    "fraction 7": {**GOOD, "event_time": "2026-03-02T09:32:00.1234567Z"},
    "fraction 10": {**GOOD, "event_time": "2026-03-02T09:32:00.1234567891Z"},
    "zone +05": {**GOOD, "event_time": "2026-03-02T09:32:00+05"},
    "zone +0530": {**GOOD, "event_time": "2026-03-02T09:32:00+0530"},
    "zone -05:30": {**GOOD, "event_time": "2026-03-02T09:32:00-05:30"},
    "zone +18:00": {**GOOD, "event_time": "2026-03-02T09:32:00+18:00"},
    "zone +19:00": {**GOOD, "event_time": "2026-03-02T09:32:00+19:00"},
    "zone +05:99": {**GOOD, "event_time": "2026-03-02T09:32:00+05:99"},
    "hour 24": {**GOOD, "event_time": "2026-03-02T24:00:00Z"},
    "minute 60": {**GOOD, "event_time": "2026-03-02T09:60:00Z"},
    "second 60": {**GOOD, "event_time": "2026-03-02T09:32:60Z"},
    "leap day": {**GOOD, "event_time": "2024-02-29T00:00:00Z"},
    "not leap": {**GOOD, "event_time": "2026-02-29T00:00:00Z"},
    "year 0": {**GOOD, "event_time": "0000-01-01T00:00:00Z"},
    "year 1": {**GOOD, "event_time": "0001-01-01T00:00:00Z"},
    "trailing newline": {**GOOD, "event_time": "2026-03-02T09:32:00Z\n"},
    "time int": {**GOOD, "event_time": 1700000000},
    "extra NaN field": json.dumps({**GOOD, "pad": 1}).replace('"pad": 1', '"pad": NaN').encode(),
    "trailing garbage": json.dumps(GOOD).encode() + b" x",
    "trailing object": json.dumps(GOOD).encode() + b" {}",
    "dup keys": json.dumps(GOOD).replace('"trade_id": "t-1"', '"trade_id": "t-1", "trade_id": "t-9"').encode(),
    "unicode": {**GOOD, "symbol": "ÄÖ€"},
    "escape": {**GOOD, "symbol": "A\u0000B"},
    "lone surrogate": json.dumps(GOOD).replace('"AAPL"', '"\\ud800"').encode(),
    "nested null": {**GOOD, "trade_id": {"a": None}},
    "whitespace json": b"  " + json.dumps(GOOD).encode() + b"\n",
    "infinity literal": json.dumps(GOOD).replace("101.25", "Infinity").encode(),
    "-infinity literal": json.dumps(GOOD).replace("101.25", "-Infinity").encode(),
    "empty object": b"{}",
    "null json": b"null",
    "string json": b'"x"',
}
