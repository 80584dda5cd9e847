"""Page layout. A function, so a reload shows the producer's current state."""

from __future__ import annotations

from dash import dcc, html

from dashboard import ids
from streaming.config import MAX_BEYOND_MINUTES, MAX_RATE, MIN_RATE, Simulation


def _number(id_: str, value, low: float, high: float, step, disabled: bool) -> dcc.Input:
    return dcc.Input(id=id_, type="number", min=low, max=high, step=step, value=value, disabled=disabled,
                     debounce=True, className="number-input")


# How often the channel and symbol options are refreshed from silver (and once at page load).
# Slower than the data tick: they change rarely, and finding them reads silver.
FILTER_REFRESH_MS = 30_000


def late_trade_controls(simulation: Simulation | None, watermark_minutes: float | None) -> html.Fieldset:
    """The simulator's late-trade knobs, in percent and market minutes."""
    disabled = simulation is None
    late = beyond = max_minutes = beyond_minutes = None
    if simulation is not None:
        late, beyond = round(simulation.late_share * 100, 2), round(simulation.beyond_watermark_share * 100, 2)
        lateness = simulation.max_lateness
        max_minutes = round(lateness.total_seconds() / 60 if lateness else 0.9 * watermark_minutes, 1)
        beyond_by = simulation.max_beyond
        beyond_minutes = round(beyond_by.total_seconds() / 60 if beyond_by else watermark_minutes, 1)
    return html.Fieldset(className="control-group", children=[
        html.Legend("Late trades"),
        html.Label(["Late ", _number(ids.LATE_SHARE_INPUT, late, 0, 100, "any", disabled), " % of trades"]),
        html.Label(["of which beyond the watermark ",
                    _number(ids.BEYOND_SHARE_INPUT, beyond, 0, 100, "any", disabled), " %"]),
        html.Label(["by up to ", _number(ids.MAX_BEYOND_INPUT, beyond_minutes, 0.1, MAX_BEYOND_MINUTES, "any",
                                         disabled), " min,"]),
        html.Label(["the others late by up to ",
                    _number(ids.MAX_LATENESS_INPUT, max_minutes, 0.1, watermark_minutes, "any", disabled),
                    f" min (watermark {watermark_minutes:g} min)" if watermark_minutes else " min"]),
        html.Button("Apply", id=ids.LATE_APPLY, n_clicks=0, disabled=disabled),
        html.Span(id=ids.LATE_MESSAGE, className="control-message", role="status"),
    ])


def chaos_controls(simulation: Simulation | None) -> html.Fieldset:
    """The simulator's duplicate and malformed shares, in percent."""
    disabled = simulation is None
    duplicate = malformed = None
    if simulation is not None:
        duplicate, malformed = round(simulation.duplicate_share * 100, 2), round(simulation.malformed_share * 100, 2)
    return html.Fieldset(className="control-group", children=[
        html.Legend("Chaos"),
        html.Label(["Duplicates ", _number(ids.DUPLICATE_SHARE_INPUT, duplicate, 0, 100, "any", disabled),
                    " % of trades"]),
        html.Label(["malformed ", _number(ids.MALFORMED_SHARE_INPUT, malformed, 0, 100, "any", disabled),
                    " % of records"]),
        html.Button("Apply", id=ids.CHAOS_APPLY, n_clicks=0, disabled=disabled),
        html.Span(id=ids.CHAOS_MESSAGE, className="control-message", role="status"),
    ])


def quarantine_panel() -> html.Section:
    """Bad records: counts per reason, and the newest ones, filterable by reason."""
    return html.Section(className="panel quarantine", children=[
        html.H2("Quarantine: records that are not valid trades"),
        html.Div(id=ids.QUARANTINE_COUNTS),
        html.Label(className="quarantine-filter", children=[
            "Newest bad records of ",
            dcc.Dropdown(id=ids.QUARANTINE_REASON, placeholder="every reason", options=[], clearable=True,
                         searchable=False, className="picker wide-picker")]),
        html.Div(id=ids.QUARANTINE_LIST),
    ])


def export_buttons() -> html.Div:
    """CSV downloads of the shown day."""
    return html.Div(className="export-actions", children=[
        html.Button("Download windows (CSV)", id=ids.EXPORT_WINDOWS, n_clicks=0),
        html.Button("Download corrections (CSV)", id=ids.EXPORT_CORRECTIONS, n_clicks=0),
        html.Span(id=ids.EXPORT_MESSAGE, className="control-message", role="status"),
        dcc.Download(id=ids.DOWNLOAD_WINDOWS),
        dcc.Download(id=ids.DOWNLOAD_CORRECTIONS),
    ])


def reconciliation_panel(available: bool) -> html.Section:
    return html.Section(className="panel reconcile", children=[
        html.H2("Reconciliation: streaming gold against a batch recompute from silver"),
        html.P("Silver keeps every valid trade, also those too late for the watermark; the difference per window "
               "should be exactly its too-late trades. Backfill sets chosen final windows to silver's values "
               "and records each as a correction.", className="empty-note"),
        html.Div(className="reconcile-actions", children=[
            html.Button("Check against silver", id=ids.RECONCILE_CHECK, n_clicks=0, disabled=not available),
            html.Button("Backfill selected windows", id=ids.BACKFILL_APPLY, n_clicks=0, disabled=not available),
            html.Span(id=ids.RECONCILE_MESSAGE, className="control-message", role="status",
                      children=None if available else "Not available in this run."),
        ]),
        dcc.Checklist(id=ids.BACKFILL_CHOICE, className="backfill-choice", options=[], value=[], inline=True),
        html.Div(id=ids.RECONCILE_TABLE),
    ])


