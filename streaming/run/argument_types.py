"""The argparse value types of the command line: whole numbers, ports, rates, shares, durations, pairs, hosts."""

from __future__ import annotations

import argparse
from datetime import timedelta
from typing import Callable

from streaming.config import MAX_RATE, MIN_RATE, parse_duration, parse_trigger


def _whole_number(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least `minimum`."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            least = "a positive number" if minimum == 1 else f"{minimum} or more"
            raise argparse.ArgumentTypeError(f"expected {least}, got {text!r}")
        return value

    return parse


positive_int = _whole_number(1)
count = _whole_number(0)


def _number_between(low: float, high: float, expected: str, not_a_number: str | None = None) -> Callable[[str], float]:
    """An argparse type: a number from `low` to `high`; the error says `expected` (or `not_a_number`
    for text that is no number at all), then what was given."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{not_a_number or expected}, got {text!r}") from None
        if not low <= value <= high:  # NaN fails too
            raise argparse.ArgumentTypeError(f"{expected}, got {text!r}")
        return value

    return parse


rate = _number_between(MIN_RATE, MAX_RATE, f"expected a rate between {MIN_RATE:g} and {MAX_RATE:.0f} trades/s",
                       not_a_number="expected a number")
share = _number_between(0, 1, "expected a share between 0 and 1")
MAX_CLOCK_SPEED = 100_000.0


def clock_speed(text: str) -> float:
    """Market seconds per real second: any positive speed up to MAX_CLOCK_SPEED."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value <= MAX_CLOCK_SPEED:  # NaN fails too
        raise argparse.ArgumentTypeError(
            f"expected a speed above 0 and at most {MAX_CLOCK_SPEED:.0f} market seconds per second, got {text!r}")
    return value


def port(text: str) -> int:
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"port {value} is out of range 1-65535")
    return value


def true_or_false(text: str) -> bool:
    if text.strip().lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return text.strip().lower() == "true"


def argtype(parse):
    """A value parser that raises ValueError, as an argparse type: its message becomes the usage error."""
    def convert(text: str):
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = parse.__name__
    return convert


duration_argument = argtype(parse_duration)
trigger_argument = argtype(parse_trigger)


def duration_or_off(text: str) -> timedelta | str:
    """A DURATION, or 'off' (returned as such, so that a flag given as off differs from one not given)."""
    if text.strip().lower() == "off":
        return "off"
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}; or off") from None


def spark_conf_pair(text: str) -> tuple[str, str]:
    """'spark.driver.memory=2g' -> ('spark.driver.memory', '2g'), as spark-submit's --conf takes it."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or not value.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, e.g. spark.driver.memory=2g; got {text!r}")
    if not key.startswith("spark."):
        raise argparse.ArgumentTypeError(f"{key!r} is not a Spark setting: Spark's keys start with 'spark.'")
    return key, value.strip()


def bootstrap_servers(text: str) -> str:
    servers = [s.strip() for s in text.split(",") if s.strip()]
    for server in servers:
        host, sep, port_text = server.rpartition(":")
        if not sep or not host or not port_text.isdigit():
            raise argparse.ArgumentTypeError(f"expected HOST:PORT[,HOST:PORT...], got {text!r}")
    if not servers:
        raise argparse.ArgumentTypeError("expected HOST:PORT[,HOST:PORT...]")
    return ",".join(servers)


def host_name(text: str) -> str:
    """--allow-host: a host name or address, without a scheme, path or port ('dash.internal')."""
    name = text.strip()
    with_port = name.count(":") == 1  # an IPv6 address has more
    if not name or with_port or any(c in name for c in "/@ \t"):
        raise argparse.ArgumentTypeError(f"expected a host name or address such as dash.internal, got {text!r}")
    return name
