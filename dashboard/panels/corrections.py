"""The late-arrival corrections feed, and the one callback that draws the late data from the snapshot.

That callback draws the status line, the late counters, this feed and the too-late list beside
it in one request."""

from __future__ import annotations

from dash import Dash, Input, Output, html

from dashboard import figures, ids
from dashboard.context import PageContext
from dashboard.formatting import change, feed_table
from dashboard.panels.too_late import late_trades_list


def layout() -> html.Div:
    return html.Div(className="panel", children=[html.H2("Late-arrival corrections (newest first)"),
                                                 html.Div(id=ids.CORRECTIONS_FEED)])


def corrections_feed(snapshot: dict | None):
    rows = [[c["corrected_at"][11:19], c["window_start"][11:16],
             change(c["buy_amount_before"], c["buy_amount_after"]),
             change(c["sell_amount_before"], c["sell_amount_after"]),
             change(c["settlement_amount_before"], c["settlement_amount_after"]),
             c["late_trades"]]
            for c in (snapshot or {}).get("corrections", [])]
    return feed_table(["At (UTC)", "Window", "Buy", "Sell", "Settlement", "Late trades"], rows,
                      "No corrections yet: no late trade has changed a completed window.")


def late_counters(snapshot: dict | None) -> str:
    counters = (snapshot or {}).get("counters", {})
    return (f"{counters.get('corrections', 0):,} corrections · "
            f"{counters.get('late_but_counted', 0):,} late but counted · "
            f"{counters.get('too_late', 0):,} too late to count")


def register(app: Dash, context: PageContext) -> None:
    @app.callback(Output(ids.STATUS_LINE, "children"), Output(ids.LATE_COUNTERS, "children"),
                  Output(ids.CORRECTIONS_FEED, "children"), Output(ids.LATE_TRADES_LIST, "children"),
                  Input(ids.SNAPSHOT, "data"))
    def draw_status_and_feeds(snapshot):
        return (figures.status_text(snapshot), late_counters(snapshot), corrections_feed(snapshot),
                late_trades_list(snapshot))
