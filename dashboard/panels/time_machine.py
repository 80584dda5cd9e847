"""The time machine: a slider over gold's versions (Play/Pause, Live), and the chart as it stood then.

The chart at the chosen version is drawn in the live chart's place, by the same figure code."""

from __future__ import annotations

import logging

import pandas as pd
from dash import Dash, Input, Output, State, ctx, dcc, html, no_update

from dashboard import figures, ids
from dashboard.context import PageContext, pick_day
from dashboard.data import HISTORY_COMMITS, as_of, data_versions, snapshot_from, trading_days
from dashboard.inputs import choice, store_day
from dashboard.panels.chart import first_reported_shown
from streaming.lake.tables import GOLD

log = logging.getLogger(__name__)
LIVE_LABEL = "Live"
NO_HISTORY = "No history yet: gold has no versions to go back to."
SHOWN: dict = {}
HIDDEN = {"display": "none"}
# While playing, the time machine steps to the next version this often.
PLAY_STEP_MS = 500


def layout() -> list:
    """The chart at a version (hidden while Live), then under it a slider over gold's versions
    (filled by a callback from the table's history), Play/Pause stepping through them, Live
    returning to the current view, and a label saying which version the chart shows."""
    return [
        dcc.Graph(id=ids.AS_OF_CHART, className="chart as-of-chart", style={"display": "none"},
                  config={"displaylogo": False, "responsive": True}),
        html.Div(className="time-machine", children=[
            html.Span("History", className="time-machine-title"),
            html.Button("Play", id=ids.TM_PLAY, n_clicks=0, className="time-machine-play"),
            html.Div(className="time-machine-slider", children=[
                dcc.Slider(id=ids.TM_SLIDER, min=0, max=0, step=1, value=None, marks={}, updatemode="mouseup",
                           tooltip={"placement": "bottom", "always_visible": False})]),
            html.Button("Live", id=ids.TM_LIVE, n_clicks=0, className="time-machine-live"),
            html.Span("Live", id=ids.TM_LABEL, className="time-machine-label", role="status"),
            dcc.Store(id=ids.TM_HISTORY),
            dcc.Store(id=ids.AS_OF),
            dcc.Interval(id=ids.TM_PLAY_TICK, interval=PLAY_STEP_MS, n_intervals=0, disabled=True),
        ]),
    ]


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _history(history) -> list[list[int]]:
    """The history store's [version, ms] pairs, anything else left out."""
    if not isinstance(history, list):
        return []
    return [entry for entry in history if isinstance(entry, list) and len(entry) == 2 and all(map(_whole, entry))]


def version_commit(version, history) -> tuple[int, int] | str:
    """The data version shown for a slider value (the newest at or before it: a compaction
    changes nothing) and its commit time in ms; or a message when there is none."""
    stops = _history(history)
    if not stops:
        return NO_HISTORY
    if isinstance(version, float) and version.is_integer():
        version = int(version)
    if not _whole(version) or not stops[0][0] <= version <= stops[-1][0]:
        return (f"Version {version!r} is not in gold's history shown here (versions {stops[0][0]} to "
                f"{stops[-1][0]}): choose one on the slider.")
    chosen = max((entry for entry in stops if entry[0] <= version), key=lambda entry: entry[0])
    return chosen[0], chosen[1]


def version_marks(history: list[list[int]]) -> dict:
    """Slider marks: the oldest and newest data versions, labelled with their commit times."""
    def label(entry):
        return f"{pd.Timestamp(entry[1], unit='ms', tz='UTC'):%H:%M:%S} (v{entry[0]})"
    return {str(history[0][0]): label(history[0]), str(history[-1][0]): label(history[-1])}


def next_stop(trigger, version, paused, history) -> tuple:
    """(slider value, play tick disabled, play button text) after Play/Pause, a play tick or Live:
    Play steps through the data versions (from the oldest when on Live or at the newest) and
    stops at the newest; Live leaves the time machine."""
    if trigger == ids.TM_LIVE:
        return None, True, "Play"
    stops = [entry[0] for entry in _history(history)]
    playing = paused is False
    if not stops or (trigger == ids.TM_PLAY and playing):
        return no_update, True, "Play"
    current = version if _whole(version) else None
    if trigger == ids.TM_PLAY:
        at_end = current is None or current >= stops[-1] or current < stops[0]
        return (stops[0] if at_end else no_update), False, "Pause"
    later = [stop for stop in stops if current is None or stop > current]
    if not later:
        return no_update, True, "Play"
    return later[0], later[0] == stops[-1], "Play" if later[0] == stops[-1] else "Pause"


