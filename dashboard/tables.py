"""The corrections feed and the too-late list, as HTML tables built from the snapshot (pure)."""

from __future__ import annotations

import pandas as pd
from dash import html


def _table(headers: list[str], rows: list[list], empty: str) -> html.Table | html.P:
    if not rows:
        return html.P(empty, className="empty-note")
    return html.Table(className="feed", children=[
        html.Thead(html.Tr([html.Th(h) for h in headers])),
        html.Tbody([html.Tr([html.Td(cell) for cell in row]) for row in rows]),
    ])


def _change(before: float, after: float) -> str:
    return f"{money(before)} → {money(after)}" if before != after else money(after)


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
    rows = [[t["event_time"][11:19], t["window_start"][11:16], t["side"], money(t["amount"]),
             t["watermark"][11:19], f"{t['late_by_seconds'] / 60:,.1f} min", t["trade_id"][:12],
             f"backfilled {t['backfilled_at'][11:19]}" if t.get("backfilled_at") else "no"]
            for t in (snapshot or {}).get("late_trades", [])]
    return _table(["Event time", "Window", "Side", "Amount", "Watermark missed", "Late by", "Trade", "In gold"], rows,
                  "No trade has been too late for the watermark.")


def late_counters(snapshot: dict | None) -> str:
    counters = (snapshot or {}).get("counters", {})
    return (f"{counters.get('corrections', 0):,} corrections · "
            f"{counters.get('late_but_counted', 0):,} late but counted · "
            f"{counters.get('too_late', 0):,} too late to count")


def _signed(value: float) -> str:
    return f"{value:+,.2f}"


def reconcile_status(window: dict) -> str:
    if window["matches"]:
        return "matches silver"
    n = window["late_trades"]
    open_note = "" if window["final"] else " (window still open)"
    if window["explained"]:
        return f"explained by {n} too-late trade{'s' if n != 1 else ''}{open_note}"
    return f"not explained by the too-late trades{open_note}: the stream may still be catching up"


def reconciliation_table(result: dict | None):
    """Windows that differ first, then a count of those that match."""
    if not result:
        return html.P("Press “Check against silver” to compare the chart with a batch recompute.",
                      className="empty-note")
    windows = result["windows"]
    differing = [w for w in windows if not w["matches"]]
    rows = [[w["window_start"][11:16],
             _change(w["buy_amount_gold"], w["buy_amount_silver"]),
             _change(w["sell_amount_gold"], w["sell_amount_silver"]),
             f"{w['trade_count_gold']:,} → {w['trade_count_silver']:,}",
             f"{w['late_trades']:,} ({money(w['late_buy'])} buy, {money(w['late_sell'])} sell)",
             reconcile_status(w)]
            for w in differing]
    summary = html.P(f"{len(windows) - len(differing)} of {len(windows)} windows of {result['day']} match silver "
                     f"(checked at {result['checked_at'][11:19]} UTC).", className="reconcile-summary")
    return [summary, _table(["Window", "Buy gold → silver", "Sell gold → silver", "Trades", "Too-late trades",
                             "Difference"], rows, "Every window matches silver.")]


def backfill_options(result: dict | None) -> list[dict]:
    """A choice per differing window; open windows are shown but cannot be chosen."""
    options = []
    for w in (result or {}).get("windows", []):
        if w["matches"]:
            continue
        label = (f" {w['window_start'][11:16]}: buy {_signed(w['diff_buy_amount'])}, "
                 f"sell {_signed(w['diff_sell_amount'])}" + ("" if w["final"] else " (open)"))
        options.append({"label": label, "value": w["window_start"], "disabled": not w["final"]})
    return options


def _rate(value) -> str:
    return "—" if value is None else f"{value:,.0f}/s"


def health_table(snapshot: dict | None):
    """Per query: state (with the error), batch, rates, duration, watermark. (The stream keeps no
    Spark state, so there are no state rows or watermark drops to show: the too-late list has them.)"""
    status = (snapshot or {}).get("status", {})
    rows = []
    for q in status.get("queries", []):
        state = f"FAILED: {q['error'][:300]}" if q["error"] else "active" if q["active"] else "stopped"
        rows.append([q["name"], state, "—" if q["batch_id"] is None else f"{q['batch_id']:,}",
                     _rate(q["input_rows_per_second"]), _rate(q["processed_rows_per_second"]),
                     "—" if q["batch_duration_ms"] is None else f"{q['batch_duration_ms']:,} ms",
                     (q["watermark"] or "—")[:19].replace("T", " ")])
    table = _table(["Query", "Status", "Batch", "Input", "Processed", "Batch duration", "Watermark"], rows,
                   "No streaming query in this run.")
    producer = status.get("producer")
    line = ("Producer: not available in this run." if producer is None else
            f"Producer {'on' if producer['enabled'] else 'off'} · {producer['rate']:g} trades/s · "
            f"sent {producer['sent']:,} · failed {producer['failed']:,}")
    losses = [html.P(f"Kafka data loss, {q['data_loss']}", className="health-data-loss")
              for q in status.get("queries", []) if q.get("data_loss")]
    return [table, *losses, html.P(line, className="health-producer")]


