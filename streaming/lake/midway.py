"""Which tables the writers of this process are midway through, for readers that want some
tables at one step (the page's push: gold with its corrections, history and too-late trades).

A writer is midway through the tables it takes (`Lake.writing`) until its hold ends, or until it
settles some of them, which then stand at one step for readers though it still holds their
locks: a live batch's gold step settles gold's part before its ledger is in."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streaming.lake.tables import Table

_midway: set[str] = set()  # table locations a writer is midway through (a table's lock: one writer)
_settles = 0  # how many times a writer has settled tables
_settled = threading.Condition()


def steady(locations: Collection[str]) -> bool:
    """Whether no writer of this process is midway through any of these tables."""
    with _settled:
        return not any(location in _midway for location in locations)


def settles() -> int:
    """How many times a writer has settled tables so far: for `wait_for_settled`."""
    with _settled:
        return _settles


def wait_for_settled(seen: int, timeout_s: float) -> None:
    """Return once a writer has settled tables since `settles()` gave `seen` (`steady` may have
    turned true), or after timeout_s."""
    with _settled:
        _settled.wait_for(lambda: _settles != seen, timeout_s)


class Writing:
    """A writer's hold on some tables: midway through them until `settle` or `settle_all`."""

    def __init__(self, locations: Collection[str], location_of: Callable[[Table], str]):
        self._midway = set(locations)
        self._location_of = location_of
        with _settled:
            _midway.update(self._midway)

    def settle(self, *tables: Table) -> None:
        """These tables (of those held) stand at one step from now on."""
        self._end({self._location_of(table) for table in tables})

    def settle_all(self) -> None:
        self._end(set(self._midway))

    def _end(self, locations: set[str]) -> None:
        global _settles
        with _settled:
            ending = locations & self._midway
            self._midway -= ending
            _midway.difference_update(ending)
            if ending:
                _settles += 1
                _settled.notify_all()
