#!/usr/bin/env python3
"""Trade Summary: the one entry point. `python run.py --help` explains every flag;
`python run.py load --help` the loader of trade files (landing zone -> Kafka)."""

import sys

from streaming.run.main import main


def create_dashboard(lake, refresh_ms, simulator, health, reconciler, allowed_hosts, logins=None, max_pages=None,
                     watermark=None):
    from dashboard.dash_app import create_app  # imported only when a dashboard is started: --help stays quick

    return create_app(lake, refresh_ms, simulator, health, reconciler, allowed_hosts, logins=logins,
                      max_pages=max_pages, watermark=watermark)


def serve_metrics(server, scrape, allowed_hosts, logins=None):
    """GET /metrics on the dashboard's Flask server, or (server None, --no-dashboard) on a bare
    one behind the same Host guard and the same logins (or bearer token)."""
    import flask

    from dashboard import access
    from dashboard.api import register_metrics
    from dashboard.dash_app import guard_hosts

    if server is None:
        server = flask.Flask("trade-summary-metrics")
        guard_hosts(server, allowed_hosts)
        access.install(server, logins)
    register_metrics(server, scrape)
    return server


if __name__ == "__main__":
    sys.exit(main(dashboard=create_dashboard, metrics=serve_metrics))
