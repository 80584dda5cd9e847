"""The page: header, status line, each panel's layout in page order, and the shared stores and intervals.

A function, so a reload shows the producer's current state."""

from __future__ import annotations

from dash import dcc, html

from dashboard import ids, panels
from streaming.config import Simulation


def build_layout(refresh_ms: int, producer_enabled: bool | None, simulation: Simulation | None = None,
                 watermark_minutes: float | None = None, reconcile_available: bool = False):
    """KPI cards, then the chart (it dominates), then the controls, the late-data panels,
    reconciliation and health."""
    return html.Div(className="page", children=[
        html.Header(className="header", children=[
            html.H1("Trade Summary"),
            html.Span("15-minute windows · buy, sell and settlement, live from Kafka", className="subtitle"),
        ]),
        html.Div(id=ids.STATUS_LINE, className="status-line", children="Starting…"),
        panels.kpis.layout(),
        *panels.chart.layout(),
        *panels.time_machine.layout(),
        panels.export.layout(),
        panels.producer.layout(producer_enabled, simulation, watermark_minutes),
        html.Div(id=ids.LATE_COUNTERS, className="status-line late-counters"),
        html.Section(className="panels", children=[panels.corrections.layout(), panels.too_late.layout()]),
        panels.quarantine.layout(),
        panels.reconciliation.layout(reconcile_available),
        panels.exactly_once.layout(),
        panels.health.layout(),
        dcc.Store(id=ids.SNAPSHOT),
        dcc.Store(id=ids.QUARANTINE_STORE),
        dcc.Store(id=ids.RECONCILE_RESULT),
        dcc.Interval(id=ids.TICK, interval=refresh_ms, n_intervals=0),
        dcc.Interval(id=ids.FILTER_TICK, interval=panels.chart.FILTER_REFRESH_MS, n_intervals=0),
    ])
