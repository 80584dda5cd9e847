"""Who may do what, against the real app (`python run.py --auth-file ...` on 127.0.0.1, free ports):
every route wants a user, a viewer reads but cannot act, an operator acts and is named in the
log, /metrics takes its token, failed logins are throttled, and an open address is refused."""

from __future__ import annotations

import base64
import json
import shutil
import socket
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from dashboard import ids
from dashboard.client import call
from streaming.kafka.broker import EmbeddedBroker
from streaming.run.users import add_user
from tests.support.kafka import free_port
from tests.support.process import RunPy
from tests.support.waiting import wait_for

PASSWORD = {"alice": "alice's password", "bob": "bob's password"}
TOKEN = "0123456789abcdef0123456789abcdef"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


class Answer:
    def __init__(self, status: int, headers, body: bytes):
        self.status_code, self.headers, self.data = status, headers, body

    def get_json(self):
        return json.loads(self.data)


class Client:
    """HTTP against the app as a script would (curl -u): urllib, no redirects followed."""

    def __init__(self, base: str, name: str | None = None, password: str | None = None, token: str | None = None):
        self.base, self.headers = base, {}
        if name is not None:
            pair = f"{name}:{password or PASSWORD[name]}".encode()
            self.headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        if token is not None:
            self.headers["Authorization"] = f"Bearer {token}"

    def request(self, method: str, path: str, body: bytes | None = None, read: bool = True) -> Answer:
        headers = {**self.headers, **({"Content-Type": "application/json"} if body is not None else {})}
        req = urllib.request.Request(self.base + path, data=body, headers=headers, method=method)
        try:
            with _OPENER.open(req, timeout=30) as response:
                return Answer(response.status, response.headers, response.read() if read else b"")
        except urllib.error.HTTPError as error:
            return Answer(error.code, error.headers, error.read())

    def get(self, path: str, read: bool = True) -> Answer:
        return self.request("GET", path, read=read)

    def post(self, path: str, json: dict) -> Answer:  # what dashboard.client.call uses
        return self.request("POST", path, body=_dumps(json))


def _dumps(value) -> bytes:
    return json.dumps(value).encode()


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    root = tmp_path_factory.mktemp("logins")
    users, token = root / "users.txt", root / "metrics.token"
    add_user(users, "alice", "operator", PASSWORD["alice"])
    add_user(users, "bob", "viewer", PASSWORD["bob"])
    token.write_text(TOKEN + "\n")
    web = free_port()
    app = RunPy("--no-producer", "--data-dir", str(root / "data"), "--broker-port", str(free_port()),
                "--port", str(web), "--auth-file", str(users), "--metrics-token-file", str(token))
    try:
        app.wait_for_line(f"dashboard at http://127.0.0.1:{web}", timeout_s=240)
        yield app, f"http://127.0.0.1:{web}"
    finally:
        code, _ = app.terminate(timeout_s=60)
        assert code == 0, app.output
        assert PASSWORD["alice"] not in app.output and PASSWORD["bob"] not in app.output and TOKEN not in app.output
        EmbeddedBroker(root / "data" / "broker", 0).stop()


def switch_output(client: Client) -> str:
    """The producer switch's callback output, as Dash names it (allow_duplicate adds a hash)."""
    dependencies = client.get("/_dash-dependencies").get_json()
    return next(d["output"] for d in dependencies if d["output"].startswith(f"{ids.CONTROL_MESSAGE}.children@")
                and any(i["id"] == ids.PRODUCER_SWITCH for i in d["inputs"]))


def switch(client: Client, on: bool) -> str:
    output = switch_output(client)
    return call(client, [output], {f"{ids.PRODUCER_SWITCH}.value": ["on"] if on else []})[ids.CONTROL_MESSAGE][
        "children"]


def producer_enabled(client: Client) -> bool:
    return client.get("/api/status").get_json()["producer"]["enabled"]


def test_every_route_wants_a_user_and_a_viewer_reads_them_all(running):
    _, base = running
    anonymous, viewer = Client(base), Client(base, "bob")
    page = anonymous.get("/")
    assert page.status_code == 302 and page.headers["Location"].endswith("/login")
    for path in ("/api/status", "/api/summary", "/api/events", "/metrics", "/_dash-layout"):
        answer = anonymous.get(path, read=False)
        assert answer.status_code == 401, path
    assert anonymous.get("/api/status").headers["WWW-Authenticate"].startswith("Basic ")
    for path in ("/", "/api/status", "/api/summary", "/_dash-layout"):
        assert viewer.get(path).status_code == 200, path
    assert viewer.get("/api/events", read=False).status_code == 200
    # /metrics takes only the token
    assert viewer.get("/metrics").status_code == 401
    assert Client(base, token="x" * 32).get("/metrics").status_code == 401
    metrics = Client(base, token=TOKEN).get("/metrics")
    assert metrics.status_code == 200 and b"tradesummary_" in metrics.data


