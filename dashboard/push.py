"""Push, not polling: one publisher per app works the default view's snapshot out once per change
and streams it to every open page over server-sent events (GET /api/events).

Server-sent events on Flask rather than Dash's WebSocket callbacks: those need the FastAPI or
Quart backend (the Host guard and the API routes are Flask's), and a WebSocket callback runs per
viewer, where this work is shared. The browser's EventSource reconnects by itself after a server
restart; assets/push.js shows the connection's state and turns the fallback interval
(ids.TICK) on while it is down."""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from typing import Callable, Iterator

import flask
from dash import ClientsideFunction, Dash, Input, Output, State, dcc, html
from plotly.io.json import to_json_plotly

from dashboard import ids
from dashboard.context import PageContext
from dashboard.refresh import view_snapshot

log = logging.getLogger(__name__)

EVENTS_PATH = "/api/events"
POLL_S = 0.25  # how often the publisher looks for a change while a page is connected
MIN_GAP_S = 0.5  # at most one push per gap: the changes made meanwhile go out together
KEEP_ALIVE_S = 15.0  # a comment this often: a closed page is noticed at the next write
STREAM_S = 600.0  # a stream says bye and ends then, and EventSource reconnects: no thread waits for ever
RETRY_MS = 1000  # how soon EventSource reconnects after the connection drops

INDICATOR_STYLE = {"position": "fixed", "top": "8px", "right": "12px", "zIndex": 1000, "padding": "2px 10px",
                   "borderRadius": "10px", "fontSize": "12px", "background": "#eceff1", "color": "#37474f"}
LIVE_STYLE = {**INDICATOR_STYLE, "background": "#e8f5e9", "color": "#1b5e20"}
DOWN_STYLE = {**INDICATOR_STYLE, "background": "#fff3e0", "color": "#e65100"}


def default_frames(context: PageContext) -> tuple:
    """What the default view is made from, as the readers hand it back: the same objects until
    the tables change (gold; the newest day's corrections, too-late trades and history)."""
    readers = context.readers
    gold = readers.gold.read()
    day = next(iter(context.gold_days()), None)
    if day is None:
        return (gold,)
    return gold, readers.corrections.read(day), readers.late_trades.read(day), readers.history.read(day)


def quarantine_frames(context: PageContext) -> tuple:
    """What the quarantine panel's default view is made from: its counts (the same list until the
    table changes) and the newest day (the panel counts the shown day's)."""
    counts = context.quarantine.read()[0] if context.quarantine is not None else None
    return counts, next(iter(context.gold_days()), None)


def same_frames(these: tuple, those: tuple) -> bool:
    return len(these) == len(those) and all(a is b for a, b in zip(these, those))


class Publisher:
    """The default view's snapshot (status included), pushed when it changes: a look every
    poll_s while a page is connected, at most one push per min_gap_s. Each page waits for a newer
    push than its last (wait_newer): there is no queue, a slow page skips to the newest."""

    def __init__(self, context: PageContext, poll_s: float = POLL_S, min_gap_s: float = MIN_GAP_S,
                 clock: Callable[[], float] = time.monotonic):
        self.context, self.poll_s, self.min_gap_s, self.clock = context, poll_s, min_gap_s, clock
        self.computations = 0  # times the default view's data was worked out
        # Event ids are "<epoch>-<push number>": after a restart the page sees another epoch.
        self.epoch = uuid.uuid4().hex[:8]
        self._changed = threading.Condition()
        self._look = threading.Lock()  # one look at a time
        self._seq, self._payload = 0, ""
        self._snapshot: dict | None = None
        self._pushed_at = -math.inf
        self._frames: tuple = ()
        self._data: dict | None = None
        self._quarantine: tuple = ()
        self._quarantine_changes = 0
        self._subscribers = 0
        self._stopping = False
        self._thread: threading.Thread | None = None

    @property
    def subscribers(self) -> int:
        return self._subscribers

    def latest(self) -> tuple[int, str]:
        """The last push: its number (0: none yet) and its JSON."""
        with self._changed:
            return self._seq, self._payload

    def snapshot(self) -> dict:
        """The default view's snapshot now; its data worked out again only when a frame changed.
        "quarantine_changes" counts the changes of the quarantine panel's data (its own store,
        filled per page on the tick: push.js ticks when this moves)."""
        frames = default_frames(self.context)
        if self._data is None or not same_frames(frames, self._frames):
            self._data, self._frames = view_snapshot(self.context, None, None, None), frames
            self.computations += 1
        quarantine = quarantine_frames(self.context)
        if not (self._quarantine and quarantine[0] is self._quarantine[0] and quarantine[1] == self._quarantine[1]):
            self._quarantine, self._quarantine_changes = quarantine, self._quarantine_changes + 1
        return {**self._data, "status": self.context.status(), "quarantine_changes": self._quarantine_changes}

    def check(self) -> bool:
        """One look: push the snapshot when it differs from the last push and that push is
        min_gap_s old. True when it pushed."""
        with self._look:
            if self.clock() < self._pushed_at + self.min_gap_s:
                return False
            snapshot = self.snapshot()
            if snapshot == self._snapshot:
                return False
            # Once for every page, as one line; push_id lets a page's callback tell pushes apart.
            payload = to_json_plotly({**snapshot, "push_id": self._seq + 1})
            with self._changed:
                self._seq, self._payload, self._snapshot = self._seq + 1, payload, snapshot
                self._pushed_at = self.clock()
                self._changed.notify_all()
            return True

    def resume_after(self, last_event_id: str | None) -> int:
        """The push a reconnecting page last had (EventSource's Last-Event-ID), if it is one of
        this publisher's: the page is not sent it again. 0 (send the latest) otherwise."""
        epoch, _, number = (last_event_id or "").partition("-")
        with self._changed:
            return int(number) if epoch == self.epoch and number.isdigit() and int(number) <= self._seq else 0

    def wait_newer(self, seq: int, timeout_s: float) -> tuple[int, str | None]:
        """The newest push after `seq` (its number and JSON), waiting up to timeout_s for one;
        (seq, None) when none came or the publisher stops."""
        with self._changed:
            self._changed.wait_for(lambda: self._seq > seq or self._stopping, timeout_s)
            return (self._seq, self._payload) if self._seq > seq else (seq, None)

    def subscribe(self) -> None:
        """A page connected: the looking thread runs (started at the first) while any is. The
        first page after none gets a fresh look, not the push of when the last one left."""
        with self._changed:
            self._subscribers += 1
            idle = self._subscribers == 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="dashboard-push", daemon=True)
                self._thread.start()
            self._changed.notify_all()
        if idle:
            self._look_safely()

    def unsubscribe(self) -> None:
        with self._changed:
            self._subscribers -= 1

    @property
    def stopping(self) -> bool:
        return self._stopping

    def stop(self) -> None:
        """Ends the thread and every page's wait (their streams end)."""
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _look_safely(self) -> None:
        try:
            self.check()
        except Exception as exc:  # noqa: BLE001 - a failed read is tried again at the next look
            log.warning("push: reading the default view failed: %s", exc)

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._subscribers > 0 or self._stopping)
                if self._stopping:
                    return
            self._look_safely()
            pause = max(self.poll_s, self._pushed_at + self.min_gap_s - self.clock())
            with self._changed:
                self._changed.wait_for(lambda: self._stopping, pause)


