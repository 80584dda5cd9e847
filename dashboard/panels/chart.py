"""The chart panel: its toolbar, the live chart, and the drill-down's channel and symbol choices.

The toolbar: the day, a channel/symbol drill-down from silver, per window or running total, and
the values as first reported."""

from __future__ import annotations

import pandas as pd
from dash import Dash, Input, Output, State, dcc, html, no_update

from dashboard import figures, ids
from dashboard.context import Drawing, PageContext
from dashboard.inputs import choice

# How often the channel and symbol options are refreshed from silver (and at page load and a
# change of day). Slower than the data tick: they change rarely, and finding them reads silver.
FILTER_REFRESH_MS = 30_000


def toolbar() -> html.Div:
    """What the chart shows: the day, a channel/symbol drill-down, per window or running, ghosts.
    The channel and symbol options are those in silver, filled by a callback (none before it exists)."""
    return html.Div(className="chart-toolbar", children=[
        html.Label(["Day", dcc.Dropdown(id=ids.DAY_PICKER, placeholder="Latest trading day", clearable=True,
                                        searchable=False, className="picker")]),
        html.Label(["Channel", dcc.Dropdown(id=ids.CHANNEL_FILTER, placeholder="All channels", options=[],
                                            clearable=True, searchable=False, className="picker")]),
        html.Label(["Symbol", dcc.Dropdown(id=ids.SYMBOL_FILTER, placeholder="All symbols", options=[],
                                           clearable=True, className="picker")]),
        dcc.RadioItems(id=ids.CHART_MODE, className="radio", inline=True, value=ids.MODE_WINDOW,
                       options=[{"label": " Per window", "value": ids.MODE_WINDOW},
                                {"label": " Running total over the day", "value": ids.MODE_RUNNING}]),
        dcc.Checklist(id=ids.FIRST_REPORTED, className="switch", value=[],
                      options=[{"label": " Show as first reported", "value": "on"}]),
        html.Span(id=ids.CHART_NOTE, className="chart-note"),
    ])


def layout() -> tuple[html.Div, dcc.Graph]:
    """The toolbar, and the live chart."""
    return toolbar(), dcc.Graph(id=ids.CHART, className="chart", style=figures.CHART_BOX,
                                config={"displaylogo": False, "responsive": True})


def day_options(snapshot: dict | None) -> list[dict]:
    return [{"label": pd.Timestamp(day).strftime("%a %d %b %Y"), "value": day}
            for day in (snapshot or {}).get("days", [])]


def channel_options(channels: list[str]) -> list[dict]:
    return [{"label": channel.capitalize(), "value": channel} for channel in channels]


def symbol_options(symbols: list[str]) -> list[dict]:
    return [{"label": symbol, "value": symbol} for symbol in symbols]


def chart_note(snapshot: dict | None) -> str:
    filters = (snapshot or {}).get("filters") or {}
    if not (snapshot or {}).get("drill_down"):
        return "Streaming gold: trades within the watermark, corrections included."
    chosen = " · ".join(f"{name} {value}" for name, value in filters.items() if value)
    return (f"Drill-down ({chosen}): from silver, so every valid trade counts, also those too late for the "
            "watermark; clear the filters for the streaming totals.")


def first_reported_shown(value) -> bool:
    """The "as first reported" checklist's value -> whether the ghost lines are shown."""
    return isinstance(value, list) and "on" in value


def live_figure(snapshot, mode, first_reported) -> dict:
    """The live chart of the snapshot store, in the chart mode and with the "as first reported"
    checklist's value chosen."""
    return figures.summary_figure(snapshot if isinstance(snapshot, dict) else None, mode,
                                  first_reported=first_reported_shown(first_reported))


DRAWING = Drawing("chart", ((ids.CHART, "figure"),), live_figure,
                  choices=((ids.CHART_MODE, "value", ids.MODE_WINDOW), (ids.FIRST_REPORTED, "value", [])))


def register(app: Dash, context: PageContext) -> None:
    @app.callback(Output(ids.CHANNEL_FILTER, "options"), Output(ids.SYMBOL_FILTER, "options"),
                  Input(ids.FILTER_TICK, "n_intervals"), Input(ids.DAY_PICKER, "value"),
                  State(ids.CHANNEL_FILTER, "options"), State(ids.SYMBOL_FILTER, "options"))
    def refresh_filter_options(_tick, day, shown_channels, shown_symbols):
        """The drill-down's choices: the channels and symbols of the shown day's trades in silver
        (of silver's newest day before gold has one). On its own slower interval (and at page
        load and a change of day), not the data tick: finding them reads silver."""
        values = context.filter_values
        channels, symbols = values.read(context.shown_day(choice(day))) if values is not None else ([], [])
        options = (channel_options(channels), symbol_options(symbols))
        return tuple(no_update if new == (shown or []) else new
                     for new, shown in zip(options, (shown_channels, shown_symbols)))

    # CHART_DRAW: push.js asks for the chart alone, for a page whose chart choices are not the
    # ones the push drew it with.
    @app.callback(Output(ids.CHART, "figure"), Input(ids.DRAW, "data"), Input(ids.CHART_DRAW, "data"),
                  Input(ids.CHART_MODE, "value"), Input(ids.FIRST_REPORTED, "value"), State(ids.SNAPSHOT, "data"),
                  prevent_initial_call=True)
    def draw_chart(_draw, _chart_draw, mode, first_reported, snapshot):
        return context.drawn(DRAWING, snapshot, mode, first_reported)
