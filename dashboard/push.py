"""Push, not polling: one publisher per app works the default view's snapshot out once per change
and streams it to every open page over server-sent events (GET /api/events).

Server-sent events on Flask rather than Dash's WebSocket callbacks: those need the FastAPI or
Quart backend (the Host guard and the API routes are Flask's), and a WebSocket callback runs per
viewer, where this work is shared. The browser's EventSource reconnects by itself after a server
restart; assets/push.js shows the connection's state and turns the fallback interval
(ids.TICK) on while it is down.

A push carries the default view's panels drawn (panels_drawn), which a page in that view sets
itself (assets/push.js). A page's own view, or a push too old, is drawn by the panels' callbacks,
which share their work per push and choices (shared, PanelCache)."""

from __future__ import annotations

import json
import logging
import math
import threading
import time
import uuid
from collections import OrderedDict
from typing import Any, Callable, Iterator

import flask
from dash import ClientsideFunction, Dash, Input, Output, State, dcc, html
from plotly.io.json import to_json_plotly

from dashboard import ids
from dashboard.context import PageContext
from dashboard.panel_cache import PanelCache, plain
from dashboard.panels import DRAWN_FROM_SNAPSHOT
from dashboard.panels.quarantine import quarantine_view
from dashboard.refresh import view_snapshot
from streaming.lake import midway

log = logging.getLogger(__name__)

EVENTS_PATH = "/api/events"
POLL_S = 0.05  # how often the publisher looks for a change while a page is connected
GOLD_GAP_S = 0.0  # a new gold version goes out at the next look once the last push is this old: at once
MIN_GAP_S = 0.5  # anything else (the status, quarantine) at most once per gap: together with what came meanwhile
FILTER_LOOK_S = 2.0  # the newest day's channels and symbols are looked at this often: they seldom change
KEEP_ALIVE_S = 15.0  # a comment this often: a closed page is noticed at the next write
STREAM_S = 600.0  # a stream says bye and ends then, and EventSource reconnects: no thread waits for ever
RETRY_MS = 1000  # how soon EventSource reconnects after the connection drops
RETRY_MAX_MS = 10_000  # push.js doubles its wait after each failed connect up to this
REFUSED_LOG_S = 60.0  # a refused page (over --max-pages) is logged at most this often
KEPT_PUSHES = 8  # the newest pushes kept to draw from: a page a few pushes behind is still shared

INDICATOR_STYLE = {"position": "fixed", "top": "8px", "right": "12px", "zIndex": 1000, "padding": "2px 10px",
                   "borderRadius": "10px", "fontSize": "12px", "background": "#eceff1", "color": "#37474f"}
LIVE_STYLE = {**INDICATOR_STYLE, "background": "#e8f5e9", "color": "#1b5e20"}
DOWN_STYLE = {**INDICATOR_STYLE, "background": "#fff3e0", "color": "#e65100"}


# The page's choices the pushed panels are drawn with (push.js compares the page's own with them).
CHOICES = tuple(dict.fromkeys((i, prop) for drawing in DRAWN_FROM_SNAPSHOT for i, prop, _ in drawing.choices))

# What a push carries besides the snapshot (for the page's other stores and ticks).
PAGE_PARTS = ("quarantine", "quarantine_changes", "filter_changes")


def view_part(snapshot: dict) -> dict:
    """The snapshot a push carries for the snapshot store (PAGE_PARTS left out)."""
    return {key: value for key, value in snapshot.items() if key not in PAGE_PARTS}


def news(snapshot: dict | None) -> dict | None:
    """What a push tells a page: the snapshot but for what only the clock moves, the status's own
    time and the lag samples taken while the lag stayed the same (the sparkline draws them as one
    level). An idle app pushes nothing."""
    status = (snapshot or {}).get("status")
    if snapshot is None or not isinstance(status, dict):
        return snapshot
    history = status.get("lag_history") or []
    levels = [sample["lag"] for before, sample in zip([None, *history], history)
              if before is None or sample["lag"] != before["lag"]]
    told = {key: value for key, value in status.items() if key not in ("at", "lag_history")}
    return {**snapshot, "status": {**told, "lag_levels": levels}}


