"""Simulated viewers of the page, for `python -m bench.live_page`: each does over HTTP what an open
page's browser asks of the server, without drawing anything.

- A push viewer holds the page's live connection (GET /api/events, server-sent events) and, for
  each snapshot pushed, runs the server callbacks the page runs on it (assets/push.js copies the
  push into the snapshot store; the chart, KPI cards, feeds, status, health and the time machine's
  slider are drawn from it), each uploading the store as the browser does. A viewer still busy
  with one push draws the newest when it is done, as Dash drops an outdated request.
- A poll viewer refreshes the page every 2 s as it did before the push, and as it still does
  while its live connection is down (dashboard/client.refresh_page).

A viewer's update is the time from the page first having newer data (the push's arrival; for a
poll, the refresh's start) to its last callback answered. Viewers run on threads of a process
of their own (run_viewers), so the bench's producer and samplers do not share their interpreter.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Iterator

import requests

from bench.app_run import REFRESH_S, Page
from dashboard import ids
from dashboard.client import call, draw_chart, draw_panels, refresh_page
from dashboard.push import EVENTS_PATH, view_part

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


def draw_pushed(page: Page, snapshot: dict, slider: dict) -> None:
    """The server callbacks a page runs on a snapshot copied from a push."""
    draw_chart(page, snapshot)
    draw_panels(page, snapshot)
    states = {f"{ids.TM_SLIDER}.{prop}": slider.get(prop) for prop in ("min", "max", "disabled")}
    answer = call(page, [f"{ids.TM_SLIDER}.{prop}" for prop in ("min", "max", "marks", "disabled")],
                  {f"{ids.SNAPSHOT}.data": snapshot}, states)
    slider.update({prop: value for prop, value in answer.get(ids.TM_SLIDER, {}).items()})


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
        pending: list = []  # [arrival of the oldest undrawn push, newest snapshot]
        arrived = threading.Condition()
        listener = threading.Thread(target=self._listen, args=(pending, arrived), daemon=True)
        listener.start()
        page, slider = Page(self.port), {}
        while time.monotonic() < self.ends:
            with arrived:
                if not pending and not arrived.wait(timeout=min(1.0, max(0.01, self.ends - time.monotonic()))):
                    continue
                first, snapshot = pending
                pending.clear()
            try:
                draw_pushed(page, snapshot, slider)
                self.updates.append((first, (time.monotonic() - first) * 1000))
            except Exception as exc:  # noqa: BLE001 - counted; the page goes on
                self.errors.append(str(exc))

    def _listen(self, pending: list, arrived: threading.Condition) -> None:
        """The live connection: each push parsed as push.js does, kept for the drawer."""
        session = requests.Session()
        try:
            with session.get(f"http://127.0.0.1:{self.port}{EVENTS_PATH}", stream=True, timeout=(5, 30)) as response:
                for name, data in server_events(response):
                    if time.monotonic() >= self.ends:
                        return
                    if name != "snapshot":
                        continue
                    now, snapshot = time.monotonic(), view_part(json.loads(data))
                    with arrived:
                        pending[:] = [pending[0] if pending else now, snapshot]
                        arrived.notify()
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
