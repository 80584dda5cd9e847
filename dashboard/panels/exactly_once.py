"""The exactly-once panel: on demand, what each table holds per Kafka partition, and gold against silver.

Every figure is taken at one point: up to the offsets gold's ledger had recorded when counted, so
no row mixes moments (a Kafka end offset sampled before bronze was counted could read lower).
Bronze's offsets against those offsets, bronze's records against silver and quarantine; gold's
trade count against silver's on-time trades."""

from __future__ import annotations

import logging

from dash import Dash, Input, Output, html, no_update

from dashboard import ids
from dashboard.context import PageContext
from dashboard.data import exactly_once_evidence
from dashboard.formatting import feed_table

log = logging.getLogger(__name__)

HEADERS = ["Partition", "Read up to offset", "Bronze records", "Records twice", "Offsets given out again",
           "Offsets not in bronze", "Silver trades", "Quarantined", "Redeliveries dropped"]


def layout() -> html.Section:
    return html.Section(className="panel exactly-once", children=[
        html.H2("Exactly once: what each table holds"),
        html.P("Counted at one point: up to the offset of each partition that gold's ledger has recorded as read. "
               "Below it, every record once in bronze; every record in silver or quarantine, or dropped as a "
               "redelivery of a trade silver has; gold's trade count equal to silver's on-time trades. Kafka's "
               "end offsets and the lag are under Pipeline health.", className="empty-note"),
        html.Div(className="reconcile-actions", children=[
            html.Button("Count now", id=ids.EXACTLY_ONCE_CHECK, n_clicks=0),
            html.Span(id=ids.EXACTLY_ONCE_MESSAGE, className="control-message", role="status"),
        ]),
        html.Div(id=ids.EXACTLY_ONCE_TABLE),
    ])


def _count(value) -> str:
    return "-" if value is None else f"{value:,}"


def counted_when(evidence: dict) -> str:
    """'Figures at 10:31:05 UTC: ...', the point every figure of the count was taken at."""
    return (f"Figures at {evidence['at']:%H:%M:%S} UTC: every table up to the offsets gold's ledger had recorded "
            "as read then; records read since are in the next count.")


def exactly_once_table(evidence: dict | None):
    """Per partition: the offset read up to and what each table holds below it; then gold against silver."""
    if not evidence:
        return html.P("Press the button to count what each table holds.", className="empty-note")
    rows = [[p["partition"], _count(p["counted_to"]), _count(p["bronze"]), _count(p["bronze_doubled"]),
             _count(p["offsets_reused"]), _count(p["not_in_bronze"]), _count(p["silver"]), _count(p["quarantine"]),
             _count(p["redeliveries"])] for p in evidence["partitions"]]
    table = feed_table(HEADERS, rows, "No partition yet.")
    same = evidence["gold_trades"] == evidence["silver_on_time"]
    twice = sum(p["bronze_doubled"] for p in evidence["partitions"])
    verdict = (f"Gold counts {evidence['gold_trades']:,} trades; silver has {evidence['silver_on_time']:,} on-time "
               f"trades up to the offsets gold has counted: {'equal' if same else 'NOT equal'}. "
               f"Records in bronze twice: {twice:,}. Trades in silver twice: {evidence['silver_doubled']:,}.")
    ok = same and twice == 0 and evidence["silver_doubled"] == 0
    return html.Div([html.P(counted_when(evidence), className="empty-note"), table,
                     html.P(verdict, className="verdict " + ("ok" if ok else "bad"))])


def kafka_partitions(status: dict | None) -> list[str]:
    """The "topic:partition"s of the health snapshot's Kafka part (a partition never read yet is listed too)."""
    kafka = (status or {}).get("kafka") or {}
    return [p["partition"] for p in kafka.get("partitions", []) if isinstance(p, dict) and "partition" in p]


def register(app: Dash, context: PageContext) -> None:
    @app.callback(Output(ids.EXACTLY_ONCE_TABLE, "children"), Output(ids.EXACTLY_ONCE_MESSAGE, "children"),
                  Input(ids.EXACTLY_ONCE_CHECK, "n_clicks"), prevent_initial_call=True)
    def count_exactly_once(_clicks):
        if context.lake is None:
            return no_update, "Not available in this run."
        try:
            evidence = exactly_once_evidence(context.lake, kafka_partitions(context.status()))
        except Exception as exc:  # noqa: BLE001 - shown on the page; the dashboard keeps running
            log.exception("exactly-once count failed")
            return no_update, f"Counting failed: {exc}"
        return exactly_once_table(evidence), f"Counted at {evidence['at']:%H:%M:%S} UTC."
