"""Registers the page's callbacks: the data tick that fills the snapshot store, then each panel's own."""

from __future__ import annotations

from dash import Dash

from dashboard import refresh
from dashboard.context import PageContext
from dashboard.panels import WITH_CALLBACKS


def register_callbacks(app: Dash, context: PageContext) -> None:
    refresh.register(app, context)
    for panel in WITH_CALLBACKS:
        panel.register(app, context)
