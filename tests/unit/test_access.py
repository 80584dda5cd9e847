"""Who may do what on the page and its routes (dashboard/access.py): with a users file every route
wants a user (HTTP Basic, or the login form's session cookie), a viewer's action changes nothing
and the page says why, an operator's is logged by name, repeated failed logins get a pause, and
/metrics takes a bearer token. Through Flask's test client, with the page's fakes."""

from __future__ import annotations

import base64
import json
import logging

import flask
import pytest
from werkzeug.security import generate_password_hash

from dashboard import access, ids
from dashboard.access import ACTIONS, EXTENSION, FailedLogins, may
from dashboard.api import register_metrics
from dashboard.client import call
from dashboard.dash_app import create_app
from streaming.run.users import Logins, User, UserRecord, render_users, write_private
from tests.unit.test_dashboard_guards import SNAPSHOT, FakeReconciler, FakeSimulator

PASSWORD = {"alice": "alice's password", "bob": "bob's password"}
TOKEN = "0123456789abcdef0123456789abcdef"
CHEAP_HASH = "pbkdf2:sha256:1000"


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class As:
    """A test client that sends HTTP Basic credentials with every request."""

    def __init__(self, client, name: str | None, password: str | None = None):
        self.client = client
        token = base64.b64encode(f"{name}:{password or PASSWORD.get(name or '', '')}".encode()).decode()
        self.headers = {"Authorization": f"Basic {token}"} if name else {}

    def post(self, path, **kwargs):
        return self.client.post(path, headers=self.headers, **kwargs)

    def get(self, path, **kwargs):
        return self.client.get(path, headers=self.headers, **kwargs)


@pytest.fixture
def logins(tmp_path) -> Logins:
    # Cheap hashes: every request with HTTP Basic checks one, and scrypt is slow by design.
    # test_users_file holds `users add` to scrypt.
    users = tmp_path / "users.txt"
    write_private(users, render_users({name: UserRecord(name, role, generate_password_hash(PASSWORD[name], CHEAP_HASH))
                                       for name, role in (("alice", "operator"), ("bob", "viewer"))}))
    return Logins(users, None, tmp_path / "session.key")


@pytest.fixture
def simulator():
    return FakeSimulator()


@pytest.fixture
def app(tmp_path, logins, simulator):
    return create_app(tmp_path, simulator=simulator, reconciler=FakeReconciler(), logins=logins)


def _switch(client, value) -> str:
    dash_app = client.client.application.extensions["trade_summary_dash"]
    output = next(key for key in dash_app.callback_map if key.startswith(f"{ids.CONTROL_MESSAGE}.children@"))
    return call(client, [output], {f"{ids.PRODUCER_SWITCH}.value": value})[ids.CONTROL_MESSAGE]["children"]


@pytest.fixture
def client(app):
    app.server.extensions["trade_summary_dash"] = app  # for _switch: the callback's hashed output name
    return app.server.test_client()


def test_only_an_operator_may_act_and_an_unknown_action_fails_rather_than_passes():
    for action in ACTIONS:
        assert may(User("alice", "operator"), action)
        assert not may(User("bob", "viewer"), action)
        assert not may(None, action)
    with pytest.raises(KeyError):
        may(User("alice", "operator"), "producer-swtich")


@pytest.mark.parametrize("path", ["/api/status", "/api/summary", "/api/lateness", "/api/events", "/_dash-layout",
                                  "/_dash-dependencies", "/assets/style.css", "/metrics"])
def test_without_credentials_every_route_answers_401_with_a_basic_challenge(client, path):
    answer = client.get(path)
    assert answer.status_code == 401 and answer.headers["WWW-Authenticate"].startswith("Basic ")


def test_without_credentials_the_page_sends_the_browser_to_the_login_form(client):
    answer = client.get("/")
    assert answer.status_code == 302 and answer.headers["Location"].endswith("/login")
    assert b'<form method="post" action="/login">' in client.get("/login").data


def test_a_viewer_reads_the_page_and_the_api_with_http_basic(client):
    viewer = As(client, "bob")
    for path in ("/", "/api/status", "/_dash-layout"):
        assert viewer.get(path).status_code == 200, path


@pytest.mark.parametrize("header", ["Basic !!!", "Basic " + base64.b64encode(b"no colon").decode(),
                                    "Bearer " + TOKEN, "Digest x"])
def test_unreadable_or_other_credentials_get_401_not_a_server_error(client, header):
    assert client.get("/api/status", headers={"Authorization": header}).status_code == 401


