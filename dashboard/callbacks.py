"""Callbacks. One interval callback reads the tables and status once into a dcc.Store; the
chart and the status line are drawn from that store. Reconciliation runs on demand into a
second store."""

from __future__ import annotations

import logging
import math
from datetime import date, datetime, timedelta, timezone
from typing import Callable

import pandas as pd
from dash import Dash, Input, Output, State, ctx, dcc, no_update

from dashboard import export, figures, ids, tables
from dashboard.data import (
    HISTORY_COMMITS,
    QuarantineReader,
    SilverFilterValues,
    TableReader,
    VersionReader,
    as_of,
    data_versions,
    exactly_once_evidence,
    json_records,
    late_data,
    on_day,
    quarantine_view,
    read_silver_day,
    silver_windows,
    snapshot_from,
    trading_days,
    window_length,
)
from streaming.config import MAX_BEYOND_MINUTES, MAX_RATE, MIN_RATE
from streaming.lake.store import Lake
from streaming.lake.tables import GOLD

log = logging.getLogger(__name__)
UNAVAILABLE = "The producer simulation is not available in this run."
SWITCH_INVALID = "The producer switch sent an unexpected value; the simulation is unchanged."
CHOOSE_WINDOWS = "Choose the windows to backfill first."
NOTHING_TO_EXPORT = "Nothing to export yet: the chart has no trading day."
LIVE_LABEL = "Live"
SHOWN, HIDDEN = {}, {"display": "none"}
NO_HISTORY = "No history yet: gold has no versions to go back to."


