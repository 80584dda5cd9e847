"""The exactly-once panel: on demand, what each table holds per Kafka partition, and gold against silver.

Kafka's end offsets against bronze, silver and quarantine; gold's trade count against silver's
on-time trades up to the offsets gold has counted."""

from __future__ import annotations

import logging
from datetime import datetime, timezone

from dash import Dash, Input, Output, html, no_update

from dashboard import ids
from dashboard.context import PageContext
from dashboard.data import exactly_once_evidence
from dashboard.formatting import feed_table

log = logging.getLogger(__name__)


def layout() -> html.Section:
    return html.Section(className="panel exactly-once", children=[
        html.H2("Exactly once: what each table holds"),
        html.P("Every Kafka offset once in bronze; every record in silver or quarantine, or dropped as a "
               "redelivery of a trade silver has; gold's trade count equal to silver's on-time trades.",
               className="empty-note"),
        html.Div(className="reconcile-actions", children=[
            html.Button("Count now", id=ids.EXACTLY_ONCE_CHECK, n_clicks=0),
            html.Span(id=ids.EXACTLY_ONCE_MESSAGE, className="control-message", role="status"),
        ]),
        html.Div(id=ids.EXACTLY_ONCE_TABLE),
    ])


def _count(value) -> str:
    return "-" if value is None else f"{value:,}"


def exactly_once_table(evidence: dict | None):
    """Per partition: Kafka's end offset and what each table holds; then gold against silver."""
    if not evidence:
        return html.P("Press the button to count what each table holds.", className="empty-note")
    rows = [[p["partition"], _count(p["kafka_end"]), _count(p["bronze"]), _count(p["bronze_doubled"]),
             _count(p["silver"]), _count(p["quarantine"]), _count(p["redeliveries"]), _count(p["counted_to"])]
            for p in evidence["partitions"]]
    table = feed_table(["Partition", "Kafka end offset", "Bronze records", "Offsets twice", "Silver trades",
                        "Quarantined", "Redeliveries dropped", "Gold counted up to"], rows, "No partition yet.")
    same = evidence["gold_trades"] == evidence["silver_on_time"]
    verdict = (f"Gold counts {evidence['gold_trades']:,} trades; silver has {evidence['silver_on_time']:,} on-time "
               f"trades up to the offsets gold has counted: {'equal' if same else 'NOT equal'}. "
               f"Trades in silver twice: {evidence['silver_doubled']:,}.")
    return html.Div([table, html.P(verdict, className="verdict " + ("ok" if same else "bad"))])


def kafka_end_offsets(status: dict | None) -> dict[str, int]:
    """"topic:partition" -> end offset, from the health snapshot's Kafka part."""
    kafka = (status or {}).get("kafka") or {}
    return {p["partition"]: p["end_offset"] for p in kafka.get("partitions", [])
            if isinstance(p, dict) and "partition" in p and "end_offset" in p}


def register(app: Dash, context: PageContext) -> None:
    @app.callback(Output(ids.EXACTLY_ONCE_TABLE, "children"), Output(ids.EXACTLY_ONCE_MESSAGE, "children"),
                  Input(ids.EXACTLY_ONCE_CHECK, "n_clicks"), prevent_initial_call=True)
    def count_exactly_once(_clicks):
        if context.lake is None:
            return no_update, "Not available in this run."
        ends = kafka_end_offsets(context.status())
        try:
            evidence = exactly_once_evidence(context.lake, ends)
        except Exception as exc:  # noqa: BLE001 - shown on the page; the dashboard keeps running
            log.exception("exactly-once count failed")
            return no_update, f"Counting failed: {exc}"
        return exactly_once_table(evidence), f"Counted at {datetime.now(timezone.utc):%H:%M:%S} UTC."
