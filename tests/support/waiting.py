"""Polling for a condition with a deadline, instead of fixed sleeps."""

from __future__ import annotations

import time


def wait_for(predicate, timeout_s: float = 60.0, interval_s: float = 0.25, what: str = "condition"):
    """The first truthy result of predicate(); an AssertionError naming `what` after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = predicate()
        if result is not None and result is not False:
            return result
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
