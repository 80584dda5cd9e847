"""The reconciliation panel: gold against a batch recompute from silver, and a backfill of chosen windows.

Both on demand; a backfill sets final windows to silver's values, so only an operator may ask for
one (dashboard/access.py), and it is logged with their name. A check only reads."""

from __future__ import annotations

import logging
from datetime import date, datetime, timezone

import pandas as pd
from dash import Dash, Input, Output, State, ctx, dcc, html, no_update

from dashboard import access, ids
from dashboard.context import PageContext
from dashboard.data import json_records
from dashboard.formatting import change, feed_table, message_class, money

log = logging.getLogger(__name__)
CHOOSE_WINDOWS = "Choose the windows to backfill first."
NOT_AVAILABLE = "Reconciliation is not available in this run."
NOTHING_YET = "Nothing to reconcile yet: the chart has no windows."
FAILED = "Reconciliation failed: "
# How this panel's error messages open; "Checked 11 windows at ..." and a backfill's report are not.
ERRORS = (CHOOSE_WINDOWS, NOT_AVAILABLE, NOTHING_YET, FAILED, "Not available in this run.", access.REFUSED)


def layout(available: bool) -> html.Section:
    return html.Section(className="panel reconcile", children=[
        html.H2("Reconciliation: streaming gold against a batch recompute from silver"),
        html.P("Silver keeps every valid trade, also those too late for the watermark; the difference per window "
               "should be exactly its too-late trades. Backfill sets chosen final windows to silver's values "
               "and records each as a correction.", className="empty-note"),
        html.Div(className="reconcile-actions", children=[
            html.Button("Check against silver", id=ids.RECONCILE_CHECK, n_clicks=0, disabled=not available),
            html.Button("Backfill selected windows", id=ids.BACKFILL_APPLY, n_clicks=0, disabled=not available),
            html.Span(id=ids.RECONCILE_MESSAGE, className="message" if available else "message error", role="status",
                      children=None if available else "Not available in this run."),
        ]),
        dcc.Checklist(id=ids.BACKFILL_CHOICE, className="backfill-choice", options=[], value=[], inline=True),
        html.Div(id=ids.RECONCILE_TABLE),
    ])


# -- the inputs, checked --------------------------------------------------------------------------
def snapshot_day(snapshot) -> date | None:
    """The trading day of the chart's store snapshot (from its first window), or None."""
    windows = snapshot.get("windows") if isinstance(snapshot, dict) else None
    if not isinstance(windows, list) or not windows or not isinstance(windows[0], dict):
        return None
    start = _instant(windows[0].get("window_start"))
    return start.date() if start is not None else None


def window_starts(chosen) -> list[str] | None:
    """The backfill choice: a non-empty list of ISO window starts with a zone, else None."""
    if not isinstance(chosen, list) or not chosen or not all(isinstance(start, str) for start in chosen):
        return None
    return chosen if all(_instant(start) is not None for start in chosen) else None


def _instant(value) -> pd.Timestamp | None:
    """An ISO-8601 time with a zone as a UTC timestamp, else None."""
    if not isinstance(value, str):
        return None
    try:
        instant = pd.Timestamp(value)
    except (ValueError, OverflowError):
        return None
    if instant is pd.NaT or instant.tzinfo is None:
        return None
    return instant.tz_convert("UTC")


# -- what the panel shows ---------------------------------------------------------------------------
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
             change(w["buy_amount_gold"], w["buy_amount_silver"]),
             change(w["sell_amount_gold"], w["sell_amount_silver"]),
             f"{w['trade_count_gold']:,} → {w['trade_count_silver']:,}",
             f"{w['late_trades']:,} ({money(w['late_buy'])} buy, {money(w['late_sell'])} sell)",
             reconcile_status(w)]
            for w in differing]
    summary = html.P(f"{len(windows) - len(differing)} of {len(windows)} windows of {result['day']} match silver "
                     f"(checked at {result['checked_at'][11:19]} UTC).", className="reconcile-summary")
    return [summary, feed_table(["Window", "Buy gold → silver", "Sell gold → silver", "Trades", "Too-late trades",
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


# -- callbacks --------------------------------------------------------------------------------------
def register(app: Dash, context: PageContext) -> None:
    reconciler = context.reconciler

    @app.callback(Output(ids.RECONCILE_RESULT, "data"), Output(ids.RECONCILE_MESSAGE, "children"),
                  Input(ids.RECONCILE_CHECK, "n_clicks"), Input(ids.BACKFILL_APPLY, "n_clicks"),
                  State(ids.BACKFILL_CHOICE, "value"), State(ids.SNAPSHOT, "data"), prevent_initial_call=True)
    def reconcile(_check, _backfill, chosen, snapshot):
        if reconciler is None:
            return no_update, NOT_AVAILABLE
        user, refused = access.check(access.BACKFILL)
        if ctx.triggered_id == ids.BACKFILL_APPLY and refused:
            return no_update, refused
        day = snapshot_day(snapshot)
        if day is None:
            return None, NOTHING_YET
        starts = None
        if ctx.triggered_id == ids.BACKFILL_APPLY:
            starts = window_starts(chosen)
            if starts is None:
                return no_update, CHOOSE_WINDOWS
        message = ""
        try:
            if starts is not None:
                message = reconciler.backfill(starts).message() + " "
                access.acted(user, f"backfilled {len(starts)} window(s) from {starts[0]}: {message.strip()}")
            frame = reconciler.reconcile(day)
        except Exception as exc:  # noqa: BLE001 - shown on the page; the dashboard keeps running
            log.exception("reconciliation failed")
            return no_update, f"{FAILED}{exc}"
        checked_at = datetime.now(timezone.utc).isoformat()
        result = {"day": day.isoformat(), "checked_at": checked_at,
                  "windows": json_records(frame, ("window_start", "window_end"))}
        return result, message + f"Checked {len(frame)} windows at {checked_at[11:19]} UTC."

    app.callback(Output(ids.RECONCILE_MESSAGE, "className"), Input(ids.RECONCILE_MESSAGE, "children"),
                 prevent_initial_call=True)(lambda text: message_class(text, ERRORS))

    @app.callback(Output(ids.RECONCILE_TABLE, "children"), Output(ids.BACKFILL_CHOICE, "options"),
                  Output(ids.BACKFILL_CHOICE, "value"), Input(ids.RECONCILE_RESULT, "data"))
    def draw_reconciliation(result):
        return reconciliation_table(result), backfill_options(result), []
