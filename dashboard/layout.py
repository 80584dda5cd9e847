"""Page layout. A function, so a reload shows the producer's current state."""

from __future__ import annotations

from dash import dcc, html

from dashboard import ids


def build_layout(refresh_ms: int, producer_enabled: bool | None, rate: float | None):
    producer_available = producer_enabled is not None
    return html.Div(className="page", children=[
        html.Header(className="header", children=[
            html.H1("Trade Summary"),
            html.Span("15-minute windows · buy, sell and settlement, live from Kafka", className="subtitle"),
        ]),
        html.Div(id=ids.STATUS_LINE, className="status-line", children="Starting…"),
        html.Section(className="controls", children=[
            html.Fieldset(className="control-group", children=[
                html.Legend("Producer simulation"),
                dcc.Checklist(
                    id=ids.PRODUCER_SWITCH, className="switch",
                    options=[{"label": " Simulation running", "value": "on",
                              "disabled": not producer_available}],
                    value=["on"] if producer_enabled else [],
                ),
                html.Label(["Trades per second ",
                            dcc.Input(id=ids.RATE_INPUT, type="number", min=0.1, max=100000, step=0.1,
                                      value=rate, disabled=not producer_available, debounce=True,
                                      className="number-input")]),
                html.Button("Apply", id=ids.RATE_APPLY, n_clicks=0, disabled=not producer_available),
                html.Span(id=ids.CONTROL_MESSAGE, className="control-message", role="status"),
            ]),
            html.Fieldset(className="control-group", children=[
                html.Legend("Chart"),
                dcc.RadioItems(
                    id=ids.CHART_MODE, className="radio", inline=True, value=ids.MODE_WINDOW,
                    options=[{"label": " Per window", "value": ids.MODE_WINDOW},
                             {"label": " Running total over the day", "value": ids.MODE_RUNNING}],
                ),
            ]),
        ]),
        dcc.Graph(id=ids.CHART, className="chart", config={"displaylogo": False}),
        html.Div(id=ids.LATE_COUNTERS, className="status-line late-counters"),
        html.Section(className="panels", children=[
            html.Div(className="panel", children=[html.H2("Late-arrival corrections (newest first)"),
                                                  html.Div(id=ids.CORRECTIONS_FEED)]),
            html.Div(className="panel", children=[html.H2("Too late to count"),
                                                  html.Div(id=ids.LATE_TRADES_LIST)]),
        ]),
        dcc.Store(id=ids.SNAPSHOT),
        dcc.Interval(id=ids.TICK, interval=refresh_ms, n_intervals=0),
    ])
