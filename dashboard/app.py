"""The Dash app: create_app() wires layout, data access and callbacks together."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

import flask
from dash import Dash

from dashboard.callbacks import register_callbacks
from dashboard.data import (
    CORRECTION_COLUMNS,
    GOLD_COLUMNS,
    LATE_TRADE_COLUMNS,
    SilverFilterValues,
    TableReader,
)
from dashboard.layout import build_layout
from streaming.lake.store import Lake
from streaming.lake.tables import CORRECTIONS, GOLD, LATE_TRADES

ASSETS = Path(__file__).resolve().parent.parent / "assets"


def create_app(lake: Lake | str | Path, refresh_ms: int = 2000, simulator=None,
               health: Callable[[], dict] | None = None, reconciler=None) -> Dash:
    """lake: the pipeline's tables (a Lake, or its data dir). simulator, health (a
    HealthMonitor's snapshot) and reconciler are optional: without them the page shows the
    tables, and the controls that need them say they are not available."""
    app = Dash(__name__, title="Trade Summary", assets_folder=str(ASSETS), update_title=None)
    lake = lake if isinstance(lake, Lake) else Lake(lake)
    readers = {
        "gold": TableReader(lake, GOLD, GOLD_COLUMNS),
        "corrections": TableReader(lake, CORRECTIONS, CORRECTION_COLUMNS),
        "late_trades": TableReader(lake, LATE_TRADES, LATE_TRADE_COLUMNS),
    }

    def layout():
        if simulator is None:
            return build_layout(refresh_ms, None, reconcile_available=reconciler is not None)
        return build_layout(refresh_ms, simulator.enabled, simulator.simulation,
                            simulator.watermark.total_seconds() / 60, reconcile_available=reconciler is not None)

    def status() -> dict:
        """The health snapshot, with the producer's counters read now rather than sampled."""
        snapshot = health() if health is not None else empty_status()
        if simulator is not None:
            snapshot = {**snapshot, "producer": dataclasses.asdict(simulator.stats())}
        return snapshot

    app.layout = layout
    register_callbacks(app, readers, status, simulator, reconciler, lake, SilverFilterValues(lake))

    @app.server.route("/api/status")
    def api_status():
        return flask.jsonify(status())

    return app


def empty_status() -> dict:
    return {"at": None, "queries": [], "producer": None,
            "kafka": {"error": None, "partitions": [], "total_lag": {}}, "lag_history": []}
