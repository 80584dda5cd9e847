"""The export buttons: the shown day's windows (with running totals, as of the time machine's
instant while it shows one) or its corrections, as CSV downloads.

The CSV text is built by pure functions: snapshot records in, CSV text out."""

from __future__ import annotations

import csv
import io
from datetime import datetime

from dash import Dash, Input, Output, State, ctx, dcc, html, no_update

from dashboard import ids
from dashboard.context import PageContext
from dashboard.data import json_records, on_day
from dashboard.figures import finality, running_totals, window_rows
from dashboard.formatting import message_class
from dashboard.inputs import store_day
from dashboard.panels.time_slider import shown_instant

NOTHING_TO_EXPORT = "Nothing to export yet: the chart has no trading day."
WINDOW_HEADER = ["window_start", "window_end", "buy", "sell", "settlement", "trade_count", "revision",
                 "running_buy", "running_sell", "running_settlement", "final"]
CORRECTION_HEADER = ["corrected_at", "window_start", "buy_before", "buy_after", "sell_before", "sell_after",
                     "settlement_before", "settlement_after", "trade_count_before", "trade_count_after",
                     "late_trades", "batch_id"]
CORRECTION_FIELDS = ["corrected_at", "window_start", "buy_amount_before", "buy_amount_after", "sell_amount_before",
                     "sell_amount_after", "settlement_amount_before", "settlement_amount_after", "trade_count_before",
                     "trade_count_after", "late_trades", "batch_id"]


def layout() -> html.Div:
    """CSV downloads of the shown day."""
    return html.Div(className="export-actions", children=[
        html.Button("Download windows (CSV)", id=ids.EXPORT_WINDOWS, n_clicks=0),
        html.Button("Download corrections (CSV)", id=ids.EXPORT_CORRECTIONS, n_clicks=0),
        html.Span(id=ids.EXPORT_MESSAGE, className="message", role="status"),
        dcc.Download(id=ids.DOWNLOAD_WINDOWS),
        dcc.Download(id=ids.DOWNLOAD_CORRECTIONS),
    ])


def _csv(header: list[str], rows) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def windows_csv(snapshot: dict | None) -> str:
    """The snapshot's windows, oldest first, with the running totals of buy, sell and settlement."""
    rows = window_rows(snapshot)
    totals = running_totals(rows)
    judged = finality(snapshot, rows)  # None: not known at an earlier instant
    final: list[bool | None] = list(judged) if judged is not None else [None] * len(rows)
    return _csv(WINDOW_HEADER, [
        [w["window_start"], w["window_end"], w["buy_amount"], w["sell_amount"], w["settlement_amount"],
         w["trade_count"], w["revision"], t["buy_amount"], t["sell_amount"], t["settlement_amount"],
         "" if done is None else str(done).lower()]
        for w, t, done in zip(rows, totals, final)])


def corrections_csv(corrections: list[dict]) -> str:
    """Correction records (json_records of gold/corrections), oldest first as given."""
    return _csv(CORRECTION_HEADER, [["" if c.get(f) is None else c[f] for f in CORRECTION_FIELDS]
                                    for c in corrections])


def export_name(day: str, what: str, at: datetime | None = None) -> str:
    """trade-summary-2026-03-02-windows.csv; as of an instant (UTC):
    trade-summary-2026-03-02-windows-as-of-10-42-00.csv"""
    return f"trade-summary-{day}-{what}{'' if at is None else f'-as-of-{at:%H-%M-%S}'}.csv"


def windows_export(live: dict | None, past: dict | None) -> tuple[str, str] | None:
    """(CSV text, file name) of the windows the chart shows: the time machine's snapshot at an
    instant while it shows one, else the live one; None without a day."""
    at = shown_instant(past)
    snapshot = past if at is not None else live
    day = store_day(snapshot)
    if day is None:
        return None
    return windows_csv(snapshot), export_name(day, "windows", at)


def register(app: Dash, context: PageContext) -> None:
    app.callback(Output(ids.EXPORT_MESSAGE, "className"), Input(ids.EXPORT_MESSAGE, "children"),
                 prevent_initial_call=True)(lambda text: message_class(text, (NOTHING_TO_EXPORT,)))

    @app.callback(Output(ids.DOWNLOAD_WINDOWS, "data"), Output(ids.DOWNLOAD_CORRECTIONS, "data"),
                  Output(ids.EXPORT_MESSAGE, "children"), Input(ids.EXPORT_WINDOWS, "n_clicks"),
                  Input(ids.EXPORT_CORRECTIONS, "n_clicks"), State(ids.SNAPSHOT, "data"), State(ids.AS_OF, "data"),
                  prevent_initial_call=True)
    def export_csv(_windows, _corrections, snapshot, past):
        """The shown day's windows (with running totals; as of the time machine's instant while it
        shows one) or its corrections, as a CSV download."""
        day = store_day(snapshot)
        if day is None:
            return no_update, no_update, NOTHING_TO_EXPORT
        if ctx.triggered_id == ids.EXPORT_CORRECTIONS:
            # The store holds only the feed's newest corrections: the export reads the day's whole.
            frame = on_day(context.readers.corrections.read(day), day)
            frame = frame.sort_values(["corrected_at", "window_start"], kind="stable")
            content = corrections_csv(json_records(frame, ("window_start", "corrected_at")))
            return no_update, dcc.send_string(content, export_name(day, "corrections"), "text/csv"), ""
        export = windows_export(snapshot, past)
        if export is None:
            return no_update, no_update, NOTHING_TO_EXPORT
        content, name = export
        return dcc.send_string(content, name, "text/csv"), no_update, ""
