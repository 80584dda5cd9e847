"""The data tick: the one interval callback that reads the tables and status once into the snapshot store.

The chart and the panels are drawn from that store."""

from __future__ import annotations

from dash import Dash, Input, Output

from dashboard import ids
from dashboard.context import PageContext, pick_day
from dashboard.data import read_silver_day, silver_windows, snapshot_from, window_length
from dashboard.inputs import choice


def register(app: Dash, context: PageContext) -> None:
    @app.callback(Output(ids.SNAPSHOT, "data"), Input(ids.TICK, "n_intervals"), Input(ids.DAY_PICKER, "value"),
                  Input(ids.CHANNEL_FILTER, "value"), Input(ids.SYMBOL_FILTER, "value"))
    def refresh_snapshot(_tick, day, channel, symbol):
        # The page's choices as the dropdowns give them: a text each, or none. Anything else is
        # ignored (the latest day, every channel and symbol) rather than failing the refresh.
        day, channel, symbol = (choice(value) for value in (day, channel, symbol))
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
        snapshot["status"] = context.status()
        return snapshot