def event_stream(publisher: Publisher, last_event_id: str | None = None, stream_s: float = STREAM_S,
                 keep_alive_s: float = KEEP_ALIVE_S) -> Iterator[str]:
    """One page's stream: the reconnect delay, the latest snapshot at once (unless the page
    already has it), then each newer one, a keep-alive comment when none came for keep_alive_s.
    After stream_s it says "bye" and ends (EventSource reconnects); it ends when the publisher stops."""
    yield f"retry: {RETRY_MS}\n\n"
    seq, ends = publisher.resume_after(last_event_id), time.monotonic() + stream_s
    while not publisher.stopping:
        left = ends - time.monotonic()
        if left <= 0:
            yield "event: bye\ndata: \n\n"
            return
        seq, payload = publisher.wait_newer(seq, min(keep_alive_s, left))
        if payload is None:
            yield ": keep-alive\n\n"
        else:
            yield f"id: {publisher.epoch}-{seq}\nevent: snapshot\ndata: {payload}\n\n"


def layout() -> list:
    """The stores push.js writes, what it is told, and the connection indicator (fixed in a corner)."""
    config = {"url": EVENTS_PATH, "pushed": ids.PUSHED, "tick": ids.TICK,
              "state": ids.PUSH_STATE, "retryMs": RETRY_MS, "liveStyle": LIVE_STYLE, "downStyle": DOWN_STYLE}
    return [dcc.Store(id=ids.PUSHED), dcc.Store(id=ids.PUSH_CONFIG, data=config),
            html.Span("Connecting…", id=ids.PUSH_STATE, style=INDICATOR_STYLE, title="The page's live connection")]


def register(app: Dash, publisher: Publisher) -> None:
    """GET /api/events (read-only, behind the app's Host guard) and the page's two clientside
    callbacks: connect once the layout is there, and copy a push into the snapshot store."""

    @app.server.route(EVENTS_PATH)
    def api_events():
        publisher.subscribe()
        stream = event_stream(publisher, flask.request.headers.get("Last-Event-ID"))
        response = flask.Response(stream, mimetype="text/event-stream",
                                  headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        response.call_on_close(publisher.unsubscribe)
        return response

    app.clientside_callback(ClientsideFunction("push", "connect"), Output(ids.PUSH_STATE, "children"),
                            Input(ids.PUSH_CONFIG, "data"))
    # In the default view the push is the snapshot; in a view of the page's own it moves the tick
    # (the server works that view out), and so it does when the quarantine changed (its panel is
    # filled on the tick) or the server restarted.
    app.clientside_callback(ClientsideFunction("push", "follow"), Output(ids.SNAPSHOT, "data", allow_duplicate=True),
                            Output(ids.TICK, "n_intervals"), Input(ids.PUSHED, "data"),
                            Input(ids.DAY_PICKER, "value"), Input(ids.CHANNEL_FILTER, "value"),
                            Input(ids.SYMBOL_FILTER, "value"), State(ids.TICK, "n_intervals"),
                            prevent_initial_call=True)
