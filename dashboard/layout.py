"""The page: one screen of the live view (top bar, KPI cards, the chart beside the corrections
feed), the other panels in tabs under it, and the shared stores and intervals.

A function, so a reload shows the producer's current state."""

from __future__ import annotations

from dash import dcc, html

from dashboard import access, ids, panels, push
from streaming.config import Simulation
from streaming.run.users import User


def build_layout(refresh_ms: int, producer_enabled: bool | None, simulation: Simulation | None = None,
                 watermark_minutes: float | None = None, reconcile_available: bool = False, user: User | None = None):
    """At 1440x900 the producer switch and rate, the KPI cards, the chart and the newest
    corrections fit on one screen; everything else is a tab away (assets/style.css: on a phone
    the KPI cards and the chart come first). user: who is logged in (named with a logout link)."""
    rate = simulation.rate if simulation is not None else None
    toolbar, chart = panels.chart.layout()
    return html.Div(className="page", children=[
        html.Header(className="top-bar", children=[
            html.Div(className="title", children=[
                html.H1("Trade Summary"),
                html.Span("15-minute windows · buy, sell and settlement, live from Kafka", className="subtitle"),
            ]),
            panels.producer.switch_and_rate(producer_enabled, rate),
            *access.user_bar(user),
        ]),
        html.Div(id=ids.STATUS_LINE, className="status-line", children="Starting…"),
        panels.kpis.layout(),
        toolbar,
        html.Div(className="live", children=[
            html.Div(className="chart-column", children=[chart, panels.time_slider.chart()]),
            panels.corrections_feed.layout(),
        ]),
        panels.tabs.layout({
            ids.TAB_TOO_LATE: [panels.too_late.layout()],
            ids.TAB_LATENESS: [panels.what_if.layout()],
            ids.TAB_QUARANTINE: [panels.quarantine.layout()],
            ids.TAB_TIME_MACHINE: panels.time_slider.controls(),
            ids.TAB_RECONCILIATION: [panels.reconciliation.layout(reconcile_available)],
            ids.TAB_EXACTLY_ONCE: [panels.exactly_once.layout()],
            ids.TAB_HEALTH: [panels.pipeline_health.layout()],
            ids.TAB_SIMULATION: [panels.producer.knobs(simulation, watermark_minutes)],
            ids.TAB_EXPORT: [panels.export.layout()],
        }),
        dcc.Store(id=ids.SNAPSHOT),
        dcc.Store(id=ids.DRAW, data=0),
        dcc.Store(id=ids.CHART_DRAW, data=0),
        dcc.Store(id=ids.QUARANTINE_STORE),
        dcc.Store(id=ids.RECONCILE_RESULT),
        dcc.Interval(id=ids.TICK, interval=refresh_ms, n_intervals=0),
        dcc.Interval(id=ids.FILTER_TICK, interval=panels.chart.FILTER_REFRESH_MS, n_intervals=0),
        # The live connection's stores and indicator; TICK is its fallback, off while it is up.
        *push.layout(),
    ])