def panels_drawn(snapshot: dict) -> list[dict]:
    """Each panel's outputs drawn from the snapshot with the default choices (Drawing.for_push), which
    a page in the default view sets itself (assets/push.js). A panel that fails to draw is left out."""
    drawn = []
    for drawing in DRAWN_FROM_SNAPSHOT:
        try:
            drawn.append(drawing.for_push(snapshot))
        except Exception as exc:  # noqa: BLE001 - one panel's fault must not stop the push
            log.warning("push: drawing the %s panel failed: %s", drawing.name, exc)
    return drawn


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
    """What the quarantine panel's default view is made from: its counts and newest records of
    every reason (the same lists until the table changes) and the newest day (the panel counts
    the shown day's)."""
    counts, newest = context.quarantine.read() if context.quarantine is not None else (None, None)
    return counts, newest, next(iter(context.gold_days()), None)


def same_frames(these: tuple, those: tuple) -> bool:
    return len(these) == len(those) and all(a is b for a, b in zip(these, those))


class Publisher:
    """The default view's snapshot (status included), pushed when it changes: a look every
    poll_s while a page is connected, and as a gold step settles gold's tables (midway.py); a
    new gold version is pushed at once (once the last push is gold_gap_s old), any other change
    once the last push is min_gap_s old. What the page is for, a trade reaching the chart, waits
    for no status push; the status alone pushes no more often than before. Each page waits for
    a newer push than its last (wait_newer): there is no queue, a slow page skips to the newest."""

    def __init__(self, context: PageContext, poll_s: float = POLL_S, min_gap_s: float = MIN_GAP_S,
                 clock: Callable[[], float] = time.monotonic, gold_gap_s: float = GOLD_GAP_S,
                 max_pages: int | None = None):
        self.context, self.poll_s, self.min_gap_s, self.clock = context, poll_s, min_gap_s, clock
        self.max_pages = max_pages  # live pages at once (--max-pages); None: no bound
        self.gold_gap_s = min(gold_gap_s, min_gap_s)
        self.computations = 0  # times the default view's data was worked out
        # Event ids are "<epoch>-<push number>": after a restart the page sees another epoch.
        self.epoch = uuid.uuid4().hex[:8]
        self._changed = threading.Condition()
        self._look = threading.Lock()  # one look at a time
        self._seq, self._payload = 0, ""
        self._snapshot: dict | None = None
        self._told: dict | None = None  # news(self._snapshot)
        self._panels: list[dict] = []  # the last push's panels_drawn
        self._push_id, self._pushed_at = "", -math.inf
        self._pushed_gold: Any = None  # gold's frame as of the last push
        self._frames: tuple = ()
        self._data: dict | None = None
        self._quarantine: tuple = ()
        self._quarantine_view: dict | None = None
        self._quarantine_changes = 0
        self._filter_values: tuple | None = None
        self._filter_changes, self._filters_read_at = 0, -math.inf
        self._subscribers, self._stopping = 0, False
        self._thread: threading.Thread | None = None
        self._kept: OrderedDict[str, list] = OrderedDict()  # push_id -> [payload, parsed or None]
        self.panels = PanelCache()
        # The panels' callbacks are registered before the publisher is made: they find it here.
        context.push = self

    @property
    def subscribers(self) -> int:
        return self._subscribers

    def latest(self) -> tuple[int, str]:
        """The last push: its number (0: none yet) and its JSON."""
        with self._changed:
            return self._seq, self._payload

    def snapshot(self, frames: tuple | None = None) -> dict:
        """The default view's snapshot now (with the page's parts: page_parts); its data worked
        out again only when a frame changed."""
        return {**self._view(frames), **self.page_parts()}

    def _view(self, frames: tuple | None = None) -> dict:
        frames = default_frames(self.context) if frames is None else frames
        if self._data is None or not same_frames(frames, self._frames):
            self._data, self._frames = view_snapshot(self.context, None, None, None), frames
            self.computations += 1
        return {**self._data, "status": self.context.status()}

    def page_parts(self) -> dict:
        """"quarantine": the quarantine panel's default view (every reason, the newest day: its
        own store, which push.js fills from it while the page shows that); "quarantine_changes"
        counts its changes (push.js ticks for another view of it when this moves);
        "filter_changes" those of the newest day's channels and symbols in silver (push.js moves
        ids.FILTER_TICK, off while the page is live, when this moves)."""
        counts, newest, day = quarantine_frames(self.context)
        if not (self._quarantine and same_frames((counts, newest), self._quarantine[:2])
                and day == self._quarantine[2]):
            self._quarantine, self._quarantine_changes = (counts, newest, day), self._quarantine_changes + 1
            self._quarantine_view = quarantine_view(counts or [], newest or [], day, None)
        return {"quarantine": self._quarantine_view, "quarantine_changes": self._quarantine_changes,
                "filter_changes": self._filter_changes}

    def follow_filter_values(self) -> None:
        """Reads the newest day's channels and symbols, FILTER_LOOK_S after the last read, and counts
        a change (page_parts): between looks, so that no push waits for silver's log."""
        if self.clock() - self._filters_read_at < FILTER_LOOK_S:
            return
        values, self._filters_read_at = self.context.filter_values, self.clock()
        try:
            filters = values.read(self.context.shown_day(None)) if values is not None else ([], [])
        except Exception as exc:  # noqa: BLE001 - the options only: the snapshot is pushed all the same
            log.warning("push: reading the channels and symbols failed: %s", exc)
            return
        if filters != self._filter_values:
            self._filter_values, self._filter_changes = filters, self._filter_changes + 1

    def default_snapshot(self) -> dict:
        """The default view's snapshot as the server works it out for a page (refresh_snapshot,
        on the tick): the publisher's, so every page polling shares its work."""
        with self._look:
            return self._view()

    def check(self) -> bool:
        """One look: push the snapshot when it differs from the last push and that push is
        min_gap_s old, or gold_gap_s old when gold has a new version. True when it pushed."""
        with self._look:
            since = self.clock() - self._pushed_at
            if since < self.gold_gap_s or not self.context.steady():  # a gold step midway: the next look
                return False
            frames = default_frames(self.context)
            if since < self.min_gap_s and frames[0] is self._pushed_gold:
                return False  # gold as pushed: the rest waits for the gap
            snapshot = self.snapshot(frames)
            told = news(snapshot)
            if told == self._told:
                return False
            # Once for every page, as one line. push_id names the snapshot (the id of the event
            # that first carried it: unique across restarts): the panels' callbacks share their
            # work by it (shared), and push.js leaves the store alone when only the rest moved.
            same_view = self._snapshot is not None and view_part(snapshot) == view_part(self._snapshot)
            push_id = self._push_id if same_view else f"{self.epoch}-{self._seq + 1}"
            if not same_view:
                self._panels = panels_drawn(view_part(snapshot))
            payload = to_json_plotly({**snapshot, "push_id": push_id, "panels": self._panels})
            with self._changed:
                self._seq, self._payload, self._snapshot, self._told = self._seq + 1, payload, snapshot, told
                if not same_view:
                    self._push_id, self._kept[push_id] = push_id, [payload, None]
                while len(self._kept) > KEPT_PUSHES:
                    self._kept.popitem(last=False)
                self._pushed_at, self._pushed_gold = self.clock(), frames[0]
                self._changed.notify_all()
            return True

    def pushed(self, push_id: Any) -> dict | None:
        """One of the newest pushes as the pages have it (parsed once); None when it is not kept."""
        with self._changed:
            kept = self._kept.get(push_id) if isinstance(push_id, str) else None
        if kept is None:
            return None
        if kept[1] is None:
            kept[1] = json.loads(kept[0])  # two pages parsing at once both get the same
        return kept[1]

    def shared(self, name: str, compute: Callable[..., Any], snapshot: Any, *args: Any) -> Any:
        """compute(snapshot, *args), once per push and choices for every page: from the server's
        own copy of the push the snapshot names (an uploaded store is not trusted to be it), and
        kept (PanelCache). A snapshot of a view of the page's own, or of a push no longer kept, is
        drawn as it is."""
        push_id = snapshot.get("push_id") if isinstance(snapshot, dict) else None
        own = self.pushed(push_id)  # parsed once per push, then a look-up
        if own is None:
            return compute(snapshot, *args)
        key = (name, push_id, json.dumps(args, sort_keys=True, default=repr))
        return self.panels.outputs(key, lambda: plain(compute(own, *args)))

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

    def subscribe(self) -> bool:
        """A page connected: the looking thread runs (started at the first) while any is. The
        first page after none gets a fresh look, not the push of when the last one left. False,
        and nothing changes, when max_pages are live already."""
        with self._changed:
            if self.max_pages is not None and self._subscribers >= self.max_pages:
                return False
            self._subscribers += 1
            idle = self._subscribers == 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="dashboard-push", daemon=True)
                self._thread.start()
            self._changed.notify_all()
        if idle:
            self.follow_filter_values()
            self._look_safely()
        return True

    def unsubscribe(self) -> None:
        with self._changed:
            self._subscribers -= 1

    def stop(self) -> None:
        """Ends the thread and every page's wait (their streams end)."""
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def stopping(self) -> bool:
        return self._stopping

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
            seen = midway.settles()
            self._look_safely()
            self.follow_filter_values()
            pause = max(self.poll_s, self._pushed_at + self.gold_gap_s - self.clock())
            midway.wait_for_settled(seen, pause)  # a gold step of this process settling: a look at once


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
    config = {"url": EVENTS_PATH, "pushed": ids.PUSHED, "tick": ids.TICK, "filterTick": ids.FILTER_TICK,
              "state": ids.PUSH_STATE, "retryMs": RETRY_MS, "retryMaxMs": RETRY_MAX_MS, "liveStyle": LIVE_STYLE,
              "downStyle": DOWN_STYLE, "tabTicks": {ids.TAB_LATENESS: ids.LATENESS_TICK}, "tabs": ids.PAGE_TABS,
              "choices": [f"{i}.{prop}" for i, prop in CHOICES]}
    return [dcc.Store(id=ids.PUSHED), dcc.Store(id=ids.PUSH_CONFIG, data=config),
            html.Span("Connecting…", id=ids.PUSH_STATE, style=INDICATOR_STYLE, title="The page's live connection")]


