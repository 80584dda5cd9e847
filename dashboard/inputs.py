"""What the page's components send, read defensively: a dropdown's choice, a number, the store's day.

A value of the wrong kind is None here, never an error in a callback."""

from __future__ import annotations

import math
from datetime import date


def choice(value) -> str | None:
    """A dropdown's choice: non-empty text, else None."""
    return value if isinstance(value, str) and value else None


def number(value) -> float | None:
    """A finite number from an input's value (a number, or text holding one), else None.
    A bool, a list, null, NaN, infinity or a number too large for a float is not one."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        parsed = float(value)
    except (ValueError, OverflowError):
        return None
    return parsed if math.isfinite(parsed) else None


def store_day(snapshot) -> str | None:
    """The store snapshot's day (YYYY-MM-DD), or None when it has none or is not a snapshot."""
    day = snapshot.get("day") if isinstance(snapshot, dict) else None
    if not isinstance(day, str):
        return None
    try:
        return date.fromisoformat(day).isoformat() if len(day) == 10 else None
    except ValueError:
        return None