def as_of_snapshot(gold: pd.DataFrame, version: int, until: pd.Timestamp, corrections: pd.DataFrame,
                   late_trades: pd.DataFrame, day: str | None) -> dict:
    """The snapshot of gold at `version`, committed at `until`, built as the live one is
    (snapshot_from), with only the corrections and too-late trades known by then."""
    late = as_of(late_trades, "detected_at", until)
    if "backfilled_at" in late and not late.empty:  # a backfill after that moment had not happened yet
        late = late.assign(backfilled_at=late["backfilled_at"].where(
            pd.to_datetime(late["backfilled_at"], utc=True) <= until))
    snapshot = snapshot_from(gold, as_of(corrections, "corrected_at", until), late, day)
    label = f"as of {until:%H:%M:%S} UTC, version {version}"
    snapshot["as_of"] = {"version": version, "at": until.isoformat(), "label": label}
    return snapshot


def register(app: Dash, context: PageContext) -> None:
    readers, lake, versions = context.readers, context.lake, context.versions

    @app.callback(Output(ids.AS_OF_CHART, "figure"), Output(ids.AS_OF_CHART, "style"), Output(ids.CHART, "style"),
                  Input(ids.AS_OF, "data"), Input(ids.CHART_MODE, "value"), Input(ids.FIRST_REPORTED, "value"))
    def draw_as_of_chart(past, mode, first_reported):
        """The time machine's chart, by the same figure code as the live one, in its place while
        a version is chosen (the live chart keeps updating, hidden, and is shown again on Live)."""
        if not (isinstance(past, dict) and isinstance(past.get("as_of"), dict)):
            return no_update, HIDDEN, SHOWN
        figure = figures.summary_figure(past, mode, first_reported=first_reported_shown(first_reported))
        return figures.as_of_figure(figure, past["as_of"].get("label")), SHOWN, HIDDEN

    @app.callback(Output(ids.TM_HISTORY, "data"), Output(ids.TM_SLIDER, "min"), Output(ids.TM_SLIDER, "max"),
                  Output(ids.TM_SLIDER, "marks"), Input(ids.TICK, "n_intervals"), State(ids.TM_HISTORY, "data"))
    def refresh_history(_tick, shown):
        """Gold's data versions (its newest HISTORY_COMMITS commits without compactions) for the
        slider; nothing is sent when they have not changed."""
        history = data_versions(lake.history(GOLD, HISTORY_COMMITS)) if lake is not None else []
        if history == shown:
            return no_update, no_update, no_update, no_update
        if not history:
            return [], 0, 0, {}
        return history, history[0][0], history[-1][0], version_marks(history)

    @app.callback(Output(ids.AS_OF, "data"), Output(ids.TM_LABEL, "children"), Input(ids.TM_SLIDER, "value"),
                  Input(ids.DAY_PICKER, "value"), State(ids.TM_HISTORY, "data"), State(ids.SNAPSHOT, "data"))
    def choose_version(version, day, history, live):
        """The snapshot of the chosen version, built as the live one is (snapshot_from) from gold
        at that version, with only the corrections and too-late trades known at its commit."""
        if version is None:
            return None, LIVE_LABEL
        if versions is None:  # a run without a lake
            return None, NO_HISTORY
        commit = version_commit(version, history)
        if isinstance(commit, str):
            return None, commit
        chosen, at_ms = commit
        try:
            gold = versions.read(chosen)
        except Exception as exc:  # noqa: BLE001 - e.g. a version whose files a vacuum removed: said on the page
            log.warning("gold version %s cannot be read: %s", chosen, exc)
            return None, f"Version {chosen} can no longer be read (a vacuum may have removed its files)."
        # The day that gold at that version shows; its corrections and too-late trades only.
        shown = pick_day(choice(day) or store_day(live), trading_days(gold))
        snapshot = as_of_snapshot(gold, chosen, pd.Timestamp(at_ms, unit="ms", tz="UTC"),
                                  readers.corrections.read(shown), readers.late_trades.read(shown), shown)
        return snapshot, snapshot["as_of"]["label"]

    @app.callback(Output(ids.TM_SLIDER, "value"), Output(ids.TM_PLAY_TICK, "disabled"),
                  Output(ids.TM_PLAY, "children"), Input(ids.TM_PLAY, "n_clicks"),
                  Input(ids.TM_PLAY_TICK, "n_intervals"), Input(ids.TM_LIVE, "n_clicks"),
                  State(ids.TM_SLIDER, "value"), State(ids.TM_PLAY_TICK, "disabled"), State(ids.TM_HISTORY, "data"),
                  prevent_initial_call=True)
    def play(_play, _tick, _live, version, paused, history):
        """Play/Pause steps the slider through the data versions; Live leaves the time machine."""
        return next_stop(ctx.triggered_id, version, paused, history)

