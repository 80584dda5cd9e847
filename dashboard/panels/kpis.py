"""The KPI cards: the shown day's totals, drawn with the day picker's options and the chart note.

All three come from the snapshot, in one callback and so one request."""

from __future__ import annotations

from dash import Dash, Input, Output, State, html

from dashboard import ids
from dashboard.context import Drawing, PageContext
from dashboard.formatting import money
from dashboard.panels.chart import chart_note, day_options

NO_KPIS = {"buy": 0.0, "sell": 0.0, "settlement": 0.0, "trades": 0, "corrections": 0, "too_late": 0}


def layout() -> html.Section:
    return html.Section(id=ids.KPI_CARDS, className="kpis")


def kpi_cards(snapshot: dict | None) -> list:
    """The day's totals, one card each."""
    k = (snapshot or {}).get("kpis") or NO_KPIS
    cards = [("Total buy", money(k["buy"], 0), "kpi-buy"), ("Total sell", money(k["sell"], 0), "kpi-sell"),
             ("Settlement", money(k["settlement"], 0), "kpi-settlement"),
             ("Trades counted", f"{k['trades']:,}", ""), ("Late corrections", f"{k['corrections']:,}", ""),
             ("Too late to count", f"{k['too_late']:,}", "")]
    return [html.Div(className=f"kpi {extra}".strip(), children=[html.Span(label, className="kpi-label"),
                                                                html.Span(value, className="kpi-value")])
            for label, value, extra in cards]


def day_and_kpis(snapshot: dict | None) -> tuple:
    return day_options(snapshot), kpi_cards(snapshot), chart_note(snapshot)


DRAWING = Drawing("kpis", ((ids.DAY_PICKER, "options"), (ids.KPI_CARDS, "children"), (ids.CHART_NOTE, "children")),
                  day_and_kpis)


def register(app: Dash, context: PageContext) -> None:
    @app.callback(*(Output(i, prop) for i, prop in DRAWING.outputs), Input(ids.DRAW, "data"),
                  State(ids.SNAPSHOT, "data"), prevent_initial_call=True)
    def draw_day_and_kpis(_draw, snapshot):
        return context.drawn(DRAWING, snapshot)
