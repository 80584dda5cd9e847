"""The snapshot store: the tables and status read once into the ids.SNAPSHOT dcc.Store, which the
chart and the panels are drawn from.

The default view (the newest day, no channel or symbol filter) is the same for every viewer:
the publisher (dashboard/push.py) works it out once per change and pushes it to each page, where
a clientside callback copies it into the store. The server callback below works out a viewer's
own snapshot only for another day or a drill-down; on the tick (the fallback while the page's
live connection is down) the default view's is the publisher's (push.Publisher.default_snapshot)."""

from __future__ import annotations

from dash import Dash, Input, Output, State, ctx
from dash.exceptions import PreventUpdate

from dashboard import ids
from dashboard.context import PageContext, pick_day
from dashboard.data import read_silver_day, silver_windows, snapshot_from, window_length
from dashboard.inputs import choice


def view_snapshot(context: PageContext, day: str | None, channel: str | None, symbol: str | None) -> dict:
    """The snapshot of one view (the picker's day, or the newest; a channel and symbol drill-down
    from silver, or none), without the status: what changes only with the tables."""
    gold, days = context.readers.gold.read(), context.gold_days()
    shown = pick_day(day, days)
    drill = None
    if (channel or symbol) and context.lake is not None and shown is not None:
        drill = silver_windows(read_silver_day(context.lake, shown, channel, symbol), window_length(gold))
    history = context.day_history(shown)
    snapshot = snapshot_from(gold, day=shown, drill=drill, days=days, late=context.day_late_data(shown),
                             first=history["first"])
    snapshot["history_span"] = history["span"]  # the time machine's slider spans it
    snapshot["filters"] = {"channel": channel, "symbol": symbol}
    return snapshot


def is_default_view(day: str | None, channel: str | None, symbol: str | None, days: list[str]) -> bool:
    """Whether the view is the one pushed to every page: the newest day (the picker empty, on the
    newest day, or on a day gold does not have), no channel, no symbol."""
    return pick_day(day, days) == next(iter(days), None) and not channel and not symbol


def needs_own_snapshot(default_view: bool, by_tick: bool) -> bool:
    """Whether the server works out this viewer's snapshot: for a view of its own (another day, a
    drill-down), and in the default view only on the tick (the fallback while the live connection
    is down, or a push saying the quarantine changed); else the pushed snapshot fills the store."""
    return not default_view or by_tick


def register(app: Dash, context: PageContext) -> None:
    # DRAW moves with the store: the panels drawn from it take it as State, so that push.js can
    # fill the store and set their outputs itself, with no request. They are not drawn at the
    # page's load: a server answer arriving after the first push would draw over it.
    @app.callback(Output(ids.SNAPSHOT, "data"), Output(ids.DRAW, "data"), Input(ids.TICK, "n_intervals"),
                  Input(ids.DAY_PICKER, "value"), Input(ids.CHANNEL_FILTER, "value"), Input(ids.SYMBOL_FILTER, "value"),
                  State(ids.DRAW, "data"))
    def refresh_snapshot(_tick, day, channel, symbol, draws):
        # The page's choices as the dropdowns give them: a text each, or none. Anything else is
        # ignored (the latest day, every channel and symbol) rather than failing the refresh.
        day, channel, symbol = (choice(value) for value in (day, channel, symbol))
        default_view = is_default_view(day, channel, symbol, context.gold_days())
        if not needs_own_snapshot(default_view, ctx.triggered_id == ids.TICK):
            raise PreventUpdate
        # The default view on the tick (every page at once after a restart, or polling while the
        # push is down) is the publisher's: worked out once per change for them all.
        draw = (draws if isinstance(draws, int) else 0) + 1
        if default_view and context.push is not None:
            return context.push.default_snapshot(), draw
        snapshot = view_snapshot(context, day, channel, symbol)
        snapshot["status"] = context.status()
        return snapshot, draw