def register_callbacks(app: Dash, readers: dict[str, TableReader], status: Callable[[], dict],
                       simulator=None, reconciler=None, lake: Lake | None = None,
                       filter_values: SilverFilterValues | None = None,
                       quarantine: QuarantineReader | None = None) -> None:

    # The readers hand back the same frame until its table changes: what is worked out from a
    # frame is kept until then (gold changes with every micro-batch, corrections far less often).
    days_of: dict = {"gold": None, "days": []}
    late_of: dict = {"corrections": None, "late_trades": None, "day": None, "late": None}

    def gold_days() -> list[str]:
        """trading_days of gold, worked out again only when the reader has read a new frame."""
        gold = readers["gold"].read()
        if days_of["gold"] is not gold:
            days_of.update(gold=gold, days=trading_days(gold))
        return days_of["days"]

    def day_late_data(day: str | None) -> dict:
        """late_data of the day, worked out again only when corrections or late trades changed."""
        corrections, late_trades = readers["corrections"].read(), readers["late_trades"].read()
        if not (late_of["corrections"] is corrections and late_of["late_trades"] is late_trades
                and late_of["day"] == day):
            late_of.update(corrections=corrections, late_trades=late_trades, day=day,
                           late=late_data(corrections, late_trades, day))
        return late_of["late"]

    @app.callback(Output(ids.SNAPSHOT, "data"), Input(ids.TICK, "n_intervals"), Input(ids.DAY_PICKER, "value"),
                  Input(ids.CHANNEL_FILTER, "value"), Input(ids.SYMBOL_FILTER, "value"))
    def refresh_snapshot(_tick, day, channel, symbol):
        # The page's choices as the dropdowns give them: a text each, or none. Anything else is
        # ignored (the latest day, every channel and symbol) rather than failing the refresh.
        day, channel, symbol = (_text(value) for value in (day, channel, symbol))
        gold, days = readers["gold"].read(), gold_days()
        shown = day if day in days else next(iter(days), None)
        drill = None
        if (channel or symbol) and lake is not None and shown is not None:
            drill = silver_windows(read_silver_day(lake, shown, channel, symbol), window_length(gold))
        snapshot = snapshot_from(gold, day=shown, drill=drill, days=days, late=day_late_data(shown))
        snapshot["filters"] = {"channel": channel, "symbol": symbol}
        snapshot["status"] = status()
        return snapshot

    @app.callback(Output(ids.QUARANTINE_STORE, "data"), Input(ids.TICK, "n_intervals"),
                  Input(ids.DAY_PICKER, "value"), Input(ids.QUARANTINE_REASON, "value"))
    def refresh_quarantine(_tick, day, reason):
        """The quarantine panel's data, on the same tick, into its own store: counts per reason
        (the shown day's and all time) and the newest bad records. Read from the table only
        when its version has changed (QuarantineReader)."""
        day, reason = _text(day), _text(reason)
        days = gold_days()
        shown = day if day in days else next(iter(days), None)
        counts, newest = quarantine.read(reason) if quarantine is not None else ([], [])
        return quarantine_view(counts, newest, shown, reason)

    @app.callback(Output(ids.QUARANTINE_COUNTS, "children"), Output(ids.QUARANTINE_LIST, "children"),
                  Output(ids.QUARANTINE_REASON, "options"), Input(ids.QUARANTINE_STORE, "data"))
    def draw_quarantine(view):
        view = view if isinstance(view, dict) else None
        return tables.quarantine_counts(view), tables.quarantine_list(view), tables.reason_options(view)

    @app.callback(Output(ids.DOWNLOAD_WINDOWS, "data"), Output(ids.DOWNLOAD_CORRECTIONS, "data"),
                  Output(ids.EXPORT_MESSAGE, "children"), Input(ids.EXPORT_WINDOWS, "n_clicks"),
                  Input(ids.EXPORT_CORRECTIONS, "n_clicks"), State(ids.SNAPSHOT, "data"), prevent_initial_call=True)
    def export_csv(_windows, _corrections, snapshot):
        """The shown day's windows (with running totals) or its corrections, as a CSV download."""
        day = _shown_day(snapshot)
        if day is None:
            return no_update, no_update, NOTHING_TO_EXPORT
        if ctx.triggered_id == ids.EXPORT_CORRECTIONS:
            # The store holds only the feed's newest corrections: the export reads the day's whole.
            frame = on_day(readers["corrections"].read(), day)
            frame = frame.sort_values(["corrected_at", "window_start"], kind="stable")
            content = export.corrections_csv(json_records(frame, ("window_start", "corrected_at")))
            return no_update, dcc.send_string(content, export.export_name(day, "corrections"), "text/csv"), ""
        content = export.windows_csv(snapshot)
        return dcc.send_string(content, export.export_name(day, "windows"), "text/csv"), no_update, ""

    @app.callback(Output(ids.CHAOS_MESSAGE, "children"), Input(ids.CHAOS_APPLY, "n_clicks"),
                  State(ids.DUPLICATE_SHARE_INPUT, "value"), State(ids.MALFORMED_SHARE_INPUT, "value"),
                  prevent_initial_call=True)
    def apply_chaos_knobs(_clicks, duplicate_percent, malformed_percent):
        if simulator is None:
            return UNAVAILABLE
        knobs = chaos_knobs(duplicate_percent, malformed_percent)
        if isinstance(knobs, str):
            return knobs
        message = chaos_knobs_message(knobs)
        simulator.configure(**knobs)
        return message

    @app.callback(Output(ids.CHANNEL_FILTER, "options"), Output(ids.SYMBOL_FILTER, "options"),
                  Input(ids.FILTER_TICK, "n_intervals"), State(ids.CHANNEL_FILTER, "options"),
                  State(ids.SYMBOL_FILTER, "options"))
    def refresh_filter_options(_tick, shown_channels, shown_symbols):
        """The drill-down's choices: the channels and symbols in silver. On its own slower
        interval (and at page load), not the data tick: finding them reads silver."""
        channels, symbols = filter_values.read() if filter_values is not None else ([], [])
        options = (tables.channel_options(channels), tables.symbol_options(symbols))
        return tuple(no_update if new == (shown or []) else new
                     for new, shown in zip(options, (shown_channels, shown_symbols)))

    @app.callback(Output(ids.DAY_PICKER, "options"), Output(ids.KPI_CARDS, "children"),
                  Output(ids.CHART_NOTE, "children"), Input(ids.SNAPSHOT, "data"))
    def draw_day_and_kpis(snapshot):
        return tables.day_options(snapshot), tables.kpi_cards(snapshot), tables.chart_note(snapshot)

    @app.callback(Output(ids.CHART, "figure"), Input(ids.SNAPSHOT, "data"), Input(ids.CHART_MODE, "value"),
                  Input(ids.FIRST_REPORTED, "value"))
    def draw_chart(snapshot, mode, first_reported):
        shown_first = isinstance(first_reported, list) and "on" in first_reported
        return figures.summary_figure(snapshot if isinstance(snapshot, dict) else None, mode,
                                      first_reported=shown_first)

    @app.callback(Output(ids.AS_OF_CHART, "figure"), Output(ids.AS_OF_CHART, "style"), Output(ids.CHART, "style"),
                  Input(ids.AS_OF, "data"), Input(ids.CHART_MODE, "value"), Input(ids.FIRST_REPORTED, "value"))
    def draw_as_of_chart(past, mode, first_reported):
        """The time machine's chart, by the same figure code as the live one, in its place while
        a version is chosen (the live chart keeps updating, hidden, and is shown again on Live)."""
        if not (isinstance(past, dict) and isinstance(past.get("as_of"), dict)):
            return no_update, HIDDEN, SHOWN
        shown_first = isinstance(first_reported, list) and "on" in first_reported
        figure = figures.summary_figure(past, mode, first_reported=shown_first)
        return figures.as_of_figure(figure, past["as_of"].get("label")), SHOWN, HIDDEN

    # -- the time machine: the chart as gold stood at an earlier version ------------------------
    versions = VersionReader(lake) if lake is not None else None

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
        commit = version_commit(version, history)
        if isinstance(commit, str):
            return None, commit
        chosen, at_ms = commit
        until = pd.Timestamp(at_ms, unit="ms", tz="UTC")
        late = as_of(readers["late_trades"].read(), "detected_at", until)
        if "backfilled_at" in late and not late.empty:  # a backfill after that moment had not happened yet
            late = late.assign(backfilled_at=late["backfilled_at"].where(
                pd.to_datetime(late["backfilled_at"], utc=True) <= until))
        try:
            gold = versions.read(chosen)
        except Exception as exc:  # noqa: BLE001 - e.g. a version whose files a vacuum removed: said on the page
            log.warning("gold version %s cannot be read: %s", chosen, exc)
            return None, f"Version {chosen} can no longer be read (a vacuum may have removed its files)."
        snapshot = snapshot_from(gold, as_of(readers["corrections"].read(), "corrected_at", until),
                                 late, _text(day) or _shown_day(live))
        label = f"as of {until:%H:%M:%S} UTC, version {chosen}"
        snapshot["as_of"] = {"version": chosen, "at": until.isoformat(), "label": label}
        return snapshot, label

    @app.callback(Output(ids.TM_SLIDER, "value"), Output(ids.TM_PLAY_TICK, "disabled"),
                  Output(ids.TM_PLAY, "children"), Input(ids.TM_PLAY, "n_clicks"),
                  Input(ids.TM_PLAY_TICK, "n_intervals"), Input(ids.TM_LIVE, "n_clicks"),
                  State(ids.TM_SLIDER, "value"), State(ids.TM_PLAY_TICK, "disabled"), State(ids.TM_HISTORY, "data"),
                  prevent_initial_call=True)
    def play(_play, _tick, _live, version, paused, history):
        """Play/Pause steps the slider through the data versions (from the oldest when it is on
        Live or at the newest) and stops at the newest; Live leaves the time machine."""
        if ctx.triggered_id == ids.TM_LIVE:
            return None, True, "Play"
        stops = [entry[0] for entry in _history(history)]
        playing = paused is False
        if not stops or (ctx.triggered_id == ids.TM_PLAY and playing):
            return no_update, True, "Play"
        current = version if _whole(version) else None
        if ctx.triggered_id == ids.TM_PLAY:
            at_end = current is None or current >= stops[-1] or current < stops[0]
            return (stops[0] if at_end else no_update), False, "Pause"
        later = [stop for stop in stops if current is None or stop > current]
        if not later:
            return no_update, True, "Play"
        return later[0], later[0] == stops[-1], "Play" if later[0] == stops[-1] else "Pause"

    @app.callback(Output(ids.STATUS_LINE, "children"), Output(ids.LATE_COUNTERS, "children"),
                  Output(ids.CORRECTIONS_FEED, "children"), Output(ids.LATE_TRADES_LIST, "children"),
                  Input(ids.SNAPSHOT, "data"))
    def draw_status_and_feeds(snapshot):
        return (figures.status_text(snapshot), tables.late_counters(snapshot),
                tables.corrections_feed(snapshot), tables.late_trades_list(snapshot))

    @app.callback(Output(ids.HEALTH_QUERIES, "children"), Output(ids.KAFKA_LAG, "children"),
                  Output(ids.LAG_SPARKLINE, "figure"), Input(ids.SNAPSHOT, "data"))
    def draw_health(snapshot):
        return tables.health_table(snapshot), tables.lag_table(snapshot), figures.lag_sparkline(snapshot)

    @app.callback(Output(ids.CONTROL_MESSAGE, "children", allow_duplicate=True),
                  Input(ids.PRODUCER_SWITCH, "value"), prevent_initial_call=True)
    def toggle_producer(value):
        if simulator is None:
            return UNAVAILABLE
        enabled = switch_value(value)
        if enabled is None:
            return SWITCH_INVALID
        simulator.set_enabled(enabled)
        return "Simulation running." if simulator.enabled else "Simulation paused."

    @app.callback(Output(ids.CONTROL_MESSAGE, "children"),
                  Input(ids.RATE_APPLY, "n_clicks"), State(ids.RATE_INPUT, "value"),
                  prevent_initial_call=True)
    def apply_rate(_clicks, rate):
        if simulator is None:
            return UNAVAILABLE
        value = parse_rate(rate)
        if isinstance(value, str):
            return value
        message = f"Rate set to {value:g} trades/s."
        simulator.configure(rate=value)
        return message

    @app.callback(Output(ids.LATE_MESSAGE, "children"), Input(ids.LATE_APPLY, "n_clicks"),
                  State(ids.LATE_SHARE_INPUT, "value"), State(ids.BEYOND_SHARE_INPUT, "value"),
                  State(ids.MAX_LATENESS_INPUT, "value"), State(ids.MAX_BEYOND_INPUT, "value"),
                  prevent_initial_call=True)
    def apply_late_knobs(_clicks, late_percent, beyond_percent, max_minutes, beyond_minutes):
        if simulator is None:
            return UNAVAILABLE
        watermark_minutes = simulator.watermark.total_seconds() / 60
        knobs = late_knobs(late_percent, beyond_percent, max_minutes, watermark_minutes, beyond_minutes)
        if isinstance(knobs, str):
            return knobs
        message = late_knobs_message(knobs)  # from the validated numbers, before anything is applied
        simulator.configure(**knobs)
        return message

    @app.callback(Output(ids.RECONCILE_RESULT, "data"), Output(ids.RECONCILE_MESSAGE, "children"),
                  Input(ids.RECONCILE_CHECK, "n_clicks"), Input(ids.BACKFILL_APPLY, "n_clicks"),
                  State(ids.BACKFILL_CHOICE, "value"), State(ids.SNAPSHOT, "data"), prevent_initial_call=True)
    def reconcile(_check, _backfill, chosen, snapshot):
        if reconciler is None:
            return no_update, "Reconciliation is not available in this run."
        day = snapshot_day(snapshot)
        if day is None:
            return None, "Nothing to reconcile yet: the chart has no windows."
        starts = None
        if ctx.triggered_id == ids.BACKFILL_APPLY:
            starts = window_starts(chosen)
            if starts is None:
                return no_update, CHOOSE_WINDOWS
        message = ""
        try:
            if starts is not None:
                message = reconciler.backfill(starts).message() + " "
            frame = reconciler.reconcile(day)
        except Exception as exc:  # noqa: BLE001 - shown on the page; the dashboard keeps running
            log.exception("reconciliation failed")
            return no_update, f"Reconciliation failed: {exc}"
        checked_at = datetime.now(timezone.utc).isoformat()
        result = {"day": day.isoformat(), "checked_at": checked_at,
                  "windows": json_records(frame, ("window_start", "window_end"))}
        return result, message + f"Checked {len(frame)} windows at {checked_at[11:19]} UTC."

    @app.callback(Output(ids.EXACTLY_ONCE_TABLE, "children"), Output(ids.EXACTLY_ONCE_MESSAGE, "children"),
                  Input(ids.EXACTLY_ONCE_CHECK, "n_clicks"), prevent_initial_call=True)
    def count_exactly_once(_clicks):
        if lake is None:
            return no_update, "Not available in this run."
        kafka = (status() or {}).get("kafka") or {}
        ends = {p["partition"]: p["end_offset"] for p in kafka.get("partitions", [])
                if isinstance(p, dict) and "partition" in p and "end_offset" in p}
        try:
            evidence = exactly_once_evidence(lake, ends)
        except Exception as exc:  # noqa: BLE001 - shown on the page; the dashboard keeps running
            log.exception("exactly-once count failed")
            return no_update, f"Counting failed: {exc}"
        return tables.exactly_once_table(evidence), f"Counted at {datetime.now(timezone.utc):%H:%M:%S} UTC."

    @app.callback(Output(ids.RECONCILE_TABLE, "children"), Output(ids.BACKFILL_CHOICE, "options"),
                  Output(ids.BACKFILL_CHOICE, "value"), Input(ids.RECONCILE_RESULT, "data"))
    def draw_reconciliation(result):
        return tables.reconciliation_table(result), tables.backfill_options(result), []


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