def lag_table(snapshot: dict | None):
    kafka = (snapshot or {}).get("status", {}).get("kafka", {})
    if kafka.get("error"):
        return html.P(f"Kafka end offsets unavailable: {kafka['error']}", className="empty-note")
    partitions = kafka.get("partitions", [])
    names = sorted({name for row in partitions for name in row["lag"]})
    rows = [[row["partition"], f"{row['end_offset']:,}", *(f"{row['lag'][n]:,}" for n in names)] for row in partitions]
    if rows:
        rows.append(["total", "", *(f"{kafka['total_lag'].get(n, 0):,}" for n in names)])
    return _table(["Partition", "End offset", *(f"Lag {n}" for n in names)], rows, "No Kafka lag measured yet.")


def money(value: float, decimals: int = 2) -> str:
    """$1,234,567.89; negative as −$1,234.00."""
    sign = "−" if value < 0 else ""
    return f"{sign}${abs(value):,.{decimals}f}"


def kpi_cards(snapshot: dict | None) -> list:
    """The day's totals, one card each."""
    k = (snapshot or {}).get("kpis") or {"buy": 0.0, "sell": 0.0, "settlement": 0.0, "trades": 0,
                                         "corrections": 0, "too_late": 0}
    cards = [("Total buy", money(k["buy"], 0), "kpi-buy"), ("Total sell", money(k["sell"], 0), "kpi-sell"),
             ("Settlement", money(k["settlement"], 0), "kpi-settlement"),
             ("Trades counted", f"{k['trades']:,}", ""), ("Late corrections", f"{k['corrections']:,}", ""),
             ("Too late to count", f"{k['too_late']:,}", "")]
    return [html.Div(className=f"kpi {extra}".strip(), children=[html.Span(label, className="kpi-label"),
                                                                html.Span(value, className="kpi-value")])
            for label, value, extra in cards]


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


def quarantine_counts(view: dict | None):
    """Bad records per reason: on the shown day (by Kafka time, UTC) and of all time.
    view: the quarantine store's data (data.quarantine_view)."""
    view = view or {}
    reasons = view.get("reasons", [])
    day = view.get("day")
    rows = [[r["reason"], f"{r['day']:,}" if day else "—", f"{r['total']:,}"] for r in reasons]
    if rows:
        rows.append(["total", f"{view.get('day_total', 0):,}" if day else "—", f"{view.get('total', 0):,}"])
    return _table(["Reason", f"On {day}" if day else "On the shown day", "All time"], rows,
                  "No bad record: every record on the topic was a valid trade.")


def quarantine_list(view: dict | None):
    """The newest bad records (of the chosen reason), their raw value as escaped text."""
    view = view or {}
    rows = [[(r["ingested_at"] or "")[11:19], r["reason"], f"{r['partition']}/{r['offset']:,}",
             (r["kafka_timestamp"] or "—")[:19].replace("T", " "), html.Code(r["value"], className="raw-value")]
            for r in view.get("rows", [])]
    empty = (f"No bad record with reason “{view['reason']}”." if view.get("reason")
             else "No bad record has been quarantined.")
    return _table(["Quarantined (UTC)", "Reason", "Partition/offset", "Kafka time (UTC)", "Raw value"], rows, empty)


def reason_options(view: dict | None) -> list[dict]:
    reasons = (view or {}).get("reasons", [])
    return [{"label": f"{r['reason']} ({r['total']:,})", "value": r["reason"]} for r in reasons]


def exactly_once_table(evidence: dict | None):
    """Per partition: Kafka's end offset and what each table holds; then gold against silver."""
    if not evidence:
        return html.P("Press the button to count what each table holds.", className="empty-note")
    rows = [[p["partition"], _count(p["kafka_end"]), _count(p["bronze"]), _count(p["bronze_doubled"]),
             _count(p["silver"]), _count(p["quarantine"]), _count(p["redeliveries"]), _count(p["counted_to"])]
            for p in evidence["partitions"]]
    table = _table(["Partition", "Kafka end offset", "Bronze records", "Offsets twice", "Silver trades",
                    "Quarantined", "Redeliveries dropped", "Gold counted up to"], rows, "No partition yet.")
    same = evidence["gold_trades"] == evidence["silver_on_time"]
    verdict = (f"Gold counts {evidence['gold_trades']:,} trades; silver has {evidence['silver_on_time']:,} on-time "
               f"trades up to the offsets gold has counted: {'equal' if same else 'NOT equal'}. "
               f"Trades in silver twice: {evidence['silver_doubled']:,}.")
    return html.Div([table, html.P(verdict, className="verdict " + ("ok" if same else "bad"))])


def _count(value) -> str:
    return "-" if value is None else f"{value:,}"
