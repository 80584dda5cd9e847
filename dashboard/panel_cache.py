"""Panels drawn once per push for every page: the first page to ask for a push's panel works it
out, the pages asking meanwhile wait for that (push.Publisher.shared)."""

from __future__ import annotations

import json
import threading
from collections import Counter, OrderedDict
from typing import Any, Callable

from plotly.io.json import to_json_plotly

PANEL_ENTRIES = 256  # a few callbacks x a few pushes x the choices pages make (chart mode...)
WAIT_S = 10.0  # a page waiting for another's drawing of a push draws it itself after this


def plain(outputs: Any) -> Any:
    """The outputs as the JSON Dash sends (components as their dicts): kept so, each page's answer
    is encoded without walking the components again (the most of a shared answer's cost)."""
    return json.loads(to_json_plotly(outputs))


class _Drawing:
    """One key's outputs, being worked out by the page that asked first (done set when it is)."""

    def __init__(self):
        self.done, self.ok, self.value = threading.Event(), False, None


class PanelCache:
    """Outputs by key, least recently used out beyond `size`. Single flight: the first caller of a
    key works it out, callers meanwhile wait for that rather than working it out too (30 pages
    ask within a few milliseconds of a push). A failure is not kept: each waiter tries itself."""

    def __init__(self, size: int = PANEL_ENTRIES, wait_s: float = WAIT_S):
        self.size, self.wait_s = size, wait_s
        self.computations: Counter = Counter()  # per callback name (a key's first part)
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple, _Drawing] = OrderedDict()

    def outputs(self, key: tuple, compute: Callable[[], Any]) -> Any:
        with self._lock:
            entry = self._entries.get(key)
            first = entry is None
            if entry is None:
                entry = self._entries[key] = _Drawing()
                while len(self._entries) > self.size:
                    self._entries.popitem(last=False)
            else:
                self._entries.move_to_end(key)
        if not first:
            entry.done.wait(self.wait_s)
            return entry.value if entry.ok else compute()
        try:
            entry.value, entry.ok = compute(), True
            with self._lock:
                self.computations[key[0]] += 1
            return entry.value
        finally:
            if not entry.ok:
                with self._lock:
                    if self._entries.get(key) is entry:
                        del self._entries[key]
            entry.done.set()
