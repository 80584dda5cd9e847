"""Calls registered Dash callbacks through the app's own HTTP endpoint, as the browser does
(for the tests and the benchmark; a Flask test client, no server needed)."""

from __future__ import annotations

import base64

import numpy as np

from dashboard import ids
from dashboard.context import Drawing
from dashboard.panels import corrections_feed, kpis, pipeline_health


def decode(values):
    """Plotly sends numeric arrays as base64 typed arrays."""
    if isinstance(values, dict) and "bdata" in values:
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]).tolist()
    return list(values)


def call(client, outputs: list[str], inputs: dict, state: dict | None = None, changed: str | None = None) -> dict:
    """outputs: ["id.prop", ...]; inputs/state: {"id.prop": value}, in the callback's order; the
    first input is the trigger unless `changed` ("id.prop") names another. Returns {id: {prop: value}}."""
    def props(mapping):
        return [{"id": key.split(".")[0], "property": key.split(".")[1], "value": value}
                for key, value in (mapping or {}).items()]
    output = outputs[0] if len(outputs) == 1 else ".." + "...".join(outputs) + ".."
    described = [{"id": o.split(".")[0], "property": o.split(".")[1]} for o in outputs]
    payload = {"output": output, "outputs": described[0] if len(outputs) == 1 else described,
               "inputs": props(inputs), "state": props(state), "changedPropIds": [changed or next(iter(inputs))]}
    response = client.post("/_dash-update-component", json=payload)
    if response.status_code != 200:
        raise AssertionError(f"callback {output} answered {response.status_code}: {response.data[:500]!r}")
    return response.get_json()["response"]


def store_snapshot(client, day=None, channel=None, symbol=None) -> dict:
    """What the interval callback puts in the store for the page's current choices."""
    return call(client, [f"{ids.SNAPSHOT}.data", f"{ids.DRAW}.data"], {
        f"{ids.TICK}.n_intervals": 1, f"{ids.DAY_PICKER}.value": day, f"{ids.CHANNEL_FILTER}.value": channel,
        f"{ids.SYMBOL_FILTER}.value": symbol}, {f"{ids.DRAW}.data": 0})[ids.SNAPSHOT]["data"]


def store_quarantine(client, day=None, reason=None) -> dict:
    """What the same tick puts in the quarantine panel's store for the day and reason chosen."""
    return call(client, [f"{ids.QUARANTINE_STORE}.data"], {
        f"{ids.TICK}.n_intervals": 1, f"{ids.DAY_PICKER}.value": day,
        f"{ids.QUARANTINE_REASON}.value": reason})[ids.QUARANTINE_STORE]["data"]


def draw_quarantine(client, view: dict) -> dict:
    """The quarantine panel drawn from its store: {id: {prop: value}}."""
    return call(client, [f"{ids.QUARANTINE_COUNTS}.children", f"{ids.QUARANTINE_LIST}.children",
                         f"{ids.QUARANTINE_REASON}.options"], {f"{ids.QUARANTINE_STORE}.data": view})


DRAWN = {f"{ids.DRAW}.data": 1}  # the store moved: the panels drawn from it redraw


def from_store(client, outputs: list[str], snapshot, inputs: dict | None = None, state: dict | None = None) -> dict:
    """A panel's callback on a store snapshot, as when the server fills the store: DRAW moved
    (then the panel's own inputs), the store as State (then the panel's own state)."""
    return call(client, outputs, {**DRAWN, **(inputs or {})}, {f"{ids.SNAPSHOT}.data": snapshot, **(state or {})})


def chart_choices(mode=ids.MODE_WINDOW, first_reported=None) -> dict:
    """The chart callback's own inputs after DRAW: the chart's redraw store, mode and checklist."""
    return {f"{ids.CHART_DRAW}.data": 0, f"{ids.CHART_MODE}.value": mode,
            f"{ids.FIRST_REPORTED}.value": [] if first_reported is None else first_reported}


def draw_chart(client, snapshot: dict, first_reported: bool = True) -> dict:
    """The chart callback on a store snapshot: the figure."""
    return from_store(client, [f"{ids.CHART}.figure"], snapshot,
                      chart_choices(first_reported=["on"] if first_reported else []))[ids.CHART]["figure"]


def outputs_of(drawing: Drawing) -> list[str]:
    """A panel's outputs as from_store names them ("id.prop")."""
    return [f"{i}.{prop}" for i, prop in drawing.outputs]


def draw_panels(client, snapshot: dict) -> None:
    """Every other callback drawn from the store: KPI cards, feeds, status and health."""
    for drawing in (kpis.DRAWING, corrections_feed.DRAWING, pipeline_health.DRAWING):
        from_store(client, outputs_of(drawing), snapshot)


def refresh_page(client, day=None) -> dict:
    """One refresh of the page as the browser runs it: the interval callback fills the store,
    then every callback drawn from the store runs. Returns the chart figure."""
    snapshot = store_snapshot(client, day)
    figure = draw_chart(client, snapshot)
    draw_panels(client, snapshot)
    draw_quarantine(client, store_quarantine(client, day))
    return figure
