"""The quarantine panel: bad records per reason (the shown day's and all time) and the newest of them.

Filterable by reason; its data comes on the data tick into a store of its own."""

from __future__ import annotations

from dash import Dash, Input, Output, dcc, html

from dashboard import ids
from dashboard.context import PageContext
from dashboard.formatting import feed_table
from dashboard.inputs import choice


def layout() -> html.Section:
    """Bad records: counts per reason, and the newest ones, filterable by reason."""
    return html.Section(className="panel quarantine", children=[
        html.H2("Quarantine: records that are not valid trades"),
        html.Div(id=ids.QUARANTINE_COUNTS),
        html.Label(className="quarantine-filter", children=[
            "Newest bad records of ",
            dcc.Dropdown(id=ids.QUARANTINE_REASON, placeholder="every reason", options=[], clearable=True,
                         searchable=False, className="picker wide-picker")]),
        html.Div(id=ids.QUARANTINE_LIST),
    ])


def quarantine_view(counts: list[dict], newest: list[dict], day: str | None, reason: str | None) -> dict:
    """The panel's store: per reason its count on `day` (the Kafka time's UTC day) and of all
    time, most frequent first; the newest records; the reason shown."""
    by_reason: dict[str, list[int]] = {}
    for row in counts:
        totals = by_reason.setdefault(row["reason"] or "(no reason)", [0, 0])
        totals[1] += int(row["n"])
        if day is not None and row["day"] == day:
            totals[0] += int(row["n"])
    reasons = [{"reason": name, "day": on, "total": total}
               for name, (on, total) in sorted(by_reason.items(), key=lambda item: (-item[1][1], item[0]))]
    return {"day": day, "reason": reason, "reasons": reasons, "rows": newest,
            "day_total": sum(r["day"] for r in reasons), "total": sum(r["total"] for r in reasons)}


def counts_table(view: dict | None):
    """Bad records per reason: on the shown day (by Kafka time, UTC) and of all time."""
    view = view or {}
    reasons = view.get("reasons", [])
    day = view.get("day")
    rows = [[r["reason"], f"{r['day']:,}" if day else "—", f"{r['total']:,}"] for r in reasons]
    if rows:
        rows.append(["total", f"{view.get('day_total', 0):,}" if day else "—", f"{view.get('total', 0):,}"])
    return feed_table(["Reason", f"On {day}" if day else "On the shown day", "All time"], rows,
                      "No bad record: every record on the topic was a valid trade.")


def newest_list(view: dict | None):
    """The newest bad records (of the chosen reason), their raw value as escaped text."""
    view = view or {}
    rows = [[(r["ingested_at"] or "")[11:19], r["reason"], f"{r['partition']}/{r['offset']:,}",
             (r["kafka_timestamp"] or "—")[:19].replace("T", " "), html.Code(r["value"], className="raw-value")]
            for r in view.get("rows", [])]
    empty = (f"No bad record with reason “{view['reason']}”." if view.get("reason")
             else "No bad record has been quarantined.")
    return feed_table(["Quarantined (UTC)", "Reason", "Partition/offset", "Kafka time (UTC)", "Raw value"], rows,
                      empty)


def reason_options(view: dict | None) -> list[dict]:
    reasons = (view or {}).get("reasons", [])
    return [{"label": f"{r['reason']} ({r['total']:,})", "value": r["reason"]} for r in reasons]


def register(app: Dash, context: PageContext) -> None:
    @app.callback(Output(ids.QUARANTINE_STORE, "data"), Input(ids.TICK, "n_intervals"),
                  Input(ids.DAY_PICKER, "value"), Input(ids.QUARANTINE_REASON, "value"))
    def refresh_quarantine(_tick, day, reason):
        """The panel's data, on the same tick, into its own store: counts per reason (the shown
        day's and all time) and the newest bad records. Read from the table only when its
        version has changed (QuarantineReader)."""
        day, reason = choice(day), choice(reason)
        shown = context.shown_day(day)
        counts, newest = context.quarantine.read(reason) if context.quarantine is not None else ([], [])
        return quarantine_view(counts, newest, shown, reason)

    @app.callback(Output(ids.QUARANTINE_COUNTS, "children"), Output(ids.QUARANTINE_LIST, "children"),
                  Output(ids.QUARANTINE_REASON, "options"), Input(ids.QUARANTINE_STORE, "data"))
    def draw_quarantine(view):
        view = view if isinstance(view, dict) else None
        return counts_table(view), newest_list(view), reason_options(view)
