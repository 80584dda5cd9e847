"""Calls registered Dash callbacks through the app's own HTTP endpoint, as the browser does."""

import base64

import numpy as np


def decode(values):
    """Plotly sends numeric arrays as base64 typed arrays."""
    if isinstance(values, dict) and "bdata" in values:
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]).tolist()
    return list(values)


def call(client, outputs: list[str], inputs: dict, state: dict | None = None) -> dict:
    """outputs: ["id.prop", ...]; inputs/state: {"id.prop": value}; the first input is the trigger.
    Returns {id: {prop: value}}."""
    def props(mapping):
        return [{"id": key.split(".")[0], "property": key.split(".")[1], "value": value}
                for key, value in (mapping or {}).items()]
    output = outputs[0] if len(outputs) == 1 else ".." + "...".join(outputs) + ".."
    described = [{"id": o.split(".")[0], "property": o.split(".")[1]} for o in outputs]
    payload = {"output": output, "outputs": described[0] if len(outputs) == 1 else described,
               "inputs": props(inputs), "state": props(state), "changedPropIds": [next(iter(inputs))]}
    response = client.post("/_dash-update-component", json=payload)
    assert response.status_code == 200, response.data
    return response.get_json()["response"]


def store_snapshot(client, day=None, channel=None, symbol=None) -> dict:
    """What the interval callback puts in the store for the page's current choices."""
    from dashboard import ids

    return call(client, [f"{ids.SNAPSHOT}.data"], {
        f"{ids.TICK}.n_intervals": 1, f"{ids.DAY_PICKER}.value": day, f"{ids.CHANNEL_FILTER}.value": channel,
        f"{ids.SYMBOL_FILTER}.value": symbol})[ids.SNAPSHOT]["data"]
