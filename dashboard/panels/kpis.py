"""The KPI cards: the shown day's totals, drawn with the day picker's options and the chart note.

All come from the snapshot, in one callback and so one request."""

from __future__ import annotations

from dash import Dash, Input, Output, State, html

from dashboard import ids
from dashboard.context import Drawing, PageContext
from dashboard.formatting import money
from dashboard.panels.chart import chart_note, day_options

NO_KPIS = {"buy": 0.0, "sell": 0.0, "settlement": 0.0, "trades": 0, "corrections": 0, "too_late": 0}
# Each card's label and class, in the order of ids.KPI_VALUES and of kpi_values' texts.
CARDS = (("Total buy", "kpi-buy"), ("Total sell", "kpi-sell"), ("Settlement", "kpi-settlement"),
         ("Trades counted", ""), ("Late corrections", ""), ("Too late to count", ""))


def layout() -> html.Section:
    """The cards stay; a draw sets their values' text, so no component is made anew each push."""
    return html.Section(id=ids.KPI_CARDS, className="kpis", children=[
        html.Div(className=f"kpi {extra}".strip(), children=[html.Span(label, className="kpi-label"),
                                                            html.Span("—", id=value_id, className="kpi-value")])
        for (label, extra), value_id in zip(CARDS, ids.KPI_VALUES, strict=True)])


def kpi_values(snapshot: dict | None) -> list[str]:
    """The day's totals, one text a card."""
    k = (snapshot or {}).get("kpis") or NO_KPIS
    return [money(k["buy"], 0), money(k["sell"], 0), money(k["settlement"], 0), f"{k['trades']:,}",
            f"{k['corrections']:,}", f"{k['too_late']:,}"]


def day_and_kpis(snapshot: dict | None) -> tuple:
    return day_options(snapshot), *kpi_values(snapshot), chart_note(snapshot)


DRAWING = Drawing("kpis", ((ids.DAY_PICKER, "options"), *((value_id, "children") for value_id in ids.KPI_VALUES),
                           (ids.CHART_NOTE, "children")), day_and_kpis)


def register(app: Dash, context: PageContext) -> None:
    @app.callback(*(Output(i, prop) for i, prop in DRAWING.outputs), Input(ids.DRAW, "data"),
                  State(ids.SNAPSHOT, "data"), prevent_initial_call=True)
    def draw_day_and_kpis(_draw, snapshot):
        return context.drawn(DRAWING, snapshot)
