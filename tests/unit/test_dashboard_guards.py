"""The dashboard's guards: every page control answers a wrong value with its message and applies
nothing, and only requests for an allowed Host (and, for a POST, from an allowed Origin) are
served. Driven through Dash's own callback endpoint with Flask's test client, with small fakes
for the simulator and the reconciler: this is the page's validation, not Kafka's or Spark's."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from types import SimpleNamespace

import pytest

from dashboard import ids
from dashboard.client import call, chart_choices, from_store, store_snapshot
from dashboard.dash_app import create_app
from dashboard.panels.producer import SWITCH_INVALID
from dashboard.panels.reconciliation import CHOOSE_WINDOWS
from streaming.config import Settings, Simulation, UsageError
from streaming.run.cli import parse_settings

# Wrong types and values as the page's callback endpoint can receive them in its JSON.
NOT_NUMBERS = [
    pytest.param("abc", id="text"), pytest.param(None, id="null"), pytest.param(float("nan"), id="nan"),
    pytest.param([5], id="list"), pytest.param({"value": 5}, id="object"), pytest.param(True, id="bool"),
    pytest.param(10**400, id="huge-int"), pytest.param(1e308, id="huge-float"), pytest.param("1e999", id="huge-text"),
    pytest.param(float("inf"), id="infinity"), pytest.param("", id="empty-text"),
]


@dataclasses.dataclass
class Stats:
    enabled: bool
    rate: float


class FakeSimulator:
    """What the page uses of a TradeSimulator, recording what it is told to do."""

    def __init__(self):
        self.simulation = Simulation()
        self.watermark = timedelta(minutes=30)
        self.enabled = False
        self.calls: list = []

    def configure(self, **knobs):
        self.calls.append(("configure", knobs))
        self.simulation = dataclasses.replace(self.simulation, **knobs)
        return self.simulation

    def set_enabled(self, enabled: bool):
        self.calls.append(("set_enabled", enabled))
        self.enabled = enabled

    def stats(self) -> Stats:
        return Stats(self.enabled, self.simulation.rate)


class FakeReconciler:
    def __init__(self):
        self.calls: list = []

    def backfill(self, starts):
        self.calls.append(("backfill", starts))
        raise AssertionError("backfill must not run for a rejected choice")

    def reconcile(self, day):
        self.calls.append(("reconcile", day))
        raise AssertionError("reconcile must not run for a rejected snapshot")


@pytest.fixture
def simulator():
    return FakeSimulator()


@pytest.fixture
def app(tmp_path, simulator):
    return create_app(tmp_path, simulator=simulator)


@pytest.fixture
def client(app):
    return app.server.test_client()


def apply_rate(client, rate) -> str:
    return call(client, [f"{ids.CONTROL_MESSAGE}.children"], {f"{ids.RATE_APPLY}.n_clicks": 1},
                {f"{ids.RATE_INPUT}.value": rate})[ids.CONTROL_MESSAGE]["children"]


LATE_INPUTS = {"late": ids.LATE_SHARE_INPUT, "beyond": ids.BEYOND_SHARE_INPUT, "minutes": ids.MAX_LATENESS_INPUT,
               "beyond_by": ids.MAX_BEYOND_INPUT}
GOOD_LATE = {"late": 30, "beyond": 50, "minutes": 10, "beyond_by": 20}


def apply_late(client, **values) -> str:
    state = {f"{LATE_INPUTS[name]}.value": value for name, value in {**GOOD_LATE, **values}.items()}
    return call(client, [f"{ids.LATE_MESSAGE}.children"], {f"{ids.LATE_APPLY}.n_clicks": 1},
                state)[ids.LATE_MESSAGE]["children"]


def switch(app, value) -> str:
    # The switch writes the rate's message line too (allow_duplicate): Dash keys its output with a hash.
    output = next(key for key in app.callback_map if key.startswith(f"{ids.CONTROL_MESSAGE}.children@"))
    return call(app.server.test_client(), [output],
                {f"{ids.PRODUCER_SWITCH}.value": value})[ids.CONTROL_MESSAGE]["children"]


# -- finding 1: wrong values in the controls --------------------------------------------------

@pytest.mark.parametrize("rate", NOT_NUMBERS)
def test_rate_input_answers_a_wrong_value_with_its_message_and_changes_nothing(client, simulator, rate):
    assert apply_rate(client, rate) == "Enter a rate between 0.1 and 100,000 trades per second."
    assert simulator.calls == [] and simulator.simulation.rate == Simulation.rate


def test_rate_given_as_numeric_text_is_applied_and_reported_from_the_parsed_number(client, simulator):
    assert apply_rate(client, "2.5") == "Rate set to 2.5 trades/s."
    assert simulator.calls == [("configure", {"rate": 2.5})]


@pytest.mark.parametrize("field, message", [
    ("late", "late share"), ("beyond", "beyond-watermark share"), ("minutes", "less than the watermark"),
    ("beyond_by", "how far beyond the watermark"),
])
@pytest.mark.parametrize("value", NOT_NUMBERS)
def test_each_late_trade_input_answers_a_wrong_value_with_its_message_and_changes_nothing(
        client, simulator, field, message, value):
    before = simulator.simulation
    assert message in apply_late(client, **{field: value})
    assert simulator.calls == [] and simulator.simulation == before


def test_late_trade_knobs_given_as_numeric_text_are_applied_and_reported_without_a_server_error(client, simulator):
    # The reported bug: text that parses passed validation, the knobs were applied, then the
    # message's {:g} failed on the text and the page got a 500.
    message = apply_late(client, late="30", beyond="50", minutes="10", beyond_by="20")
    assert message == ("30 % of trades late, 50 % of those beyond the watermark by up to 20 min, "
                       "the others up to 10 min late.")
    sim = simulator.simulation
    assert (sim.late_share, sim.beyond_watermark_share, sim.max_lateness, sim.max_beyond) == \
        (0.3, 0.5, timedelta(minutes=10), timedelta(minutes=20))
    assert len(simulator.calls) == 1


def test_one_wrong_late_trade_input_applies_none_of_the_others(client, simulator):
    assert "how far beyond" in apply_late(client, late=1, beyond=1, minutes=1, beyond_by="soon")
    assert simulator.calls == [] and simulator.simulation.late_share == Simulation.late_share


@pytest.mark.parametrize("value", ["on", None, True, 5, ["on", "off"], [["on"]], {"on": True}])
def test_producer_switch_answers_a_wrong_value_with_its_message_and_changes_nothing(app, simulator, value):
    assert switch(app, value) == SWITCH_INVALID
    assert simulator.calls == [] and not simulator.enabled


def test_producer_switch_still_turns_the_simulation_on_and_off(app, simulator):
    assert switch(app, ["on"]) == "Simulation running." and simulator.enabled
    assert switch(app, []) == "Simulation paused." and not simulator.enabled


SNAPSHOT = {"windows": [{"window_start": "2026-03-02T09:00:00+00:00"}]}


def reconcile(client, trigger, chosen, snapshot) -> str:
    other = ids.RECONCILE_CHECK if trigger == ids.BACKFILL_APPLY else ids.BACKFILL_APPLY
    return call(client, [f"{ids.RECONCILE_RESULT}.data", f"{ids.RECONCILE_MESSAGE}.children"],
                {f"{trigger}.n_clicks": 1, f"{other}.n_clicks": 0},
                {f"{ids.BACKFILL_CHOICE}.value": chosen, f"{ids.SNAPSHOT}.data": snapshot})[ids.RECONCILE_MESSAGE][
        "children"]


@pytest.mark.parametrize("chosen", ["2026-03-02T09:00:00+00:00", None, [], [1], [None], ["soon"],
                                    ["2026-03-02T09:00:00"], {"a": 1}, True])
def test_backfill_answers_a_wrong_choice_with_its_message_and_backfills_nothing(tmp_path, chosen):
    reconciler = FakeReconciler()
    client = create_app(tmp_path, reconciler=reconciler).server.test_client()
    assert reconcile(client, ids.BACKFILL_APPLY, chosen, SNAPSHOT) == CHOOSE_WINDOWS
    assert reconciler.calls == []


@pytest.mark.parametrize("snapshot", ["x", [1], {"windows": "x"}, {"windows": [1]}, {"windows": [{}]},
                                      {"windows": [{"window_start": "soon"}]}, None])
def test_reconcile_with_an_unreadable_snapshot_says_there_is_nothing_to_reconcile(tmp_path, snapshot):
    reconciler = FakeReconciler()
    client = create_app(tmp_path, reconciler=reconciler).server.test_client()
    for trigger in (ids.RECONCILE_CHECK, ids.BACKFILL_APPLY):
        message = reconcile(client, trigger, ["2026-03-02T09:00:00+00:00"], snapshot)
        assert message == "Nothing to reconcile yet: the chart has no windows."
    assert reconciler.calls == []


@pytest.mark.parametrize("value", [5, [1], {"a": 1}, True, "on"])
def test_view_controls_ignore_wrong_values_instead_of_failing(client, value):
    snapshot = store_snapshot(client, value, value, value)
    figure = from_store(client, [f"{ids.CHART}.figure"], snapshot, chart_choices(value, value))[ids.CHART]["figure"]
    assert "Waiting for the first trades" in json.dumps(figure)


# -- finding 2: Host and Origin ---------------------------------------------------------------

def rate_post(client, headers: dict):
    payload = {"output": f"{ids.CONTROL_MESSAGE}.children",
               "outputs": {"id": ids.CONTROL_MESSAGE, "property": "children"},
               "inputs": [{"id": ids.RATE_APPLY, "property": "n_clicks", "value": 1}],
               "state": [{"id": ids.RATE_INPUT, "property": "value", "value": 100_000}],
               "changedPropIds": [f"{ids.RATE_APPLY}.n_clicks"]}
    return client.post("/_dash-update-component", json=payload, headers=headers)


@pytest.mark.parametrize("headers", [
    pytest.param({"Host": "evil.example"}, id="foreign-host"),
    pytest.param({"Host": "evil.example:8050"}, id="foreign-host-with-port"),
    pytest.param({"Host": "localhost.evil.example"}, id="local-name-as-prefix"),
    pytest.param({"Host": "localhost:8050", "Origin": "http://evil.example"}, id="foreign-origin"),
    pytest.param({"Host": "127.0.0.1:8050", "Origin": "http://evil.example:8050"}, id="foreign-origin-with-port"),
    pytest.param({"Host": "localhost:8050", "Origin": "null"}, id="null-origin"),
])
def test_a_post_for_a_foreign_host_or_from_a_foreign_origin_gets_403_and_changes_nothing(client, simulator, headers):
    response = rate_post(client, headers)
    assert response.status_code == 403
    assert response.mimetype == "text/plain" and "not allowed" in response.get_data(as_text=True)
    assert simulator.calls == [] and simulator.simulation.rate == Simulation.rate


@pytest.mark.parametrize("headers", [
    {"Host": "localhost"}, {"Host": "localhost:8050"}, {"Host": "127.0.0.1:8050"}, {"Host": "LocalHost:9999"},
    {"Host": "127.0.0.1:8050", "Origin": "http://127.0.0.1:8050"}, {"Host": "localhost:8050",
                                                                   "Origin": "http://localhost:8050"},
])
def test_localhost_and_127_0_0_1_on_any_port_pass(client, simulator, headers):
    response = rate_post(client, headers)
    assert response.status_code == 200
    assert simulator.calls == [("configure", {"rate": 100_000.0})]


def test_allow_host_adds_a_host_and_keeps_the_local_names(tmp_path, simulator):
    client = create_app(tmp_path, simulator=simulator, allowed_hosts=("dash.internal", "0.0.0.0")).server.test_client()
    assert rate_post(client, {"Host": "dash.internal:8050", "Origin": "http://dash.internal:8050"}).status_code == 200
    assert rate_post(client, {"Host": "localhost:8050"}).status_code == 200
    assert rate_post(client, {"Host": "evil.example"}).status_code == 403
    assert rate_post(client, {"Host": "0.0.0.0:8050"}).status_code == 403  # a wildcard bind address is no name
    assert rate_post(client, {"Host": "dash.internal", "Origin": "https://evil.example"}).status_code == 403


def test_api_status_and_the_page_follow_the_same_host_rule(client):
    for path in ("/api/status", "/", "/_dash-layout"):
        assert client.get(path, headers={"Host": "evil.example"}).status_code == 403
        assert client.get(path, headers={"Host": "localhost:8050"}).status_code == 200
        assert client.get(path, headers={"Host": "127.0.0.1:8050"}).status_code == 200
    assert client.get("/api/status", headers={"Host": "127.0.0.1"}).get_json()["producer"]["rate"] == Simulation.rate
    # A GET is not state-changing: an Origin on it is not checked, only the Host.
    assert client.get("/api/status", headers={"Host": "localhost", "Origin": "http://evil.example"}).status_code == 200


def test_parse_settings_keeps_every_allow_host():
    s = parse_settings(["--allow-host", "dash.internal", "--allow-host", "10.0.0.5"])
    assert s.allowed_hosts == ("dash.internal", "10.0.0.5")
    assert parse_settings([]).allowed_hosts == ()
    assert parse_settings([], {"TRADE_SUMMARY_ALLOW_HOST": "dash.internal"}).allowed_hosts == ("dash.internal",)


@pytest.mark.parametrize("bad", ["dash.internal:8050", "http://dash.internal", ""])
def test_allow_host_rejects_a_port_or_a_url_with_a_usage_error(bad):
    with pytest.raises(UsageError, match="host name"):
        parse_settings(["--allow-host", bad])


def test_the_run_passes_its_bind_address_and_allow_host_to_the_dashboard(tmp_path):
    from run import create_dashboard
    from streaming.run.app import App

    settings = Settings(data_dir=tmp_path, host="127.0.0.1", port=0, allowed_hosts=("dash.internal",))
    made = []

    def factory(*args, **kwargs):
        made.append(args)
        return create_dashboard(*args, **kwargs)

    app = App(settings, dashboard=factory)
    app.health = SimpleNamespace(snapshot=lambda: {})
    app._bind_web_address()
    app._start_dashboard()
    try:
        assert made[0][5] == ("127.0.0.1", "dash.internal")
        client = app.web.app.test_client()
        assert client.get("/api/status", headers={"Host": "dash.internal"}).status_code == 200
        assert client.get("/api/status", headers={"Host": "evil.example"}).status_code == 403
    finally:
        app.web.shutdown()