def validate_rate(rate) -> str | None:
    """A message for an unusable rate, or None when it is fine."""
    value = parse_rate(rate)
    return value if isinstance(value, str) else None


def parse_rate(rate) -> float | str:
    """The rate as a number of trades per second, or a message saying what is wrong."""
    value = _number(rate)
    if value is None or not MIN_RATE <= value <= MAX_RATE:
        return f"Enter a rate between {MIN_RATE:g} and {MAX_RATE:,.0f} trades per second."
    return value


def _number(value) -> float | None:
    """A finite number from an input's value (a number, or text holding one), else None.
    A bool, a list, null, NaN, infinity or a number too large for a float is not one."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _text(value) -> str | None:
    """A dropdown's choice: non-empty text, else None."""
    return value if isinstance(value, str) and value else None


def _shown_day(snapshot) -> str | None:
    """The store snapshot's day (YYYY-MM-DD), or None when it has none or is not a snapshot."""
    day = snapshot.get("day") if isinstance(snapshot, dict) else None
    if not isinstance(day, str):
        return None
    try:
        return date.fromisoformat(day).isoformat() if len(day) == 10 else None
    except ValueError:
        return None


def switch_value(value) -> bool | None:
    """The producer switch's checklist value -> on/off; None when it is not a checklist value
    (a list holding at most "on")."""
    if not isinstance(value, list) or any(item != "on" for item in value):
        return None
    return bool(value)


