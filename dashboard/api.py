"""The read-only HTTP API beside the page, behind the same Host guard: /api/status (the health
snapshot), /api/summary (a day's windows as they stood at an instant, from gold's history) and
/metrics (Prometheus's text, streaming/run/metrics.py)."""

from __future__ import annotations

import re
from datetime import date, datetime, timezone
from typing import Callable, Mapping

import flask
import pyarrow as pa

from dashboard.readers import HistoryReader
from streaming.medallion.history import as_of

SUMMARY_PARAMETERS = ("day", "as_of")
SUMMARY_USAGE = ("GET /api/summary?day=YYYY-MM-DD&as_of=ISO-8601 (both optional: the newest day with data, "
                 "and now)")
# A '+' of an offset sent unencoded in a query string arrives as a space.
_SPACED_OFFSET = re.compile(r" (\d\d(:?\d\d)?)$")


class BadRequest(ValueError):
    """A parameter the API cannot use; its message says which and what it takes."""


def summary_parameters(args: Mapping[str, list[str]]) -> tuple[str | None, datetime | None]:
    """(day, as_of) from a query string's parameters (each name -> its values); BadRequest
    naming the parameter for anything else."""
    unknown = sorted(set(args) - set(SUMMARY_PARAMETERS))
    if unknown:
        raise BadRequest(f"Unknown parameter {unknown[0]!r}: the API takes day and as_of. Usage: {SUMMARY_USAGE}")
    for name, values in args.items():
        if len(values) > 1:
            raise BadRequest(f"{name} is given {len(values)} times: give it once. Usage: {SUMMARY_USAGE}")
    day = args["day"][0].strip() if "day" in args else None
    if day is not None:
        try:
            if len(day) != 10:
                raise ValueError(day)
            day = date.fromisoformat(day).isoformat()
        except ValueError:
            raise BadRequest(f"day must be a date as YYYY-MM-DD, such as 2026-03-02; got {day!r}.") from None
    return day, parse_instant(args["as_of"][0]) if "as_of" in args else None


def parse_instant(text: str) -> datetime:
    """An ISO-8601 time as UTC (one without an offset is UTC); BadRequest otherwise."""
    text = _SPACED_OFFSET.sub(r"+\1", text.strip())
    try:
        instant = datetime.fromisoformat(text)
    except ValueError:
        raise BadRequest(f"as_of must be an ISO-8601 time, such as 2026-03-02T10:42:00Z; got {text!r}.") from None
    return instant.replace(tzinfo=timezone.utc) if instant.tzinfo is None else instant.astimezone(timezone.utc)


def _iso(value: datetime) -> str:
    return value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def summary_json(ordered_day: pa.Table, day: str | None, instant: datetime) -> dict:
    """The answer of /api/summary: the day's windows as they stood at `instant`, from the day's
    history in change order (HistoryReader.read)."""
    rows = as_of(ordered_day, instant).to_pylist()
    return {"day": day, "as_of": _iso(instant), "windows": [
        {"window_start": _iso(row["window_start"]), "window_end": _iso(row["window_end"]),
         "buy": row["buy_amount"], "sell": row["sell_amount"], "net": row["settlement_amount"],
         "trades": row["trade_count"], "changed_at": _iso(row["changed_at"]), "cause": row["cause"]}
        for row in rows]}


def register(server: flask.Flask, status: Callable[[], dict], history: HistoryReader,
             newest_day: Callable[[], str | None]) -> None:
    @server.route("/api/status")
    def api_status():
        return flask.jsonify(status())

    @server.route("/api/summary")
    def api_summary():
        try:
            day, instant = summary_parameters(flask.request.args.to_dict(flat=False))
        except BadRequest as bad:
            return flask.jsonify({"error": str(bad)}), 400
        day = day or newest_day()
        return flask.jsonify(summary_json(history.read(day), day, instant or datetime.now(timezone.utc)))


# What /metrics serves: (Prometheus text, its Content-Type), made at each scrape.
MetricsScrape = Callable[[], tuple[bytes, str]]


def register_metrics(server: flask.Flask, scrape: MetricsScrape) -> None:
    """GET /metrics on this server (the dashboard's, or a bare one with --no-dashboard)."""
    @server.route("/metrics")
    def metrics():
        body, content_type = scrape()
        return flask.Response(body, mimetype=None, content_type=content_type)
