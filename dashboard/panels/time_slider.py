"""The time machine: a slider over the shown day's changes (Play at 1x to 600x, Pause, Live), the
chart as it stood at the chosen instant, and each change of a window clicked on either chart.

Built on gold's change history (gold/summary_history, medallion/history.py): the chart at an
instant is drawn in the live chart's place, by the same figure code."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
from dash import ClientsideFunction, Dash, Input, Output, State, ctx, dcc, html, no_update

from dashboard import figures, ids
from dashboard.context import Drawing, PageContext
from dashboard.data import as_of, first_values, history_windows, snapshot_from
from dashboard.formatting import money
from dashboard.inputs import choice
from dashboard.panels.chart import first_reported_shown
from streaming.medallion.history import BACKFILL, LATE, ON_TIME, REPLAY, made_by, revisions

LIVE_LABEL = "Live"
NO_HISTORY = "No history of this day yet: gold's changes of its windows are recorded as they are made."
PICK_A_WINDOW = "Click a window on the chart to see each change of it."
# Either chart, shown, keeps its box's height (figures.CHART_BOX): it is drawn while hidden.
SHOWN = figures.CHART_BOX
HIDDEN = {"display": "none"}
PLAY_TICK_MS = 1000  # while playing, the instant moves on this often
SPEEDS = (1, 10, 60, 600)  # times the wall clock: a tick moves the instant on PLAY_TICK_MS x speed
DEFAULT_SPEED = 60
MARK_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
MOST_MARKS = 6
CAUSES = {ON_TIME: "on time", LATE: "late trades", BACKFILL: "backfill", REPLAY: "replay"}


def chart() -> dcc.Graph:
    """The chart at an instant, in the live chart's place (hidden while Live)."""
    return dcc.Graph(id=ids.AS_OF_CHART, className="chart as-of-chart", style={"display": "none"},
                     config={"displaylogo": False, "responsive": True})


def controls() -> list:
    """The slider over the day's changes, Play/Pause with its speed, Live, a label saying what
    the chart shows, and the revisions of the window last clicked."""
    return [
        html.Div(className="time-machine", children=[
            html.Span("History", className="time-machine-title"),
            html.Button("Play", id=ids.TM_PLAY, n_clicks=0, className="time-machine-play"),
            dcc.RadioItems(id=ids.TM_SPEED, className="radio time-machine-speed", inline=True, value=DEFAULT_SPEED,
                           options=[{"label": f" {speed}x", "value": speed} for speed in SPEEDS]),
            html.Div(className="time-machine-slider", children=[
                # Epoch seconds; the tooltip shows them as a UTC time (assets/time_machine.js).
                dcc.Slider(id=ids.TM_SLIDER, min=0, max=0, step=1, value=None, marks={}, disabled=True,
                           updatemode="mouseup", allow_direct_input=False,
                           tooltip={"placement": "bottom", "always_visible": False, "transform": "utcClock"})]),
            html.Button("Live", id=ids.TM_LIVE, n_clicks=0, className="time-machine-live"),
            html.Span(LIVE_LABEL, id=ids.TM_LABEL, className="time-machine-label", role="status"),
            dcc.Store(id=ids.AS_OF),
            dcc.Store(id=ids.TM_CHOSEN),
            dcc.Store(id=ids.REVISION_WINDOW),
            dcc.Interval(id=ids.TM_PLAY_TICK, interval=PLAY_TICK_MS, n_intervals=0, disabled=True),
        ]),
        html.Div(id=ids.REVISIONS, className="revisions", children=html.P(PICK_A_WINDOW, className="empty-note")),
    ]


def _clock(seconds: int, with_seconds: bool = True) -> str:
    return f"{pd.Timestamp(seconds, unit='s', tz='UTC'):%H:%M:%S}"[:8 if with_seconds else 5]


