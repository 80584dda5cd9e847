"""The read-only HTTP API beside the page, behind the same Host guard: /api/status (the health
snapshot), /api/summary (a day's windows as they stood at an instant, from gold's history),
/api/lateness (how many of a day's trades each watermark delay would have left out) and /metrics
(Prometheus's text, streaming/run/metrics.py)."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone
from typing import Callable, Mapping

import flask
import pyarrow as pa

from dashboard.figures import is_final
from dashboard.readers import HistoryReader
from streaming.medallion.history import as_of
from streaming.medallion.lateness import CLOSED, MICROSECOND, LatenessTally
from streaming.run.health import newest_watermark

SUMMARY_PARAMETERS = ("day", "as_of")
LATENESS_USAGE = "GET /api/lateness?day=YYYY-MM-DD (optional: the newest day with data)"
# The what-if's delays (and the run's own, added when not among them).
WHAT_IF_DELAYS = tuple(timedelta(minutes=m) for m in (1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120))
# The distribution's bins, log-spaced: lateness 0 (moved the front) is its own.
LATENESS_BINS = (timedelta(0), timedelta(microseconds=1), timedelta(seconds=1), timedelta(seconds=10),
                 timedelta(minutes=1), timedelta(minutes=5), timedelta(minutes=15), timedelta(minutes=30),
                 timedelta(hours=1), timedelta(hours=2), timedelta(hours=6))
SUMMARY_USAGE = ("GET /api/summary?day=YYYY-MM-DD&as_of=ISO-8601 (both optional: the newest day with data, "
                 "and now)")
# A '+' of an offset sent unencoded in a query string arrives as a space.
_SPACED_OFFSET = re.compile(r" (\d\d(:?\d\d)?)$")


class BadRequest(ValueError):
    """A parameter the API cannot use; its message says which and what it takes."""


def query_parameters(args: Mapping[str, list[str]], names: tuple[str, ...], usage: str) -> dict[str, str]:
    """Each of a query string's parameters (name -> its values) given once and among `names`;
    BadRequest naming the parameter and ending with `usage` otherwise."""
    unknown = sorted(set(args) - set(names))
    if unknown:
        raise BadRequest(f"Unknown parameter {unknown[0]!r}: the API takes {' and '.join(names)}. Usage: {usage}")
    for name, values in args.items():
        if len(values) > 1:
            raise BadRequest(f"{name} is given {len(values)} times: give it once. Usage: {usage}")
    return {name: values[0].strip() for name, values in args.items()}


def parse_day(text: str, usage: str) -> str:
    """A day as YYYY-MM-DD, one with a whole day of data after it (not date.max); BadRequest otherwise."""
    try:
        if len(text) != 10 or date.fromisoformat(text) == date.max:
            raise ValueError(text)
    except ValueError:
        raise BadRequest(f"day must be a date as YYYY-MM-DD, such as 2026-03-02; got {text!r}. "
                         f"Usage: {usage}") from None
    return text


def summary_parameters(args: Mapping[str, list[str]]) -> tuple[str | None, datetime | None]:
    """(day, as_of) of /api/summary's query string, each None when not given; BadRequest otherwise."""
    given = query_parameters(args, SUMMARY_PARAMETERS, SUMMARY_USAGE)
    day = parse_day(given["day"], SUMMARY_USAGE) if "day" in given else None
    return day, parse_instant(given["as_of"]) if "as_of" in given else None


def lateness_parameters(args: Mapping[str, list[str]]) -> str | None:
    """The day of /api/lateness's query string, or None; BadRequest for anything else."""
    given = query_parameters(args, ("day",), LATENESS_USAGE)
    return parse_day(given["day"], LATENESS_USAGE) if "day" in given else None


def lateness_points(delay: timedelta) -> tuple[int, ...]:
    """The lateness figures, in microseconds, the what-if counts trades at: its delays, the run's,
    the bins' edges and CLOSED (LatenessReader tallies each day's trades at them)."""
    return tuple(sorted({*(d // MICROSECOND for d in (*WHAT_IF_DELAYS, delay, *LATENESS_BINS)), CLOSED}))


def lateness_json(tally: LatenessTally, day: str | None, delay: timedelta) -> dict:
    """The answer of /api/lateness from a day's tally at lateness_points(delay): for each delay of
    the what-if (and the run's), how many of the day's trades would have been too late, and the
    distribution of their lateness. `not_judged`: trades without a lateness (written before it was
    stamped, and no ledger range holds them); `closed_when_quiet`: trades for windows an idle close
    had made final, too late at every delay (and in no bin)."""
    delays = sorted({*WHAT_IF_DELAYS, delay} - {timedelta(0)})
    counts = [tally.too_late(d // MICROSECOND) for d in delays]
    closed = tally.too_late(CLOSED)
    edges = [tally.too_late(low // MICROSECOND) - closed for low in LATENESS_BINS]
    judged = tally.judged
    return {
        "day": day, "watermark_s": delay.total_seconds(), "trades": judged,
        "not_judged": tally.not_judged, "closed_when_quiet": closed,
        "curve": [{"delay_s": d.total_seconds(), "too_late": n, "share": n / judged if judged else 0.0}
                  for d, n in zip(delays, counts)],
        "distribution": [{"from_s": low.total_seconds(), "to_s": high.total_seconds() if high else None,
                          "trades": at_least - beyond}
                         for low, high, at_least, beyond in zip(LATENESS_BINS, (*LATENESS_BINS[1:], None), edges,
                                                                (*edges[1:], 0))],
    }


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


def summary_json(ordered_day: pa.Table, day: str | None, instant: datetime, watermark: datetime | None = None) -> dict:
    """The answer of /api/summary: the day's windows as they stood at `instant`, from the day's
    history in change order (HistoryReader.read); `final`: the window ends at or before the
    watermark now (None: none yet)."""
    rows = as_of(ordered_day, instant).to_pylist()
    return {"day": day, "as_of": _iso(instant), "windows": [
        {"window_start": _iso(row["window_start"]), "window_end": _iso(row["window_end"]),
         "buy": row["buy_amount"], "sell": row["sell_amount"], "net": row["settlement_amount"],
         "trades": row["trade_count"], "changed_at": _iso(row["changed_at"]), "cause": row["cause"],
         "final": is_final(row["window_end"], watermark)}
        for row in rows]}


def register(server: flask.Flask, status: Callable[[], dict], history: HistoryReader,
             newest_day: Callable[[], str | None], lateness: Callable[[str | None], dict] | None = None) -> None:
    """lateness: a day (None: none yet) -> /api/lateness's answer (PageContext.lateness_of)."""
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
        return flask.jsonify(summary_json(history.read(day), day, instant or datetime.now(timezone.utc),
                                          newest_watermark(status())))

    @server.route("/api/lateness")
    def api_lateness():
        if lateness is None:
            return flask.jsonify({"error": "lateness is not available on this page"}), 404
        try:
            day = lateness_parameters(flask.request.args.to_dict(flat=False)) or newest_day()
        except BadRequest as bad:
            return flask.jsonify({"error": str(bad)}), 400
        return flask.jsonify(lateness(day))


# What /metrics serves: (Prometheus text, its Content-Type), made at each scrape.
MetricsScrape = Callable[[], tuple[bytes, str]]


def register_metrics(server: flask.Flask, scrape: MetricsScrape) -> None:
    """GET /metrics on this server (the dashboard's, or a bare one with --no-dashboard)."""
    @server.route("/metrics")
    def metrics():
        body, content_type = scrape()
        return flask.Response(body, mimetype=None, content_type=content_type)
