"""The producer controls: the simulation's switch and rate, its late-trade knobs and its chaos knobs.

Each action is checked first against who asks (dashboard/access.py: an operator may act, a viewer
gets a refusal), then each input before the simulator is changed; a wrong value gets a message
instead. An action taken is logged with the user's name."""

from __future__ import annotations

from datetime import timedelta
from typing import cast

from dash import Dash, Input, Output, State, dcc, html

from dashboard import access, ids
from dashboard.context import PageContext
from dashboard.formatting import message_class
from dashboard.inputs import number
from streaming.config import MAX_BEYOND_MINUTES, MAX_RATE, MIN_RATE, Simulation

UNAVAILABLE = "The producer simulation is not available in this run."
SWITCH_INVALID = "The producer switch sent an unexpected value; the simulation is unchanged."
# How this panel's error messages open; every other message says what was done.
ERRORS = ("Enter ", UNAVAILABLE, SWITCH_INVALID, access.REFUSED)
RUNNING, PAUSED = "Simulation running", "Simulation paused"


# -- layout -----------------------------------------------------------------------------------------
def number_input(id_: str, value, low: float, high: float | None, step, disabled: bool) -> dcc.Input:
    return dcc.Input(id=id_, type="number", min=low, max=high, step=step, value=value, disabled=disabled,
                     debounce=True, className="number-input")


def switch_options(enabled: bool | None) -> list[dict]:
    """The switch's one option, labelled with the state it is in: a box ticked reads running, one
    not ticked paused (without a simulation: not available)."""
    label = " Simulation not available" if enabled is None else f" {RUNNING if enabled else PAUSED}"
    return [{"label": label, "value": "on", "disabled": enabled is None}]


def switch_and_rate(producer_enabled: bool | None, rate: float | None) -> html.Div:
    """The switch and the rate, compact, for the page's top bar."""
    available = producer_enabled is not None
    return html.Div(className="producer-bar", role="group", title="Producer simulation", children=[
        dcc.Checklist(id=ids.PRODUCER_SWITCH, className="switch", options=switch_options(producer_enabled),
                      value=["on"] if producer_enabled else []),
        html.Label(className="rate", children=[
            "Trades/s ", number_input(ids.RATE_INPUT, rate, MIN_RATE, MAX_RATE, "any", not available)]),
        html.Button("Apply", id=ids.RATE_APPLY, n_clicks=0, disabled=not available),
        html.Span(id=ids.CONTROL_MESSAGE, className="message", role="status"),
    ])


def late_trade_controls(simulation: Simulation | None, watermark_minutes: float | None) -> html.Fieldset:
    """The simulator's late-trade knobs, in percent and market minutes."""
    disabled = simulation is None
    late = beyond = max_minutes = beyond_minutes = None
    if simulation is not None:
        watermark = cast(float, watermark_minutes)  # given with a simulation (create_app)
        late, beyond = round(simulation.late_share * 100, 2), round(simulation.beyond_watermark_share * 100, 2)
        lateness = simulation.max_lateness
        max_minutes = round(lateness.total_seconds() / 60 if lateness else 0.9 * watermark, 1)
        beyond_by = simulation.max_beyond
        beyond_minutes = round(beyond_by.total_seconds() / 60 if beyond_by else watermark, 1)
    return html.Fieldset(className="control-group", children=[
        html.Legend("Late trades"),
        html.Label(["Late ", number_input(ids.LATE_SHARE_INPUT, late, 0, 100, "any", disabled), " % of trades"]),
        html.Label(["of which beyond the watermark ",
                    number_input(ids.BEYOND_SHARE_INPUT, beyond, 0, 100, "any", disabled), " %"]),
        html.Label(["by up to ", number_input(ids.MAX_BEYOND_INPUT, beyond_minutes, 0.1, MAX_BEYOND_MINUTES, "any",
                                              disabled), " min,"]),
        html.Label(["the others late by up to ",
                    number_input(ids.MAX_LATENESS_INPUT, max_minutes, 0.1, watermark_minutes, "any", disabled),
                    f" min (watermark {watermark_minutes:g} min)" if watermark_minutes else " min"]),
        html.Button("Apply", id=ids.LATE_APPLY, n_clicks=0, disabled=disabled),
        html.Span(id=ids.LATE_MESSAGE, className="message", role="status"),
    ])


def chaos_controls(simulation: Simulation | None) -> html.Fieldset:
    """The simulator's duplicate and malformed shares, in percent."""
    disabled = simulation is None
    duplicate = malformed = None
    if simulation is not None:
        duplicate, malformed = round(simulation.duplicate_share * 100, 2), round(simulation.malformed_share * 100, 2)
    return html.Fieldset(className="control-group", children=[
        html.Legend("Chaos"),
        html.Label(["Duplicates ", number_input(ids.DUPLICATE_SHARE_INPUT, duplicate, 0, 100, "any", disabled),
                    " % of trades"]),
        html.Label(["malformed ", number_input(ids.MALFORMED_SHARE_INPUT, malformed, 0, 100, "any", disabled),
                    " % of records"]),
        html.Button("Apply", id=ids.CHAOS_APPLY, n_clicks=0, disabled=disabled),
        html.Span(id=ids.CHAOS_MESSAGE, className="message", role="status"),
    ])


def knobs(simulation: Simulation | None = None, watermark_minutes: float | None = None) -> html.Section:
    """The late-trade and chaos knobs (the switch and rate are in the top bar)."""
    return html.Section(className="controls", children=[
        late_trade_controls(simulation, watermark_minutes),
        chaos_controls(simulation),
    ])


