"""CSV exports of the shown day: its windows with running totals, and its corrections. Pure:
snapshot records in, CSV text out."""

from __future__ import annotations

import csv
import io

from dashboard.figures import running_totals, window_rows

WINDOW_HEADER = ["window_start", "window_end", "buy", "sell", "settlement", "trade_count", "revision",
                 "running_buy", "running_sell", "running_settlement"]
CORRECTION_HEADER = ["corrected_at", "window_start", "buy_before", "buy_after", "sell_before", "sell_after",
                     "settlement_before", "settlement_after", "trade_count_before", "trade_count_after",
                     "late_trades", "batch_id"]
CORRECTION_FIELDS = ["corrected_at", "window_start", "buy_amount_before", "buy_amount_after", "sell_amount_before",
                     "sell_amount_after", "settlement_amount_before", "settlement_amount_after", "trade_count_before",
                     "trade_count_after", "late_trades", "batch_id"]


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
    return _csv(WINDOW_HEADER, [
        [w["window_start"], w["window_end"], w["buy_amount"], w["sell_amount"], w["settlement_amount"],
         w["trade_count"], w["revision"], t["buy_amount"], t["sell_amount"], t["settlement_amount"]]
        for w, t in zip(rows, totals)])


def corrections_csv(corrections: list[dict]) -> str:
    """Correction records (json_records of gold/corrections), oldest first as given."""
    return _csv(CORRECTION_HEADER, [["" if c.get(f) is None else c[f] for f in CORRECTION_FIELDS]
                                    for c in corrections])


def export_name(day: str, what: str) -> str:
    """trade-summary-2026-03-02-windows.csv"""
    return f"trade-summary-{day}-{what}.csv"
