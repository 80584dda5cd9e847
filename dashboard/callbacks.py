"""Callbacks. One interval callback reads the tables and status once into a dcc.Store; the
chart and the status line are drawn from that store."""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

from dash import Dash, Input, Output, State

from dashboard import figures, ids, tables
from dashboard.data import TableReader, snapshot_from


def register_callbacks(app: Dash, readers: dict[str, TableReader], simulator=None,
                       pipeline_status: Callable[[], list] | None = None) -> None:

    @app.callback(Output(ids.SNAPSHOT, "data"), Input(ids.TICK, "n_intervals"))
    def refresh_snapshot(_tick):
        snapshot = snapshot_from(readers["gold"].read(), readers["corrections"].read(),
                                 readers["late_trades"].read())
        snapshot["status"] = {
            "producer": dataclasses.asdict(simulator.stats()) if simulator is not None else None,
            "queries": [dataclasses.asdict(s) for s in pipeline_status()] if pipeline_status else [],
        }
        return snapshot

    @app.callback(Output(ids.CHART, "figure"), Input(ids.SNAPSHOT, "data"), Input(ids.CHART_MODE, "value"))
    def draw_chart(snapshot, mode):
        return figures.summary_figure(snapshot, mode)

    @app.callback(Output(ids.STATUS_LINE, "children"), Output(ids.LATE_COUNTERS, "children"),
                  Output(ids.CORRECTIONS_FEED, "children"), Output(ids.LATE_TRADES_LIST, "children"),
                  Input(ids.SNAPSHOT, "data"))
    def draw_status_and_feeds(snapshot):
        return (figures.status_text(snapshot), tables.late_counters(snapshot),
                tables.corrections_feed(snapshot), tables.late_trades_list(snapshot))

    @app.callback(Output(ids.CONTROL_MESSAGE, "children", allow_duplicate=True),
                  Input(ids.PRODUCER_SWITCH, "value"), prevent_initial_call=True)
    def toggle_producer(value):
        if simulator is None:
            return "The producer simulation is not available in this run."
        simulator.set_enabled("on" in (value or []))
        return "Simulation running." if simulator.enabled else "Simulation paused."

    @app.callback(Output(ids.CONTROL_MESSAGE, "children"),
                  Input(ids.RATE_APPLY, "n_clicks"), State(ids.RATE_INPUT, "value"),
                  prevent_initial_call=True)
    def apply_rate(_clicks, rate):
        if simulator is None:
            return "The producer simulation is not available in this run."
        message = validate_rate(rate)
        if message:
            return message
        simulator.configure(rate=float(rate))
        return f"Rate set to {float(rate):g} trades/s."


def validate_rate(rate) -> str | None:
    """A message for an unusable rate, or None when it is fine."""
    try:
        value = float(rate)
    except (TypeError, ValueError):
        return "Enter a rate between 0.1 and 100,000 trades per second."
    if math.isnan(value) or not 0.1 <= value <= 100_000:
        return "Enter a rate between 0.1 and 100,000 trades per second."
    return None
