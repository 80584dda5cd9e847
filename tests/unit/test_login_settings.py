"""--auth-file, --metrics-token-file and --insecure-no-login: read and checked where settings are
parsed, before anything starts; an address beyond this machine with no logins is refused; and the
run hands its logins to the page and to /metrics alone."""

from __future__ import annotations

import base64
import time
from types import SimpleNamespace

import pytest

from streaming.config import Settings, UsageError
from streaming.run.cli import parse_settings
from streaming.run.main import _app, main
from streaming.run.users import SESSION_KEY_FILE, add_user, is_loopback
from tests.support.kafka import free_port

PASSWORD = "bob's password"
TOKEN = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def users(tmp_path):
    path = tmp_path / "users.txt"
    add_user(path, "bob", "viewer", PASSWORD)
    return path


def test_the_users_and_token_files_are_made_absolute_against_the_working_directory(tmp_path, users):
    (tmp_path / "token").write_text(TOKEN)
    s = parse_settings(["--auth-file", "users.txt", "--metrics-token-file", "token"], cwd=tmp_path)
    assert (s.auth_file, s.metrics_token_file) == (users, tmp_path / "token")
    assert TOKEN not in repr(s) and "logins from" in s.describe()


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "dash.internal"])
def test_an_address_beyond_this_machine_without_logins_is_refused_with_the_ways_on(host):
    with pytest.raises(UsageError) as refused:
        parse_settings(["--host", host])
    assert "python run.py users add" in str(refused.value) and "--insecure-no-login" in str(refused.value)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"])
def test_loopback_addresses_stay_open_without_logins(host):
    assert is_loopback(host) and parse_settings(["--host", host]).auth_file is None


def test_insecure_no_login_or_a_users_file_lets_the_app_bind_every_address(users):
    assert parse_settings(["--host", "0.0.0.0", "--insecure-no-login"]).insecure_no_login
    assert parse_settings(["--host", "0.0.0.0", "--auth-file", str(users)]).auth_file == users
    assert parse_settings(["--host", "0.0.0.0"], {"TRADE_SUMMARY_AUTH_FILE": str(users)}).auth_file == users


@pytest.mark.parametrize("make, says", [
    (lambda path: None, "python run.py users add"),
    (lambda path: path.write_text("# nobody yet\n"), "holds no users"),
    (lambda path: path.write_text("bob:viewer:hunter2\n"), "line 1: no password hash"),
])
def test_an_unusable_users_file_is_a_usage_error_before_anything_starts(tmp_path, make, says):
    path = tmp_path / "users.txt"
    make(path)
    with pytest.raises(UsageError, match=says):
        parse_settings(["--auth-file", str(path)])


def test_a_short_token_and_two_contrary_flags_are_usage_errors(tmp_path, users):
    (tmp_path / "token").write_text("short")
    with pytest.raises(UsageError, match="too short"):
        parse_settings(["--metrics-token-file", str(tmp_path / "token")])
    with pytest.raises(UsageError, match="give one"):
        parse_settings(["--auth-file", str(users), "--insecure-no-login"])


def test_the_session_key_comes_from_the_environment_and_is_never_shown():
    s = parse_settings([], {"TRADE_SUMMARY_SESSION_KEY": "a secret of the deployment"})
    assert s.session_key == "a secret of the deployment" and "a secret" not in repr(s)


def test_the_refusal_exits_2_at_once_before_the_broker_or_spark(capsys):
    began = time.monotonic()
    assert main(["--host", "0.0.0.0", "--data-dir", "/nonexistent/never-made"]) == 2
    assert time.monotonic() - began < 5
    assert "--insecure-no-login" in capsys.readouterr().err


def basic(name: str, password: str) -> dict:
    return {"Authorization": "Basic " + base64.b64encode(f"{name}:{password}".encode()).decode()}


def test_the_run_hands_its_logins_to_the_page_and_to_metrics_alone(tmp_path, users):
    from run import create_dashboard, serve_metrics

    (tmp_path / "token").write_text(TOKEN)
    for dashboard in (True, False):
        data = tmp_path / f"data-{dashboard}"
        settings = Settings(data_dir=data, port=free_port(), auth_file=users, dashboard_enabled=dashboard,
                            metrics_token_file=None if dashboard else tmp_path / "token")
        app = _app(settings, create_dashboard, serve_metrics)
        app.health = SimpleNamespace(snapshot=lambda: {})  # type: ignore[assignment]
        app._bind_web_address()
        app._start_dashboard() if dashboard else app._start_metrics_alone()
        try:
            assert app.web is not None
            client = app.web.app.test_client()
            if dashboard:
                assert client.get("/api/status").status_code == 401
                assert client.get("/api/status", headers=basic("bob", PASSWORD)).status_code == 200
                assert client.get("/metrics", headers=basic("bob", PASSWORD)).status_code == 200
                assert (data / SESSION_KEY_FILE).stat().st_mode & 0o777 == 0o600
            else:
                assert client.get("/metrics", headers=basic("bob", PASSWORD)).status_code == 401
                assert client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        finally:
            app.web.shutdown()
