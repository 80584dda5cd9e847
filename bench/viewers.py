"""Simulated viewers of the page, for `python -m bench.live_page`: each does over HTTP what an open
page's browser asks of the server, without drawing anything.

- A push viewer holds the page's live connection (GET /api/events, server-sent events) and parses
  each push, as the page does: the push carries the panels drawn (the chart, KPI cards, feeds,
  status, health and the time machine's slider), which assets/push.js sets with no request.
- A poll viewer refreshes the page every 2 s as it did before the push, and as it still does
  while its live connection is down (dashboard/client.refresh_page).

A viewer's update is the time from the page first having newer data (the push's arrival; for a
poll, the refresh's start) to its last callback answered (for a push, to the push parsed).
Viewers run on threads of a process of their own (run_viewers), so the bench's producer and
samplers do not share their interpreter.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Iterator

import requests

from bench.app_run import REFRESH_S, Page
from dashboard.client import refresh_page
from dashboard.push import EVENTS_PATH

MODES = ("push", "poll")


def server_events(response: requests.Response) -> Iterator[tuple[str, str]]:
    """(event, data) of each server-sent event as it arrives; comments and `retry:` are skipped."""
    name, data = "message", []
    for raw in response.iter_lines(chunk_size=None):
        line = raw.decode() if isinstance(raw, bytes) else raw
        if line == "":
            if data:
                yield name, "\n".join(data)
            name, data = "message", []
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))


class Viewer:
    """One simulated page until `ends` (time.monotonic()); its updates as (t arrival, update ms)."""

    def __init__(self, base_port: int, ends: float, delay_s: float = 0.0):
        self.port, self.ends, self.delay_s = base_port, ends, delay_s
        self.updates: list[tuple[float, float]] = []
        self.errors: list[str] = []

    def run_poll(self) -> None:
        page = Page(self.port)
        time.sleep(self.delay_s)  # pages do not tick together
        while (began := time.monotonic()) < self.ends:
            try:
                refresh_page(page)
                self.updates.append((began, (time.monotonic() - began) * 1000))
            except Exception as exc:  # noqa: BLE001 - counted; the page goes on
                self.errors.append(str(exc))
            time.sleep(max(0.0, REFRESH_S - (time.monotonic() - began)))

    def run_push(self) -> None:
        """The live connection: each push parsed as push.js does (its panels are then set in the
        page, with no request)."""
        session = requests.Session()
        try:
            with session.get(f"http://127.0.0.1:{self.port}{EVENTS_PATH}", stream=True, timeout=(5, 30)) as response:
                for name, data in server_events(response):
                    if time.monotonic() >= self.ends:
                        return
                    if name != "snapshot":
                        continue
                    arrived = time.monotonic()
                    json.loads(data)
                    self.updates.append((arrived, (time.monotonic() - arrived) * 1000))
        except Exception as exc:  # noqa: BLE001 - counted; the stream ending at `ends` is expected
            if time.monotonic() < self.ends:
                self.errors.append(f"live connection: {exc}")
        finally:
            session.close()


def cpu_s() -> float:
    times = os.times()
    return times.user + times.system


def run_viewers(port: int, mode: str, count: int, begins: float, ends: float, out) -> None:
    """`count` viewers of `mode` until `ends` (time.monotonic(), the machine's clock), in this
    process; their updates, errors and this process's CPU seconds from `begins` to `ends` (what
    the viewers themselves cost the machine) sent back through `out` as {"updates": [...],
    "errors": [...], "cpu_s": ...}."""
    viewers = [Viewer(port, ends, delay_s=REFRESH_S * i / count) for i in range(count)]
    threads = [threading.Thread(target=getattr(viewer, f"run_{mode}"), daemon=True) for viewer in viewers]
    for thread in threads:
        thread.start()
    time.sleep(max(0.0, begins - time.monotonic()))
    began = cpu_s()
    for thread in threads:
        thread.join(max(0.0, ends - time.monotonic()) + 60)
    out.send({"updates": [u for viewer in viewers for u in viewer.updates],
              "errors": [e for viewer in viewers for e in viewer.errors], "cpu_s": cpu_s() - began})
    out.close()