def test_a_viewers_producer_switch_changes_nothing_and_says_why(client, simulator, caplog):
    with caplog.at_level(logging.INFO, logger="trade-summary"):
        message = _switch(As(client, "bob"), ["on"])
    assert message == "Refused: bob is a viewer; only an operator may turn the producer on or off. Nothing was changed."
    assert simulator.calls == [] and not simulator.enabled
    assert "turned the producer" not in caplog.text


def test_an_operators_producer_switch_is_applied_and_logged_with_their_name(client, simulator, caplog):
    with caplog.at_level(logging.INFO, logger="trade-summary"):
        assert _switch(As(client, "alice"), ["on"]) == "Simulation running."
        assert _switch(As(client, "alice"), []) == "Simulation paused."
    assert simulator.calls == [("set_enabled", True), ("set_enabled", False)]
    assert "operator alice turned the producer on" in caplog.text
    assert "operator alice turned the producer off" in caplog.text


def test_a_viewers_rate_late_trade_and_chaos_changes_are_refused(client, simulator):
    viewer = As(client, "bob")
    rate = call(viewer, [f"{ids.CONTROL_MESSAGE}.children"], {f"{ids.RATE_APPLY}.n_clicks": 1},
                {f"{ids.RATE_INPUT}.value": 5})[ids.CONTROL_MESSAGE]["children"]
    late = call(viewer, [f"{ids.LATE_MESSAGE}.children"], {f"{ids.LATE_APPLY}.n_clicks": 1},
                {f"{ids.LATE_SHARE_INPUT}.value": 30, f"{ids.BEYOND_SHARE_INPUT}.value": 50,
                 f"{ids.MAX_LATENESS_INPUT}.value": 10, f"{ids.MAX_BEYOND_INPUT}.value": 20})[ids.LATE_MESSAGE]
    chaos = call(viewer, [f"{ids.CHAOS_MESSAGE}.children"], {f"{ids.CHAOS_APPLY}.n_clicks": 1},
                 {f"{ids.DUPLICATE_SHARE_INPUT}.value": 50, f"{ids.MALFORMED_SHARE_INPUT}.value": 50})
    assert rate.startswith("Refused: bob is a viewer; only an operator may change the producer's rate")
    assert late["children"].startswith("Refused: ") and "late-trade knobs" in late["children"]
    assert "chaos knobs" in chaos[ids.CHAOS_MESSAGE]["children"]
    assert simulator.calls == []


def test_a_viewers_backfill_is_refused_before_the_reconciler_is_asked(app, client):
    message = call(As(client, "bob"), [f"{ids.RECONCILE_RESULT}.data", f"{ids.RECONCILE_MESSAGE}.children"],
                   {f"{ids.BACKFILL_APPLY}.n_clicks": 1, f"{ids.RECONCILE_CHECK}.n_clicks": 0},
                   {f"{ids.BACKFILL_CHOICE}.value": ["2026-03-02T09:00:00+00:00"],
                    f"{ids.SNAPSHOT}.data": SNAPSHOT})[ids.RECONCILE_MESSAGE]["children"]
    assert message.startswith("Refused: bob is a viewer; only an operator may backfill windows")


def test_the_login_form_sets_an_http_only_lax_session_cookie_and_logout_ends_it(client):
    answer = client.post("/login", data={"name": "bob", "password": PASSWORD["bob"]})
    assert answer.status_code == 303 and answer.headers["Location"] == "/"
    cookie = answer.headers["Set-Cookie"]
    assert cookie.startswith("trade_summary_session=") and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert "Secure" not in cookie and PASSWORD["bob"] not in cookie
    assert client.get("/").status_code == 200 and client.get("/api/status").status_code == 200
    client.post("/logout")
    assert client.get("/api/status").status_code == 401


def test_the_session_cookie_is_secure_over_https_and_behind_a_tls_proxy(client):
    direct = client.post("/login", data={"name": "bob", "password": PASSWORD["bob"]}, base_url="https://127.0.0.1")
    proxied = client.post("/login", data={"name": "bob", "password": PASSWORD["bob"]},
                          headers={"X-Forwarded-Proto": "https"})
    assert "Secure" in direct.headers["Set-Cookie"] and "Secure" in proxied.headers["Set-Cookie"]


def test_a_wrong_password_on_the_form_is_refused_with_the_form_again(client):
    answer = client.post("/login", data={"name": "bob", "password": "guess"})
    assert answer.status_code == 401 and b"Wrong name or password." in answer.data
    assert client.get("/api/status").status_code == 401


def test_a_removed_users_session_no_longer_lets_them_in(client, logins):
    from streaming.run.users import remove_user

    client.post("/login", data={"name": "bob", "password": PASSWORD["bob"]})
    remove_user(logins.users_file, "bob")
    assert client.get("/api/status").status_code == 401