def snapshot_day(snapshot) -> date | None:
    """The trading day of the chart's store snapshot (from its first window), or None."""
    windows = snapshot.get("windows") if isinstance(snapshot, dict) else None
    if not isinstance(windows, list) or not windows or not isinstance(windows[0], dict):
        return None
    start = _instant(windows[0].get("window_start"))
    return start.date() if start is not None else None


def window_starts(chosen) -> list[str] | None:
    """The backfill choice: a non-empty list of ISO window starts with a zone, else None."""
    if not isinstance(chosen, list) or not chosen or not all(isinstance(start, str) for start in chosen):
        return None
    return chosen if all(_instant(start) is not None for start in chosen) else None


def _instant(value) -> pd.Timestamp | None:
    """An ISO-8601 time with a zone as a UTC timestamp, else None."""
    if not isinstance(value, str):
        return None
    try:
        instant = pd.Timestamp(value)
    except (ValueError, OverflowError):
        return None
    if instant is pd.NaT or instant.tzinfo is None:
        return None
    return instant.tz_convert("UTC")


def late_knobs(late_percent, beyond_percent, max_minutes, watermark_minutes: float, beyond_minutes) -> dict | str:
    """Simulator knobs from the page's inputs, or a message saying what is wrong."""
    late, beyond, lateness = _number(late_percent), _number(beyond_percent), _number(max_minutes)
    beyond_by = _number(beyond_minutes)
    if late is None or not 0 <= late <= 100:
        return "Enter the late share as a percentage between 0 and 100."
    if beyond is None or not 0 <= beyond <= 100:
        return "Enter the beyond-watermark share as a percentage between 0 and 100."
    if lateness is None or not 0 < lateness < watermark_minutes:
        return f"Enter how late (minutes) as more than 0 and less than the watermark, {watermark_minutes:g} minutes."
    if beyond_by is None or not 0 < beyond_by <= MAX_BEYOND_MINUTES:
        return f"Enter how far beyond the watermark (minutes) as more than 0 and at most {MAX_BEYOND_MINUTES:,}."
    return {"late_share": late / 100, "beyond_watermark_share": beyond / 100,
            "max_lateness": timedelta(minutes=lateness), "max_beyond": timedelta(minutes=beyond_by)}