def register(app: Dash, publisher: Publisher) -> None:
    """GET /api/events (read-only, behind the app's Host guard) and the page's two clientside
    callbacks: connect once the layout is there, and copy a push into the snapshot store."""

    app.server.extensions["dashboard.push"] = publisher  # for the tests and the benchmark

    refused_logged_at = [-math.inf]

    @app.server.route(EVENTS_PATH)
    def api_events():
        if not publisher.subscribe():
            if time.monotonic() - refused_logged_at[0] >= REFUSED_LOG_S:
                refused_logged_at[0] = time.monotonic()
                log.warning("push: %d pages are live already: more refresh every --refresh-ms instead "
                            "(--max-pages raises the bound)", publisher.max_pages)
            return flask.Response(f"{publisher.max_pages} pages are live already (--max-pages): this one "
                                  "refreshes on its own instead\n", status=503, mimetype="text/plain",
                                  headers={"Retry-After": str(RETRY_MAX_MS // 1000)})
        stream = event_stream(publisher, flask.request.headers.get("Last-Event-ID"))
        response = flask.Response(stream, mimetype="text/event-stream",
                                  headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        response.call_on_close(publisher.unsubscribe)
        return response

    app.clientside_callback(ClientsideFunction("push", "connect"), Output(ids.PUSH_STATE, "children"),
                            Input(ids.PUSH_CONFIG, "data"))
    # A push sets the default view's snapshot, panels and quarantine store; a view of the page's own
    # moves the tick (the server draws it). assets/push.js's follow says the rest.
    app.clientside_callback(ClientsideFunction("push", "follow"), Output(ids.SNAPSHOT, "data", allow_duplicate=True),
                            Output(ids.TICK, "n_intervals"), Output(ids.QUARANTINE_STORE, "data", allow_duplicate=True),
                            Output(ids.FILTER_TICK, "n_intervals"), Output(ids.CHART_DRAW, "data"),
                            Input(ids.PUSHED, "data"), Input(ids.DAY_PICKER, "value"),
                            Input(ids.CHANNEL_FILTER, "value"), Input(ids.SYMBOL_FILTER, "value"),
                            Input(ids.PAGE_TABS, "value"), State(ids.TICK, "n_intervals"),
                            State(ids.QUARANTINE_REASON, "value"), State(ids.FILTER_TICK, "n_intervals"),
                            State(ids.CHART_DRAW, "data"), *(State(i, prop) for i, prop in CHOICES),
                            prevent_initial_call=True)