# -- the inputs, checked --------------------------------------------------------------------------
def switch_value(value) -> bool | None:
    """The producer switch's checklist value -> on/off; None when it is not a checklist value
    (a list holding at most "on")."""
    if not isinstance(value, list) or any(item != "on" for item in value):
        return None
    return bool(value)


def validate_rate(rate) -> str | None:
    """A message for an unusable rate, or None when it is fine."""
    value = parse_rate(rate)
    return value if isinstance(value, str) else None


def parse_rate(rate) -> float | str:
    """The rate as a number of trades per second, or a message saying what is wrong."""
    value = number(rate)
    if value is None or not MIN_RATE <= value <= MAX_RATE:
        return f"Enter a rate between {MIN_RATE:g} and {MAX_RATE:,.0f} trades per second."
    return value


def late_knobs(late_percent, beyond_percent, max_minutes, watermark_minutes: float, beyond_minutes) -> dict | str:
    """Simulator knobs from the page's inputs, or a message saying what is wrong."""
    late, beyond, lateness = number(late_percent), number(beyond_percent), number(max_minutes)
    beyond_by = number(beyond_minutes)
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
    duplicate, malformed = number(duplicate_percent), number(malformed_percent)
    if duplicate is None or not 0 <= duplicate <= 100:
        return "Enter the duplicate share as a percentage between 0 and 100."
    if malformed is None or not 0 <= malformed <= 100:
        return "Enter the malformed share as a percentage between 0 and 100."
    return {"duplicate_share": duplicate / 100, "malformed_share": malformed / 100}


def chaos_knobs_message(knobs: dict) -> str:
    return (f"{knobs['duplicate_share'] * 100:g} % of trades sent twice, "
            f"{knobs['malformed_share'] * 100:g} % of records malformed.")


# -- callbacks --------------------------------------------------------------------------------------
def register(app: Dash, context: PageContext) -> None:
    simulator = context.simulator

    @app.callback(Output(ids.PRODUCER_SWITCH, "options"), Input(ids.PRODUCER_SWITCH, "value"),
                  prevent_initial_call=True)
    def label_switch(value):
        """The switch's label follows the box at once (the status line follows the simulator); for
        someone who may not switch, it keeps saying what the simulator does."""
        if simulator is None:
            return switch_options(None)
        may_switch = access.may(access.current_user(), access.PRODUCER)
        return switch_options(bool(switch_value(value)) if may_switch else simulator.enabled)

    for message in (ids.CONTROL_MESSAGE, ids.LATE_MESSAGE, ids.CHAOS_MESSAGE):
        app.callback(Output(message, "className"), Input(message, "children"),
                     prevent_initial_call=True)(lambda text: message_class(text, ERRORS))

    @app.callback(Output(ids.CHAOS_MESSAGE, "children"), Input(ids.CHAOS_APPLY, "n_clicks"),
                  State(ids.DUPLICATE_SHARE_INPUT, "value"), State(ids.MALFORMED_SHARE_INPUT, "value"),
                  prevent_initial_call=True)
    def apply_chaos_knobs(_clicks, duplicate_percent, malformed_percent):
        if simulator is None:
            return UNAVAILABLE
        user, refused = access.check(access.CHAOS_KNOBS)
        if refused:
            return refused
        knobs = chaos_knobs(duplicate_percent, malformed_percent)
        if isinstance(knobs, str):
            return knobs
        message = chaos_knobs_message(knobs)
        simulator.configure(**knobs)
        access.acted(user, f"set the chaos knobs: {message}")
        return message

    @app.callback(Output(ids.CONTROL_MESSAGE, "children", allow_duplicate=True),
                  Input(ids.PRODUCER_SWITCH, "value"), prevent_initial_call=True)
    def toggle_producer(value):
        if simulator is None:
            return UNAVAILABLE
        user, refused = access.check(access.PRODUCER)
        if refused:
            return refused
        enabled = switch_value(value)
        if enabled is None:
            return SWITCH_INVALID
        simulator.set_enabled(enabled)
        access.acted(user, f"turned the producer {'on' if enabled else 'off'}")
        return f"{RUNNING if simulator.enabled else PAUSED}."

    @app.callback(Output(ids.CONTROL_MESSAGE, "children"),
                  Input(ids.RATE_APPLY, "n_clicks"), State(ids.RATE_INPUT, "value"),
                  prevent_initial_call=True)
    def apply_rate(_clicks, rate):
        if simulator is None:
            return UNAVAILABLE
        user, refused = access.check(access.RATE)
        if refused:
            return refused
        value = parse_rate(rate)
        if isinstance(value, str):
            return value
        message = f"Rate set to {value:g} trades/s."
        simulator.configure(rate=value)
        access.acted(user, f"set the producer's rate to {value:g} trades/s")
        return message

    @app.callback(Output(ids.LATE_MESSAGE, "children"), Input(ids.LATE_APPLY, "n_clicks"),
                  State(ids.LATE_SHARE_INPUT, "value"), State(ids.BEYOND_SHARE_INPUT, "value"),
                  State(ids.MAX_LATENESS_INPUT, "value"), State(ids.MAX_BEYOND_INPUT, "value"),
                  prevent_initial_call=True)
    def apply_late_knobs(_clicks, late_percent, beyond_percent, max_minutes, beyond_minutes):
        if simulator is None:
            return UNAVAILABLE
        user, refused = access.check(access.LATE_KNOBS)
        if refused:
            return refused
        watermark_minutes = simulator.watermark.total_seconds() / 60
        knobs = late_knobs(late_percent, beyond_percent, max_minutes, watermark_minutes, beyond_minutes)
        if isinstance(knobs, str):
            return knobs
        message = late_knobs_message(knobs)  # from the validated numbers, before anything is applied
        simulator.configure(**knobs)
        access.acted(user, f"set the late-trade knobs: {message}")
        return message
