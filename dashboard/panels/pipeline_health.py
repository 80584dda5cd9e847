"""The pipeline health panel: each query's state, the producer's counters, Kafka's lag and its sparkline."""

from __future__ import annotations

from dash import Dash, Input, Output, State, dcc, html

from dashboard import figures, ids
from dashboard.context import Drawing, PageContext
from dashboard.formatting import markdown_table, markdown_text


def layout() -> html.Section:
    """The tables are Markdown and the lines text: a push that changes a cell makes no component anew."""
    return html.Section(className="panel health", children=[
        html.H2("Pipeline health"),
        dcc.Markdown(id=ids.HEALTH_QUERIES, className="feed-md"),
        html.Div(id=ids.HEALTH_NOTES),
        html.P(id=ids.HEALTH_PRODUCER, className="health-producer"),
        html.Div(className="health-lag", children=[
            dcc.Markdown(id=ids.KAFKA_LAG, className="feed-md"),
            dcc.Graph(id=ids.LAG_SPARKLINE, className="sparkline", config={"displayModeBar": False}),
        ]),
    ])


def _rate(value) -> str:
    return "—" if value is None else f"{value:,.0f}/s"


def queries_table(snapshot: dict | None) -> str:
    """Per query: state (with the error; "resuming from its checkpoint" until its first batch
    after a restart, its lag and watermark the checkpoint's), batch, rates, duration, watermark.
    (The stream keeps no Spark state, so there are no state rows or watermark drops to show: the
    too-late list has them.)"""
    rows = []
    for q in (snapshot or {}).get("status", {}).get("queries", []):
        state = f"FAILED: {q['error'][:300]}" if q["error"] else "active" if q["active"] else "stopped"
        if q.get("resumed") and not q["error"]:  # no batch since the restart: its checkpoint's figures
            state += ", resuming from its checkpoint"
        rows.append([q["name"], state, "—" if q["batch_id"] is None else f"{q['batch_id']:,}",
                     _rate(q["input_rows_per_second"]), _rate(q["processed_rows_per_second"]),
                     "—" if q["batch_duration_ms"] is None else f"{q['batch_duration_ms']:,} ms",
                     (q["watermark"] or "—")[:19].replace("T", " ")])
    return markdown_table(["Query", "Status", "Batch", "Input", "Processed", "Batch duration", "Watermark"], rows,
                          "No streaming query in this run.")


def health_notes(snapshot: dict | None) -> list:
    """Kafka's data loss and the embedded broker's restarts, a line each; none most of the time."""
    status = (snapshot or {}).get("status", {})
    losses = [f"Kafka data loss, {q['data_loss']}" for q in status.get("queries", []) if q.get("data_loss")]
    losses += [f"Records Kafka removed before they were read: {q['records_lost']:,} in all (the batch "
               "ledger counts them per batch)." for q in status.get("queries", [])
               if q.get("records_lost") and not q.get("data_loss")]
    return [html.P(text, className="health-data-loss") for text in [*losses, *broker_lines(status.get("broker"))]]


def producer_line(snapshot: dict | None) -> str:
    producer = (snapshot or {}).get("status", {}).get("producer")
    return ("Producer: not available in this run." if producer is None else
            f"Producer {'on' if producer['enabled'] else 'off'} · {producer['rate']:g} trades/s · "
            f"sent {producer['sent']:,} · failed {producer['failed']:,}")


def broker_lines(broker: dict | None) -> list[str]:
    """The embedded broker's newest restart ('broker restarted at 18:02:11 (exit signal 9)'), or
    that the broker another command started has ended; nothing for a broker that never ended."""
    if not broker:
        return []
    lines = []
    if broker.get("restarts"):
        count = broker["restart_count"]
        more = f" · {count:,} restarts in this run" if count > 1 else ""
        lines.append(f"Kafka: {broker['restarts'][-1]['said']}{more}")
    if broker.get("state") == "ended":
        lines.append("Kafka: the embedded broker another command started has ended; this app does not restart it.")
    return lines


def lag_table(snapshot: dict | None) -> str:
    kafka = (snapshot or {}).get("status", {}).get("kafka", {})
    if kafka.get("error"):
        return markdown_text(f"Kafka end offsets unavailable: {kafka['error']}")
    partitions = kafka.get("partitions", [])
    names = sorted({name for row in partitions for name in row["lag"]})
    rows = [[row["partition"], f"{row['end_offset']:,}", *(f"{row['lag'][n]:,}" for n in names)] for row in partitions]
    if rows:
        rows.append(["total", "", *(f"{kafka['total_lag'].get(n, 0):,}" for n in names)])
    return markdown_table(["Partition", "End offset", *(f"Lag {n}" for n in names)], rows, "No Kafka lag measured yet.")


def health_panel(snapshot: dict | None) -> tuple:
    return (queries_table(snapshot), health_notes(snapshot), producer_line(snapshot), lag_table(snapshot),
            figures.lag_sparkline(snapshot))


DRAWING = Drawing("health", ((ids.HEALTH_QUERIES, "children"), (ids.HEALTH_NOTES, "children"),
                             (ids.HEALTH_PRODUCER, "children"), (ids.KAFKA_LAG, "children"),
                             (ids.LAG_SPARKLINE, "figure")), health_panel, tab=ids.TAB_HEALTH)


def register(app: Dash, context: PageContext) -> None:
    @app.callback(*(Output(i, prop) for i, prop in DRAWING.outputs), Input(ids.DRAW, "data"),
                  State(ids.SNAPSHOT, "data"), prevent_initial_call=True)
    def draw_health(_draw, snapshot):
        return context.drawn(DRAWING, snapshot)
