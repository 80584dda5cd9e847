"""The entry point of run.py: `python run.py [flags]` runs the App, `python run.py load [flags]` the Loader,
`python run.py users ...` edits the users file of --auth-file."""

from __future__ import annotations

import functools
import sys

from streaming.config import Settings
from streaming.run.app import App, DashboardFactory, MetricsFactory
from streaming.run.arguments import build_load_parser, build_parser
from streaming.run.cli import parse_load_settings, parse_settings
from streaming.run.command import run_command
from streaming.run.load_command import Loader
from streaming.run.users import logins_of
from streaming.run.users_command import run_users


def main(argv: list[str] | None = None, dashboard: DashboardFactory | None = None,
         metrics: MetricsFactory | None = None) -> int:
    """dashboard: the web app's factory (dashboard.dash_app.create_app), and metrics: GET /metrics's
    (on the dashboard's server, or alone behind its Host guard), handed in by run.py, so that the
    pipeline's package never imports the dashboard."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["users"]:
        return run_users(argv[1:])
    if argv[:1] == ["load"]:
        return run_command(Loader, parse_load_settings, build_load_parser, argv[1:], "python run.py load --help")
    return run_command(functools.partial(_app, dashboard=dashboard, metrics=metrics), parse_settings, build_parser,
                       argv, "python run.py --help")


def _app(settings: Settings, dashboard: DashboardFactory | None, metrics: MetricsFactory | None) -> App:
    """The App, its web factories given the run's logins (the users file, the /metrics token)."""
    logins = logins_of(settings)
    return App(settings, dashboard=functools.partial(dashboard, logins=logins) if dashboard else None,
               metrics=functools.partial(metrics, logins=logins) if metrics else None)