def test_a_viewer_cannot_act_and_an_operator_can_and_is_named_in_the_log(running):
    app, base = running
    viewer, operator = Client(base, "bob"), Client(base, "alice")
    refused = switch(viewer, True)
    assert refused.startswith("Refused: bob is a viewer") and not producer_enabled(viewer)
    chaos = call(viewer, [f"{ids.CHAOS_MESSAGE}.children"], {f"{ids.CHAOS_APPLY}.n_clicks": 1},
                 {f"{ids.DUPLICATE_SHARE_INPUT}.value": 90, f"{ids.MALFORMED_SHARE_INPUT}.value": 90})
    assert chaos[ids.CHAOS_MESSAGE]["children"].startswith("Refused: bob is a viewer")
    backfill = call(viewer, [f"{ids.RECONCILE_RESULT}.data", f"{ids.RECONCILE_MESSAGE}.children"],
                    {f"{ids.BACKFILL_APPLY}.n_clicks": 1, f"{ids.RECONCILE_CHECK}.n_clicks": 0},
                    {f"{ids.BACKFILL_CHOICE}.value": ["2026-03-02T09:00:00+00:00"],
                     f"{ids.SNAPSHOT}.data": {"windows": [{"window_start": "2026-03-02T09:00:00+00:00"}]}})
    assert backfill[ids.RECONCILE_MESSAGE]["children"].startswith("Refused: bob is a viewer")
    assert "turned the producer" not in app.output
    assert switch(operator, True) == "Simulation running."
    assert wait_for(lambda: producer_enabled(viewer), 10, what="the producer on")
    app.wait_for_line("operator alice turned the producer on", timeout_s=10)
    assert switch(operator, False) == "Simulation paused."
    app.wait_for_line("operator alice turned the producer off", timeout_s=10)


def test_the_login_form_gives_a_session_that_reads_the_api(running):
    _, base = running
    form = urllib.parse.urlencode({"name": "bob", "password": PASSWORD["bob"]}).encode()
    req = urllib.request.Request(base + "/login", data=form, method="POST")
    try:
        _OPENER.open(req, timeout=30)
        raise AssertionError("the login form should redirect")
    except urllib.error.HTTPError as answer:
        assert answer.code == 303
        cookie = answer.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
    session = urllib.request.Request(base + "/api/status", headers={"Cookie": cookie.split(";")[0]})
    with _OPENER.open(session, timeout=30) as answer:
        assert answer.status == 200


def log_in(page, base: str, name: str) -> None:
    page.goto(base + "/")  # sent to the form
    page.wait_for_selector("form[action='/login']")
    page.fill("input[name=name]", name)
    page.fill("input[name=password]", PASSWORD[name])
    page.click("button[type=submit]")
    page.wait_for_function("(text) => (document.querySelector('.top-bar .user')?.innerText || '').includes(text)",
                           arg=f"{name} (", timeout=60_000)


def click_switch_and_read_the_message(page) -> str:
    page.evaluate("() => { document.querySelector('#control-message').innerText = ''; }")
    page.click("#producer-switch input[type=checkbox]")
    page.wait_for_function("() => (document.querySelector('#control-message')?.innerText || '').length > 0",
                           timeout=30_000)
    return page.inner_text("#control-message")


@pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium: bash tests/install-browser.sh")
def test_in_chromium_a_viewers_click_is_refused_and_an_operators_turns_the_producer_on(running):
    from playwright.sync_api import sync_playwright

    app, base = running
    script = Client(base, "bob")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                                              headless=True, args=["--no-sandbox", "--disable-gpu"])
        try:
            viewer = chromium.new_context().new_page()
            log_in(viewer, base, "bob")
            assert click_switch_and_read_the_message(viewer).startswith("Refused: bob is a viewer")
            viewer.wait_for_selector("#control-message.error")
            assert not producer_enabled(script)
            viewer.click(".top-bar .user a")  # Log out
            viewer.wait_for_selector("form[action='/login']")

            operator = chromium.new_context().new_page()
            log_in(operator, base, "alice")
            before = app.output.count("operator alice turned the producer on")
            assert click_switch_and_read_the_message(operator) == "Simulation running."
            assert wait_for(lambda: producer_enabled(script), 10, what="the producer on")
            wait_for(lambda: app.output.count("operator alice turned the producer on") > before, 10,
                     what="the operator named in the log")
            assert click_switch_and_read_the_message(operator) == "Simulation paused."
        finally:
            chromium.close()


def test_repeated_failed_logins_are_answered_429_even_for_the_right_password(running):
    # Last in the module: it pauses 127.0.0.1 for a minute.
    _, base = running
    for _ in range(10):
        assert Client(base, "bob", "a wrong guess").get("/api/status").status_code == 401
    paused = Client(base, "bob").get("/api/status")
    assert paused.status_code == 429 and int(paused.headers["Retry-After"]) > 0


def test_an_open_address_without_logins_is_refused_in_seconds_and_serves_nothing(tmp_path):
    web = free_port()
    began = time.monotonic()
    app = RunPy("--host", "0.0.0.0", "--port", str(web), "--data-dir", str(tmp_path / "data"),
                "--broker-port", str(free_port()))
    try:
        code = app.wait(30)
    finally:
        app.kill()
    assert code != 0 and time.monotonic() - began < 30
    assert "python run.py users add" in app.output and "--insecure-no-login" in app.output
    assert "Traceback" not in app.output and not (tmp_path / "data").exists()
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", web)) != 0
