"""The too-late list: trades later than the watermark, which gold did not count unless a backfill has since.

Drawn by the corrections panel's callback, with the rest of the late data."""

from __future__ import annotations

from dash import html

from dashboard import ids
from dashboard.formatting import feed_table, money


def layout() -> html.Div:
    return html.Div(className="panel", children=[html.H2("Too late to count"), html.Div(id=ids.LATE_TRADES_LIST)])


def late_trades_list(snapshot: dict | None):
    rows = [[t["event_time"][11:19], t["window_start"][11:16], t["side"], money(t["amount"]),
             t["watermark"][11:19], f"{t['late_by_seconds'] / 60:,.1f} min", t["trade_id"][:12],
             f"backfilled {t['backfilled_at'][11:19]}" if t.get("backfilled_at") else "no"]
            for t in (snapshot or {}).get("late_trades", [])]
    return feed_table(["Event time", "Window", "Side", "Amount", "Watermark missed", "Late by", "Trade", "In gold"],
                      rows, "No trade has been too late for the watermark.")
