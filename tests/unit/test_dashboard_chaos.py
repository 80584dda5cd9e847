"""The chaos controls: the simulator's duplicate and malformed shares set from the page, in
percent; a wrong type or range answers with a message and applies nothing; without a
simulator the controls are disabled."""

from __future__ import annotations

import pytest

from dashboard import ids
from dashboard.client import call
from dashboard.dash_app import create_app
from dashboard.panels.producer import UNAVAILABLE
from tests.unit.test_dashboard_guards import NOT_NUMBERS, FakeSimulator


def apply(client, duplicate, malformed) -> str:
    return call(client, [f"{ids.CHAOS_MESSAGE}.children"], {f"{ids.CHAOS_APPLY}.n_clicks": 1},
                {f"{ids.DUPLICATE_SHARE_INPUT}.value": duplicate,
                 f"{ids.MALFORMED_SHARE_INPUT}.value": malformed})[ids.CHAOS_MESSAGE]["children"]


@pytest.fixture
def simulator():
    return FakeSimulator()


@pytest.fixture
def client(tmp_path, simulator):
    return create_app(tmp_path, simulator=simulator).server.test_client()


def test_chaos_knobs_are_applied_as_shares(client, simulator):
    assert apply(client, 5, "12.5") == "5 % of trades sent twice, 12.5 % of records malformed."
    assert simulator.calls == [("configure", {"duplicate_share": 0.05, "malformed_share": 0.125})]
    assert (simulator.simulation.duplicate_share, simulator.simulation.malformed_share) == (0.05, 0.125)


@pytest.mark.parametrize("duplicate, malformed", [(0, 0), (100, 100)])
def test_chaos_knobs_accept_the_ends_of_the_range(client, simulator, duplicate, malformed):
    apply(client, duplicate, malformed)
    assert simulator.calls == [("configure", {"duplicate_share": duplicate / 100, "malformed_share": malformed / 100})]


@pytest.mark.parametrize("value", [-0.1, 100.5, *NOT_NUMBERS])
def test_a_wrong_duplicate_share_is_rejected_and_nothing_applied(client, simulator, value):
    assert apply(client, value, 1) == "Enter the duplicate share as a percentage between 0 and 100."
    assert simulator.calls == []


@pytest.mark.parametrize("value", [-1, 101, *NOT_NUMBERS])
def test_a_wrong_malformed_share_is_rejected_and_nothing_applied(client, simulator, value):
    assert apply(client, 1, value) == "Enter the malformed share as a percentage between 0 and 100."
    assert simulator.calls == []


def test_chaos_controls_show_the_simulators_shares(client, simulator):
    simulator.configure(duplicate_share=0.02, malformed_share=0.005)
    layout = client.get("/_dash-layout").get_json()
    inputs = {c["props"]["id"]: c["props"] for c in walk(layout) if c.get("type") == "Input"}
    assert inputs[ids.DUPLICATE_SHARE_INPUT]["value"] == 2 and inputs[ids.MALFORMED_SHARE_INPUT]["value"] == 0.5
    assert not inputs[ids.DUPLICATE_SHARE_INPUT]["disabled"]


def test_without_a_simulator_the_chaos_controls_are_disabled_and_say_so(tmp_path):
    client = create_app(tmp_path).server.test_client()
    layout = client.get("/_dash-layout").get_json()
    components = {c["props"].get("id"): c["props"] for c in walk(layout)}
    assert all(components[i]["disabled"] for i in (ids.DUPLICATE_SHARE_INPUT, ids.MALFORMED_SHARE_INPUT,
                                                   ids.CHAOS_APPLY))
    assert apply(client, 5, 5) == UNAVAILABLE


def walk(component):
    if isinstance(component, dict):
        if "props" in component:
            yield component
            yield from walk(component["props"].get("children"))
    elif isinstance(component, list):
        for child in component:
            yield from walk(child)