def exactly_once_panel() -> html.Section:
    return html.Section(className="panel exactly-once", children=[
        html.H2("Exactly once: what each table holds"),
        html.P("Every Kafka offset once in bronze; every record in silver or quarantine, or dropped as a "
               "redelivery of a trade silver has; gold's trade count equal to silver's on-time trades.",
               className="empty-note"),
        html.Div(className="reconcile-actions", children=[
            html.Button("Count now", id=ids.EXACTLY_ONCE_CHECK, n_clicks=0),
            html.Span(id=ids.EXACTLY_ONCE_MESSAGE, className="control-message", role="status"),
        ]),
        html.Div(id=ids.EXACTLY_ONCE_TABLE),
    ])


def producer_controls(producer_enabled: bool | None, rate: float | None) -> html.Fieldset:
    available = producer_enabled is not None
    return html.Fieldset(className="control-group", children=[
        html.Legend("Producer simulation"),
        dcc.Checklist(id=ids.PRODUCER_SWITCH, className="switch",
                      options=[{"label": " Simulation running", "value": "on", "disabled": not available}],
                      value=["on"] if producer_enabled else []),
        html.Label(["Trades per second ", _number(ids.RATE_INPUT, rate, MIN_RATE, MAX_RATE, "any", not available)]),
        html.Button("Apply", id=ids.RATE_APPLY, n_clicks=0, disabled=not available),
        html.Span(id=ids.CONTROL_MESSAGE, className="control-message", role="status"),
    ])


def chart_toolbar() -> html.Div:
    """What the chart shows: the day, a channel/symbol drill-down, per window or running, ghosts.
    The channel and symbol options are those in silver, filled by a callback (none before it exists)."""
    return html.Div(className="chart-toolbar", children=[
        html.Label(["Day", dcc.Dropdown(id=ids.DAY_PICKER, placeholder="Latest trading day", clearable=True,
                                        searchable=False, className="picker")]),
        html.Label(["Channel", dcc.Dropdown(id=ids.CHANNEL_FILTER, placeholder="All channels", options=[],
                                            clearable=True, searchable=False, className="picker")]),
        html.Label(["Symbol", dcc.Dropdown(id=ids.SYMBOL_FILTER, placeholder="All symbols", options=[],
                                           clearable=True, className="picker")]),
        dcc.RadioItems(id=ids.CHART_MODE, className="radio", inline=True, value=ids.MODE_WINDOW,
                       options=[{"label": " Per window", "value": ids.MODE_WINDOW},
                                {"label": " Running total over the day", "value": ids.MODE_RUNNING}]),
        dcc.Checklist(id=ids.FIRST_REPORTED, className="switch", value=[],
                      options=[{"label": " Show as first reported", "value": "on"}]),
        html.Span(id=ids.CHART_NOTE, className="chart-note"),
    ])


# While playing, the time machine steps to the next version this often.
PLAY_STEP_MS = 500


def time_machine() -> html.Div:
    """Under the chart: a slider over gold's versions (filled by a callback from the table's
    history), Play/Pause stepping through them, Live returning to the current view, and a label
    saying which version the chart shows."""
    return html.Div(className="time-machine", children=[
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
    ])


def build_layout(refresh_ms: int, producer_enabled: bool | None, simulation: Simulation | None = None,
                 watermark_minutes: float | None = None, reconcile_available: bool = False):
    """KPI cards, then the chart (it dominates), then the controls, the late-data panels,
    reconciliation and health."""
    rate = simulation.rate if simulation is not None else None
    return html.Div(className="page", children=[
        html.Header(className="header", children=[
            html.H1("Trade Summary"),
            html.Span("15-minute windows · buy, sell and settlement, live from Kafka", className="subtitle"),
        ]),
        html.Div(id=ids.STATUS_LINE, className="status-line", children="Starting…"),
        html.Section(id=ids.KPI_CARDS, className="kpis"),
        chart_toolbar(),
        dcc.Graph(id=ids.CHART, className="chart", config={"displaylogo": False, "responsive": True}),
        dcc.Graph(id=ids.AS_OF_CHART, className="chart as-of-chart", style={"display": "none"},
                  config={"displaylogo": False, "responsive": True}),
        time_machine(),
        export_buttons(),
        html.Section(className="controls", children=[
            producer_controls(producer_enabled, rate),
            late_trade_controls(simulation, watermark_minutes),
            chaos_controls(simulation),
        ]),
        html.Div(id=ids.LATE_COUNTERS, className="status-line late-counters"),
        html.Section(className="panels", children=[
            html.Div(className="panel", children=[html.H2("Late-arrival corrections (newest first)"),
                                                  html.Div(id=ids.CORRECTIONS_FEED)]),
            html.Div(className="panel", children=[html.H2("Too late to count"),
                                                  html.Div(id=ids.LATE_TRADES_LIST)]),
        ]),
        quarantine_panel(),
        reconciliation_panel(reconcile_available),
        exactly_once_panel(),
        html.Section(className="panel health", children=[
            html.H2("Pipeline health"),
            html.Div(id=ids.HEALTH_QUERIES),
            html.Div(className="health-lag", children=[
                html.Div(id=ids.KAFKA_LAG),
                dcc.Graph(id=ids.LAG_SPARKLINE, className="sparkline", config={"displayModeBar": False}),
            ]),
        ]),
        dcc.Store(id=ids.SNAPSHOT),
        dcc.Store(id=ids.QUARANTINE_STORE),
        dcc.Store(id=ids.RECONCILE_RESULT),
        dcc.Interval(id=ids.TICK, interval=refresh_ms, n_intervals=0),
        dcc.Interval(id=ids.FILTER_TICK, interval=FILTER_REFRESH_MS, n_intervals=0),
    ])
