"""The late-arrival corrections feed, and the one callback that draws the late data from the snapshot.

That callback draws the status line, the late counters, this feed and the too-late list in one
request. The feed is a narrow column beside the chart: a row per correction, newest first, the
newest briefly highlighted."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from dash import Dash, Input, Output, State, html

from dashboard import figures, ids
from dashboard.context import Drawing, PageContext
from dashboard.formatting import change
from dashboard.panels.too_late import late_trades_list

EMPTY = "No corrections yet: no late trade has changed a completed window."
# A correction made this recently is highlighted when its row first appears (assets/style.css).
FRESH = timedelta(seconds=10)
CHANGES = (("Buy", "buy_amount"), ("Sell", "sell_amount"), ("Net", "settlement_amount"))


def layout() -> html.Section:
    return html.Section(className="panel feed-column", children=[
        html.H2("Late-arrival corrections (newest first)"),
        html.Div(id=ids.LATE_COUNTERS, className="late-counters"),
        html.Div(id=ids.CORRECTIONS_FEED)])


def row_key(correction: dict) -> str:
    """A row's id, the same on every draw: React keeps the rows already shown and mounts (and so
    highlights) only new ones. Letters, digits and dashes (Dash ids take no dots)."""
    return "correction-" + re.sub(r"[^0-9A-Za-z]+", "-", f"{correction['window_start']}-{correction['corrected_at']}")


def is_fresh(correction: dict, now: datetime) -> bool:
    try:
        return now - figures.utc_time(correction["corrected_at"]) <= FRESH
    except (TypeError, ValueError):
        return False


def corrections_feed(snapshot: dict | None, now: datetime | None = None):
    """A row per correction, newest first: when (UTC), which window, each amount that changed
    (before → after; the net always) and how many late trades made it."""
    now = now or datetime.now(timezone.utc)
    corrections = (snapshot or {}).get("corrections", [])
    if not corrections:
        return html.P(EMPTY, className="empty-note")
    rows = []
    for c in corrections:
        lines = [html.Div(f"{label} {change(c[f'{m}_before'], c[f'{m}_after'])}") for label, m in CHANGES
                 if label == "Net" or c[f"{m}_before"] != c[f"{m}_after"]]
        rows.append(html.Tr(id=row_key(c), className="fresh" if is_fresh(c, now) else None, children=[
            html.Td([html.Div(c["window_start"][11:16], className="window"),
                     html.Div(c["corrected_at"][11:19], className="at")]),
            html.Td(lines), html.Td(c["late_trades"], className="number")]))
    return html.Table(className="feed corrections", children=[
        html.Thead(html.Tr([html.Th(h) for h in ("Window, at (UTC)", "Before → after", "Late trades")])),
        html.Tbody(rows)])


def late_counters(snapshot: dict | None) -> str:
    counters = (snapshot or {}).get("counters", {})
    return (f"{counters.get('corrections', 0):,} corrections · "
            f"{counters.get('late_but_counted', 0):,} late but counted · "
            f"{counters.get('too_late', 0):,} too late to count")


def status_and_feeds(snapshot: dict | None) -> tuple:
    return (figures.status_text(snapshot), late_counters(snapshot), corrections_feed(snapshot),
            late_trades_list(snapshot))


DRAWING = Drawing("feeds", ((ids.STATUS_LINE, "children"), (ids.LATE_COUNTERS, "children"),
                            (ids.CORRECTIONS_FEED, "children"), (ids.LATE_TRADES_LIST, "children")), status_and_feeds)


def register(app: Dash, context: PageContext) -> None:
    @app.callback(*(Output(i, prop) for i, prop in DRAWING.outputs), Input(ids.DRAW, "data"),
                  State(ids.SNAPSHOT, "data"), prevent_initial_call=True)
    def draw_status_and_feeds(_draw, snapshot):
        return context.drawn(DRAWING, snapshot)