def late_knobs_message(knobs: dict) -> str:
    """What the late-trade knobs were set to, from late_knobs()'s validated values."""
    minutes = lambda delta: delta.total_seconds() / 60  # noqa: E731
    return (f"{knobs['late_share'] * 100:g} % of trades late, {knobs['beyond_watermark_share'] * 100:g} % of those "
            f"beyond the watermark by up to {minutes(knobs['max_beyond']):g} min, the others up to "
            f"{minutes(knobs['max_lateness']):g} min late.")


def chaos_knobs(duplicate_percent, malformed_percent) -> dict | str:
    """The simulator's duplicate and malformed shares from the page's percentages, or a message
    saying what is wrong."""
    duplicate, malformed = _number(duplicate_percent), _number(malformed_percent)
    if duplicate is None or not 0 <= duplicate <= 100:
        return "Enter the duplicate share as a percentage between 0 and 100."
    if malformed is None or not 0 <= malformed <= 100:
        return "Enter the malformed share as a percentage between 0 and 100."
    return {"duplicate_share": duplicate / 100, "malformed_share": malformed / 100}


def chaos_knobs_message(knobs: dict) -> str:
    return (f"{knobs['duplicate_share'] * 100:g} % of trades sent twice, "
            f"{knobs['malformed_share'] * 100:g} % of records malformed.")
