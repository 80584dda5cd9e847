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
