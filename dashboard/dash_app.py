"""The Dash app: create_app() wires layout, data access, callbacks and the live push together."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path
from typing import Callable, Iterable
from urllib.parse import urlsplit

import flask
from dash import Dash

from dashboard import access, api, push
from dashboard.callbacks import register_callbacks
from dashboard.context import PageContext, PageReaders
from dashboard.layout import build_layout
from dashboard.readers import LatenessReader, QuarantineReader, SilverFilterValues
from streaming.config import Settings
from streaming.lake.store import Lake
from streaming.run.users import Logins

ASSETS = Path(__file__).resolve().parent.parent / "assets"
# The names the dashboard always answers to, on any port.
LOCAL_HOSTS = ("127.0.0.1", "localhost")
# Bind addresses that mean "every interface": not a name a browser would send as the Host.
WILDCARD_ADDRESSES = frozenset({"", "0.0.0.0", "::", "[::]"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def create_app(lake: Lake | str | Path, refresh_ms: int = 2000, simulator=None,
               health: Callable[[], dict] | None = None, reconciler=None,
               allowed_hosts: Iterable[str] = LOCAL_HOSTS, logins: Logins | None = None,
               max_pages: int | None = None, watermark: timedelta | None = None) -> Dash:
    """lake: the pipeline's tables (a Lake, or its data dir). simulator, health (a
    HealthMonitor's snapshot) and reconciler are optional: without them the page shows the
    tables, and the controls that need them say they are not available.
    allowed_hosts: host names (or addresses) the dashboard answers to besides LOCAL_HOSTS,
    on any port; wildcard bind addresses such as 0.0.0.0 are ignored. Every other Host, and
    a state-changing request from a page of another origin, gets 403 (see guard_hosts).
    logins: the users file and /metrics token (dashboard/access.py); None: open, as on 127.0.0.1.
    max_pages: pages live at once on /api/events (--max-pages; the server's threads are sized
    for them); more get 503 and refresh on their own. None: no bound.
    watermark: the run's delay (--watermark), which /api/lateness marks; None: the simulator's, or
    the default."""
    # update_title=None keeps the title as it is while callbacks run (Dash's hint says str only).
    app = Dash(__name__, title="Trade Summary", assets_folder=str(ASSETS),
               update_title=None)  # type: ignore[arg-type]
    guard_hosts(app.server, allowed_hosts)
    access.install(app.server, logins)  # after the Host guard: a foreign Host is refused before any login
    lake = lake if isinstance(lake, Lake) else Lake(lake)
    readers = PageReaders.of(lake)

    def layout():
        user = access.current_user()
        if simulator is None:
            return build_layout(refresh_ms, None, reconcile_available=reconciler is not None, user=user)
        return build_layout(refresh_ms, simulator.enabled, simulator.simulation,
                            simulator.watermark.total_seconds() / 60, reconcile_available=reconciler is not None,
                            user=user)

    def status() -> dict:
        """The health snapshot, with the producer's counters read now rather than sampled."""
        snapshot = health() if health is not None else empty_status()
        if simulator is not None:
            snapshot = {**snapshot, "producer": dataclasses.asdict(simulator.stats())}
        return snapshot

    app.layout = layout
    delay = watermark or (simulator.watermark if simulator is not None else Settings.watermark)
    lateness = LatenessReader(lake, delay, api.lateness_points(delay))
    context = PageContext(readers, status, simulator, reconciler, lake, SilverFilterValues(lake),
                          QuarantineReader(lake), lateness=lateness)
    register_callbacks(app, context)
    # One publisher per app: the default view worked out once per change for every open page.
    push.register(app, push.Publisher(context, max_pages=max_pages))
    api.register(app.server, status, readers.history, lambda: next(iter(context.gold_days()), None),
                 context.lateness_of)
    return app


def allowed_host_names(extra: Iterable[str] = ()) -> frozenset[str]:
    """LOCAL_HOSTS plus the specific names in `extra`, lower-case, without brackets or ports."""
    names = {_host_name(name) for name in (*LOCAL_HOSTS, *extra) if name.strip() not in WILDCARD_ADDRESSES}
    return frozenset(name for name in names if name)


def guard_hosts(server: flask.Flask, allowed_hosts: Iterable[str] = LOCAL_HOSTS) -> None:
    """A check before every route of the server (the page, its callbacks, /api/status, assets)
    against DNS rebinding and cross-site requests: the Host must be an allowed name (any port),
    and a POST (any method but GET/HEAD/OPTIONS) carrying an Origin must come from an allowed
    name too. Requests without an Origin (curl, scripts) pass when their Host does."""
    allowed = allowed_host_names((allowed_hosts,) if isinstance(allowed_hosts, str) else allowed_hosts)

    @server.before_request
    def check_host_and_origin():
        request = flask.request
        host = request.headers.get("Host") or request.host
        if _host_name(host) not in allowed:
            return _forbidden(f"Host {host!r} is not allowed: open the dashboard as http://127.0.0.1 or "
                              "http://localhost, or start it with --allow-host NAME.")
        origin = request.headers.get("Origin")
        if origin is not None and request.method not in SAFE_METHODS:
            origin_host = _origin_host(origin)
            if origin_host not in allowed:
                return _forbidden(f"Origin {origin!r} is not allowed to change this dashboard.")
        return None


def _host_name(host: str | None) -> str | None:
    """'LocalHost:8050' -> 'localhost', '[::1]:8050' -> '::1'; None when it is not a host[:port]."""
    host = (host or "").strip().lower()
    if host.startswith("["):
        name, bracket, rest = host[1:].partition("]")
        if not bracket or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return name or None
    if host.count(":") > 1:  # a bare IPv6 address (a setting; a Host header brackets it)
        return host
    name, colon, port = host.partition(":")
    if colon and not port.isdigit():
        return None
    return name or None


def _origin_host(origin: str) -> str | None:
    """The host name of an Origin header ('http://localhost:8050' -> 'localhost'); None for
    'null' or anything unreadable."""
    try:
        parts = urlsplit(origin.strip())
        parts.port  # raises ValueError on a malformed port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https"):
        return None
    return parts.hostname or None


def _forbidden(reason: str) -> flask.Response:
    return flask.Response(reason + "\n", status=403, mimetype="text/plain")


def empty_status() -> dict:
    return {"at": None, "queries": [], "producer": None,
            "kafka": {"error": None, "partitions": [], "total_lag": {}}, "lag_history": []}