def test_ten_failed_logins_in_a_minute_pause_the_client_then_the_right_password_works_again(app, client):
    clock = Clock()
    app.server.extensions[EXTENSION].failures.clock = clock
    for _ in range(10):
        assert As(client, "bob", "wrong password").get("/api/status").status_code == 401
    paused = As(client, "bob").get("/api/status")
    assert paused.status_code == 429 and int(paused.headers["Retry-After"]) == 60
    assert client.post("/login", data={"name": "bob", "password": PASSWORD["bob"]}).status_code == 429
    clock.now += 61
    assert As(client, "bob").get("/api/status").status_code == 200


def test_the_limiter_counts_failures_within_its_window_only():
    clock = Clock()
    limiter = FailedLogins(limit=3, window_s=60, pause_s=30, clock=clock)
    limiter.failed("a")
    limiter.failed("a")
    clock.now += 61  # those two are forgotten
    limiter.failed("a")
    limiter.failed("a")
    assert limiter.wait_s("a") == 0 and limiter.wait_s("b") == 0
    limiter.failed("a")
    assert limiter.wait_s("a") == 30 and limiter.wait_s("b") == 0
    clock.now += 30
    assert limiter.wait_s("a") == 0


def test_a_success_forgets_the_clients_failures():
    limiter = FailedLogins(limit=2, clock=Clock())
    limiter.failed("a")
    limiter.succeeded("a")
    limiter.failed("a")
    assert limiter.wait_s("a") == 0


def metrics_server(logins: Logins) -> flask.Flask:
    server = flask.Flask("metrics-test")
    access.install(server, logins)
    register_metrics(server, lambda: (b"tradesummary_up 1\n", "text/plain"))
    return server


def test_metrics_takes_only_the_bearer_token_when_a_token_file_is_given(tmp_path, logins, monkeypatch):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    compared = []
    real = access.hmac.compare_digest
    monkeypatch.setattr(access.hmac, "compare_digest", lambda a, b: compared.append(1) or real(a, b))
    client = metrics_server(Logins(logins.users_file, token_file, logins.session_key_file)).test_client()
    assert client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    wrong = client.get("/metrics", headers={"Authorization": "Bearer " + "x" * 32})
    assert wrong.status_code == 401 and wrong.headers["WWW-Authenticate"].startswith("Bearer ")
    assert As(client, "bob").get("/metrics").status_code == 401
    assert compared  # the token is compared in constant time


def test_metrics_without_a_token_file_wants_a_user_like_every_route(logins):
    client = metrics_server(logins).test_client()
    assert client.get("/metrics").status_code == 401
    assert As(client, "bob").get("/metrics").status_code == 200


def test_without_a_users_file_everything_stays_open_and_actions_are_still_logged(tmp_path, simulator, caplog):
    app = create_app(tmp_path, simulator=simulator)
    app.server.extensions["trade_summary_dash"] = app
    client = As(app.server.test_client(), None)
    assert client.get("/api/status").status_code == 200 and client.get("/").status_code == 200
    with caplog.at_level(logging.INFO, logger="trade-summary"):
        assert _switch(client, ["on"]) == "Simulation running."
    assert "the page turned the producer on" in caplog.text


def test_the_page_names_the_logged_in_user_with_a_logout_link_and_no_one_with_logins_off(client, tmp_path):
    layout = json.dumps(As(client, "bob").get("/_dash-layout").get_json())
    assert "bob (viewer)" in layout and '"href": "/logout"' in layout
    open_layout = json.dumps(create_app(tmp_path / "open").server.test_client().get("/_dash-layout").get_json())
    assert "/logout" not in open_layout


def test_a_failed_login_names_a_known_user_but_never_logs_an_unknown_name(client, caplog):
    with caplog.at_level(logging.INFO, logger="trade-summary"):
        As(client, "bob", "wrong password").get("/api/status")
        As(client, PASSWORD["alice"], "x").get("/api/status")  # a password typed as the name
    assert "failed login for user bob" in caplog.text and "failed login for an unknown name" in caplog.text
    assert PASSWORD["alice"] not in caplog.text and "wrong password" not in caplog.text


def test_a_session_older_than_its_lifetime_no_longer_lets_the_browser_in(app, client):
    client.post("/login", data={"name": "bob", "password": PASSWORD["bob"]})
    assert client.get("/api/status").status_code == 200
    app.server.permanent_session_lifetime = access.timedelta(seconds=-1)  # as if the cookie were old
    assert client.get("/api/status").status_code == 401
