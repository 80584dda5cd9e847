"""The terminal: log lines, and on a TTY one progress bar kept below them while a catch-up lasts.

A log line written while the bar shows first clears the bar's line, then draws the bar again
under it, so the two never run into each other. Not on a TTY (a pipe, a log file, a service
manager), there is no bar: the app writes plain progress lines instead.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import TextIO

from streaming.run.health import catch_up_figures

CLEAR_LINE = "\r\x1b[K"


class Terminal:
    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        self.is_tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._bar: str | None = None
        self._lock = threading.RLock()

    def show_bar(self, text: str) -> None:
        with self._lock:
            self._bar = text
            self.stream.write(CLEAR_LINE + text)
            self.stream.flush()

    def clear_bar(self) -> None:
        with self._lock:
            if self._bar is not None:
                self.stream.write(CLEAR_LINE)
                self.stream.flush()
                self._bar = None

    def handler(self) -> logging.Handler:
        return _BarKeepingHandler(self)


class _BarKeepingHandler(logging.StreamHandler):
    def __init__(self, terminal: Terminal):
        super().__init__(terminal.stream)
        self.terminal = terminal

    def emit(self, record: logging.LogRecord) -> None:
        with self.terminal._lock:
            bar = self.terminal._bar
            if bar is not None:
                self.stream.write(CLEAR_LINE)
            super().emit(record)
            if bar is not None:
                self.stream.write(bar)
                self.stream.flush()


def progress_bar(progress: dict, width: int = 30) -> str:
    """'catching up medallion [#########.....................] 300,000 of 1,000,000 records (30%)
    at 24,500/s, about 29 s left' (each query catching up, one after another)."""
    parts = []
    for name, p in progress.items():
        filled = round(min(1.0, p["done"] / p["backlog"]) * width) if p["backlog"] else width
        parts.append(f"{name} [{'#' * filled}{'.' * (width - filled)}] {catch_up_figures(p)}")
    return "catching up " + "; ".join(parts)
