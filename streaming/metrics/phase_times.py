"""A batch's time in the sink, phase by phase (issue 47's breakdown): each phase's seconds, for
the last KEPT batches that read records. The bench reads them beside Spark's own durationMs."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from typing import Iterator

KEPT = 512  # batches kept: a few minutes of live batches, bounded whatever the run's length


class PhaseTimes:
    """Marks along the current batch. Phases may run in parallel threads (Lake.at_once): each
    is timed where it runs, and the batch's total is wall time."""

    def __init__(self, kept: int = KEPT):
        self._lock = threading.Lock()
        self._current: dict[str, float] | None = None
        self._started = 0.0
        self._batches: deque[dict[str, float]] = deque(maxlen=kept)

    def begin(self) -> None:
        with self._lock:
            self._current, self._started = {}, time.perf_counter()

    @contextlib.contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            with self._lock:
                if self._current is not None:
                    self._current[phase] = self._current.get(phase, 0.0) + time.perf_counter() - began

    def end(self, records: int) -> None:
        """The batch is done; kept when it read records."""
        with self._lock:
            current, self._current = self._current, None
            if current is not None and records > 0:
                current["total"] = time.perf_counter() - self._started
                current["records"] = float(records)
                self._batches.append(current)

    def batches(self) -> list[dict[str, float]]:
        with self._lock:
            return [dict(batch) for batch in self._batches]


NOT_TIMED = PhaseTimes(kept=0)  # for a gold step run outside a sink (a backfill)
