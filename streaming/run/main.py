"""The entry point of run.py: `python run.py [flags]` runs the App, `python run.py load [flags]` the Loader,
`python run.py users ...` edits the users file of --auth-file."""

from __future__ import annotations

import functools
import sys

from streaming.run.app import App, DashboardFactory, MetricsFactory
from streaming.run.arguments import build_load_parser, build_parser
from streaming.run.cli import parse_load_settings, parse_settings
from streaming.run.command import run_command
from streaming.run.load_command import Loader
from streaming.run.users_command import run_users


def main(argv: list[str] | None = None, dashboard: DashboardFactory | None = None,
         metrics: MetricsFactory | None = None) -> int:
    """dashboard: the web app's factory (dashboard.app.create_app), and metrics: GET /metrics's
    (on the dashboard's server, or alone behind its Host guard), handed in by run.py, so that the
    pipeline's package never imports the dashboard."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["users"]:
        return run_users(argv[1:])
    if argv[:1] == ["load"]:
        return run_command(Loader, parse_load_settings, build_load_parser, argv[1:], "python run.py load --help")
    return run_command(functools.partial(App, dashboard=dashboard, metrics=metrics), parse_settings, build_parser, argv,
                       "python run.py --help")