def slider_marks(span: list[int] | None) -> dict:
    """Up to MOST_MARKS marks at round times of the span (epoch seconds), labelled HH:MM (HH:MM:SS
    when they are less than a minute apart)."""
    if not span:
        return {}
    low, high = span
    # A span of days (a backfill long after) gets marks at even steps rather than a mark per day.
    step = next((s for s in MARK_STEPS if (high - low) / s <= MOST_MARKS), -(-(high - low) // MOST_MARKS))
    first = -(-low // step) * step
    return {str(at): _clock(at, step < 60) for at in range(first, high + 1, step)} or {str(low): _clock(low)}


def slider_range(span: list[int] | None) -> tuple[int, int, dict, bool]:
    """(min, max, marks, disabled) of the slider for a day's history span (history_span)."""
    if not span:
        return 0, 0, {}, True
    return span[0], span[1], slider_marks(span), False


def live_slider_range(live) -> tuple[int, int, dict, bool]:
    """slider_range of the snapshot store's history_span."""
    span = live.get("history_span") if isinstance(live, dict) else None
    return slider_range(span if isinstance(span, list) and len(span) == 2 else None)


SLIDER = Drawing("slider", ((ids.TM_SLIDER, "min"), (ids.TM_SLIDER, "max"), (ids.TM_SLIDER, "marks"),
                           (ids.TM_SLIDER, "disabled")), live_slider_range, tab=ids.TAB_TIME_MACHINE)


def _seconds(value) -> int | None:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def speed_of(value) -> int:
    """The speed chosen (times the wall clock); DEFAULT_SPEED for anything but one of SPEEDS."""
    speed = _seconds(value)
    return speed if speed in SPEEDS else DEFAULT_SPEED


def is_live(value, high) -> bool:
    """Whether a slider value means Live: none chosen, or the handle at the slider's right end
    (`high`, its max: the newest instant), where Live puts it and where playing ends."""
    seconds, newest = _seconds(value), _seconds(high)
    return value is None or (seconds is not None and newest is not None and seconds >= newest)


def next_instant(trigger, value, paused, speed, span: list[int] | None) -> tuple:
    """(slider value, play tick disabled, play button text) after Play/Pause, a play tick, Live or
    another day. Play starts from the day's first change (or goes on from the instant shown);
    each tick moves the instant on PLAY_TICK_MS x speed, up to the day's last change, where it
    stops: Live (is_live). Live, and another day, return to the live chart with the handle at
    the right end (another day's range then moves it to that day's end: assets/time_machine.js)."""
    if trigger in (ids.TM_LIVE, ids.DAY_PICKER):
        return span[1] if span else None, True, "Play"
    playing = paused is False
    # A tick that comes after a pause (or Live) moves nothing.
    if not span or (trigger == ids.TM_PLAY) == playing:
        return no_update, True, "Play"
    low, high = span
    current = _seconds(value)
    if trigger == ids.TM_PLAY:
        start = current if current is not None and low <= current < high else low
        return start, start >= high, "Play" if start >= high else "Pause"
    later = min(max(current if current is not None else low, low) + PLAY_TICK_MS * speed_of(speed) // 1000, high)
    return later, later >= high, "Play" if later >= high else "Pause"


def instant_of(value, span: list[int] | None) -> pd.Timestamp | str:
    """The instant (UTC) a slider value stands for: the end of its second, so that "as of 10:42:07"
    holds the changes stamped 10:42:07.xxx; or a message when it is not one of the day's."""
    if not span:
        return NO_HISTORY
    seconds = _seconds(value)
    if seconds is None or not span[0] <= seconds <= span[1]:
        return (f"{value!r} is not an instant of this day's history ({_clock(span[0])} to {_clock(span[1])} UTC): "
                "choose one on the slider.")
    return pd.Timestamp(seconds, unit="s", tz="UTC") + pd.Timedelta(microseconds=999_999)


def as_of_snapshot(ordered: pa.Table, instant: pd.Timestamp, corrections: pd.DataFrame, late_trades: pd.DataFrame,
                   day: str, days: list[str]) -> dict:
    """The snapshot of the day as it stood at `instant`, built as the live one is (snapshot_from)
    from the day's history in change order: each window's last change by then, the ghost of what
    was first reported by then, and only the corrections and too-late trades known by then."""
    late = as_of(late_trades, "detected_at", instant)
    if "backfilled_at" in late and not late.empty:  # a backfill after that moment had not happened yet
        late = late.assign(backfilled_at=late["backfilled_at"].where(
            pd.to_datetime(late["backfilled_at"], utc=True) <= instant))
    known = made_by(ordered, instant)
    snapshot = snapshot_from(history_windows(known), as_of(corrections, "corrected_at", instant), late,
                             day, days=days if day in days else [day], first=first_values(known))
    snapshot["as_of"] = {"at": instant.isoformat(), "label": f"as of {instant:%Y-%m-%d %H:%M:%S} UTC"}
    return snapshot


def shown_instant(past) -> pd.Timestamp | None:
    """The instant an as-of snapshot (the AS_OF store) stands for; None while Live."""
    at = past.get("as_of", {}).get("at") if isinstance(past, dict) and isinstance(past.get("as_of"), dict) else None
    try:
        return figures.utc_time(at) if isinstance(at, str) else None
    except ValueError:
        return None


def clicked_window(click) -> str | None:
    """The window start (UTC ISO) of a point clicked on a chart: its customdata, else its x
    (Plotly gives a date axis's x as '2026-03-02 09:15', without a zone: UTC)."""
    points = click.get("points") if isinstance(click, dict) else None
    point = points[0] if isinstance(points, list) and points and isinstance(points[0], dict) else {}
    for value in (point.get("customdata"), point.get("x")):
        if isinstance(value, str):
            try:
                return figures.utc_time(value).isoformat()
            except ValueError:
                continue
    return None


def revision_rows(ordered: pa.Table, window_start: str, instant: pd.Timestamp | None = None) -> list[dict]:
    """Each change of one window, oldest first: its time, values after it and cause; `later` for
    a change made after the instant shown."""
    return [{"changed_at": row["changed_at"].isoformat(), "buy": row["buy_amount"], "sell": row["sell_amount"],
             "net": row["settlement_amount"], "trades": row["trade_count"], "cause": row["cause"],
             "later": instant is not None and row["changed_at"] > instant}
            for row in revisions(ordered, pd.Timestamp(window_start)).to_pylist()]


def revisions_panel(window_start: str | None, rows: list[dict], instant: pd.Timestamp | None):
    """The window's changes as a small table under a title that says which window and as of when."""
    if window_start is None:
        return html.P(PICK_A_WINDOW, className="empty-note")
    window = f"{window_start[:10]} {window_start[11:16]} window"
    if not rows:
        return html.P(f"{window}: no change recorded in gold's history.", className="empty-note")
    known = sum(not row["later"] for row in rows)
    title = (f"{window}: {len(rows)} change{'s' if len(rows) != 1 else ''}" if instant is None else
             f"{window}: {known} of {len(rows)} changes made by {instant:%H:%M:%S} UTC (later ones faded)")
    header = ["Changed at (UTC)", "Buy", "Sell", "Net", "Trades", "Cause"]
    body = [html.Tr(className="after-instant" if row["later"] else None, children=[
        html.Td(row["changed_at"][:19].replace("T", " ")), html.Td(money(row["buy"])), html.Td(money(row["sell"])),
        html.Td(money(row["net"])), html.Td(f"{row['trades']:,}"), html.Td(CAUSES.get(row["cause"], row["cause"]))])
        for row in rows]
    return [html.H3(title), html.Table(className="feed", children=[
        html.Thead(html.Tr([html.Th(h) for h in header])), html.Tbody(body)])]


def register(app: Dash, context: PageContext) -> None:
    readers = context.readers

    @app.callback(Output(ids.AS_OF_CHART, "figure"), Output(ids.AS_OF_CHART, "style"), Output(ids.CHART, "style"),
                  Input(ids.AS_OF, "data"), Input(ids.CHART_MODE, "value"), Input(ids.FIRST_REPORTED, "value"))
    def draw_as_of_chart(past, mode, first_reported):
        """The time machine's chart, by the same figure code as the live one, in its place while
        an instant is chosen (the live chart keeps updating, hidden, and is shown again on Live)."""
        if shown_instant(past) is None:
            return no_update, HIDDEN, SHOWN
        figure = figures.summary_figure(past, mode, first_reported=first_reported_shown(first_reported))
        return figures.as_of_figure(figure, past["as_of"].get("label")), SHOWN, HIDDEN

    @app.callback(*(Output(i, prop) for i, prop in SLIDER.outputs), Input(ids.DRAW, "data"),
                  State(ids.SNAPSHOT, "data"), State(ids.TM_SLIDER, "min"), State(ids.TM_SLIDER, "max"),
                  State(ids.TM_SLIDER, "disabled"), prevent_initial_call=True)
    def spread_slider(_draw, live, low, high, disabled):
        """The slider over the shown day's changes (the store's history_span); nothing is sent
        while they span the same."""
        new = context.drawn(SLIDER, live)
        if (new[0], new[1], new[3]) == (low, high, disabled):
            return no_update, no_update, no_update, no_update
        return new

    # In Live the handle follows the newest instant to the slider's new right end, in the page: it
    # alone knows where the end was before; and the handle following it asks the server nothing
    # (assets/time_machine.js). The callback sets its own input, which Dash does not call it back for.
    app.clientside_callback(ClientsideFunction("timeMachine", "move"),
                            Output(ids.TM_SLIDER, "value", allow_duplicate=True), Output(ids.TM_CHOSEN, "data"),
                            Input(ids.TM_SLIDER, "max"), Input(ids.TM_SLIDER, "value"),
                            State(ids.TM_SLIDER, "disabled"), State(ids.TM_LABEL, "children"),
                            prevent_initial_call=True)

    @app.callback(Output(ids.AS_OF, "data"), Output(ids.TM_LABEL, "children"), Input(ids.TM_CHOSEN, "data"),
                  State(ids.DAY_PICKER, "value"), State(ids.TM_SLIDER, "max"), State(ids.TM_LABEL, "children"))
    def choose_instant(value, day, high, label):
        """The shown day's snapshot as it stood at the chosen instant (None: Live)."""
        if is_live(value, high):
            # In Live the handle follows each new change: the page needs nothing new.
            return (no_update, no_update) if label == LIVE_LABEL else (None, LIVE_LABEL)
        shown = context.shown_day(choice(day))
        history = context.day_history(shown)
        instant = instant_of(value, history["span"] if shown is not None else None)
        if isinstance(instant, str):
            return None, instant
        assert shown is not None
        snapshot = as_of_snapshot(history["history"], instant, readers.corrections.read(shown),
                                  readers.late_trades.read(shown), shown, context.gold_days())
        return snapshot, snapshot["as_of"]["label"]

    @app.callback(Output(ids.TM_SLIDER, "value"), Output(ids.TM_PLAY_TICK, "disabled"), Output(ids.TM_PLAY, "children"),
                  Input(ids.TM_PLAY, "n_clicks"), Input(ids.TM_PLAY_TICK, "n_intervals"),
                  Input(ids.TM_LIVE, "n_clicks"), Input(ids.DAY_PICKER, "value"),
                  State(ids.TM_SLIDER, "value"), State(ids.TM_PLAY_TICK, "disabled"), State(ids.TM_SPEED, "value"),
                  State(ids.TM_SLIDER, "min"), State(ids.TM_SLIDER, "max"), State(ids.TM_SLIDER, "disabled"),
                  prevent_initial_call=True)
    def play(_play, _tick, _live, _day, value, paused, speed, low, high, no_history):
        """Play/Pause moves the instant on at the chosen speed; Live, or another day, returns to the live chart."""
        span = None if no_history or _seconds(low) is None or _seconds(high) is None else [low, high]
        return next_instant(ctx.triggered_id, value, paused, speed, span)

    @app.callback(Output(ids.REVISION_WINDOW, "data"), Input(ids.CHART, "clickData"),
                  Input(ids.AS_OF_CHART, "clickData"), prevent_initial_call=True)
    def choose_window(live_click, past_click):
        """The window of the point last clicked, on the live chart or the one at an instant."""
        window = clicked_window(past_click if ctx.triggered_id == ids.AS_OF_CHART else live_click)
        return window if window is not None else no_update

    @app.callback(Output(ids.REVISIONS, "children"), Input(ids.REVISION_WINDOW, "data"), Input(ids.AS_OF, "data"),
                  prevent_initial_call=True)
    def draw_revisions(window, past):
        """Each change of the window clicked, from its day's history; those after the instant shown faded."""
        window = choice(window)
        if window is None:
            return no_update
        instant = shown_instant(past)
        return revisions_panel(window, revision_rows(readers.history.read(window[:10]), window, instant), instant)
