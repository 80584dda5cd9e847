"""The corrections feed and the too-late list, as HTML tables built from the snapshot (pure)."""

from __future__ import annotations

from dash import html


def _table(headers: list[str], rows: list[list], empty: str) -> html.Table | html.P:
    if not rows:
        return html.P(empty, className="empty-note")
    return html.Table(className="feed", children=[
        html.Thead(html.Tr([html.Th(h) for h in headers])),
        html.Tbody([html.Tr([html.Td(cell) for cell in row]) for row in rows]),
    ])


def _change(before: float, after: float) -> str:
    return f"{before:,.2f} → {after:,.2f}" if before != after else f"{after:,.2f}"


def corrections_feed(snapshot: dict | None):
    rows = [[c["corrected_at"][11:19], c["window_start"][11:16],
             _change(c["buy_amount_before"], c["buy_amount_after"]),
             _change(c["sell_amount_before"], c["sell_amount_after"]),
             _change(c["settlement_amount_before"], c["settlement_amount_after"]),
             c["late_trades"]]
            for c in (snapshot or {}).get("corrections", [])]
    return _table(["At (UTC)", "Window", "Buy", "Sell", "Settlement", "Late trades"], rows,
                  "No corrections yet: no late trade has changed a completed window.")


def late_trades_list(snapshot: dict | None):
    rows = [[t["event_time"][11:19], t["window_start"][11:16], t["side"], f"{t['amount']:,.2f}",
             t["watermark"][11:19], f"{t['late_by_seconds'] / 60:,.1f} min", t["trade_id"][:12]]
            for t in (snapshot or {}).get("late_trades", [])]
    return _table(["Event time", "Window", "Side", "Amount", "Watermark missed", "Late by", "Trade"], rows,
                  "No trade has been too late for the watermark.")


def late_counters(snapshot: dict | None) -> str:
    counters = (snapshot or {}).get("counters", {})
    return (f"{counters.get('corrections', 0):,} corrections · "
            f"{counters.get('late_but_counted', 0):,} late but counted · "
            f"{counters.get('too_late', 0):,} too late to count")
