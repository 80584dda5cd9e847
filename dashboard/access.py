"""Who may do what, on the web side: the login form and its session cookie, HTTP Basic for scripts,
the bearer token of /metrics, the pause after repeated failed logins, and `may(user, action)`,
which the panels ask inside their callbacks. The users file itself is streaming/run/users.py.

With no users file (logins off, 127.0.0.1) nothing is checked and everyone may act, as before."""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Callable

import flask
from dash import html
from flask.sessions import SecureCookieSessionInterface
from markupsafe import escape

from streaming.run.users import OPERATOR, Logins, User, UsersFile, read_token, session_key

log = logging.getLogger("trade-summary")  # the run's log: every action taken, with the user's name
EXTENSION = "trade_summary_access"
SESSION_COOKIE = "trade_summary_session"
REALM = "Trade Summary"
SESSION_LIFETIME = timedelta(days=7)  # a login lasts at most this long (the cookie's signed timestamp)

# The actions that change data or the run, and how a refusal names them.
PRODUCER, RATE, LATE_KNOBS, CHAOS_KNOBS, BACKFILL = "producer", "rate", "late-knobs", "chaos-knobs", "backfill"
ACTIONS = {PRODUCER: "turn the producer on or off", RATE: "change the producer's rate",
           LATE_KNOBS: "change the late-trade knobs", CHAOS_KNOBS: "change the chaos knobs",
           BACKFILL: "backfill windows"}
REFUSED = "Refused: "  # how a refusal opens (the panels show it as an error)
ANYONE = User(None, OPERATOR)  # logins off: whoever reaches 127.0.0.1 acts, as before logins existed


def may(user: User | None, action: str) -> bool:
    """Whether `user` may take `action` (one of ACTIONS): an operator may, a viewer or nobody may not."""
    if action not in ACTIONS:
        raise KeyError(f"unknown action {action!r}")  # a misspelt action must fail, never pass
    return user is not None and user.role == OPERATOR


def refusal(user: User | None, action: str) -> str:
    """What the page says to a refused action."""
    who = f"{user.name} is a {user.role}" if user is not None else "you are not logged in"
    return f"{REFUSED}{who}; only an operator may {ACTIONS[action]}. Nothing was changed."


def current_user() -> User | None:
    """The user of the request being served: ANYONE with logins off, None when no one is logged in
    (and outside a request, where no action is taken)."""
    if not flask.has_request_context():
        return None
    access = flask.current_app.extensions.get(EXTENSION)
    if access is None or access.users is None:
        return ANYONE
    return flask.g.get("user")


def check(action: str) -> tuple[User | None, str | None]:
    """(the current user, None) when they may take `action`, else (them, the refusal to show)."""
    user = current_user()
    return user, None if may(user, action) else refusal(user, action)


def user_bar(user: User | None) -> list:
    """The page's corner for a logged-in user: who, their role, and a logout link (nothing with logins off)."""
    if user is None or user.name is None:
        return []
    return [html.Span(className="user", children=[f"{user.name} ({user.role}) · ", html.A("Log out", href="/logout")])]


def acted(user: User | None, what: str) -> None:
    """An action taken, in the run's log with the user's name ('operator alice turned the producer off')."""
    if user is None or user.name is None:
        log.info("the page %s", what)
    else:
        log.info("%s %s %s", user.role, user.name, what)


@dataclass
class FailedLogins:
    """A pause for a client after `limit` failed logins within `window_s`: every try (right or
    wrong) gets 429 for `pause_s`, then the right password works again. Pure but for the clock."""

    limit: int = 10
    window_s: float = 60.0
    pause_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    max_clients: int = 10_000
    _failures: dict[str, list[float]] = field(default_factory=dict, init=False, repr=False)
    _paused_until: dict[str, float] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def wait_s(self, client: str) -> float:
        """Seconds until `client` may try again (0: now)."""
        with self._lock:
            until = self._paused_until.get(client, 0.0)
            left = until - self.clock()
            if left <= 0 and client in self._paused_until:
                del self._paused_until[client]
            return max(left, 0.0)

    def failed(self, client: str) -> None:
        now = self.clock()
        with self._lock:
            if len(self._failures) >= self.max_clients and client not in self._failures:
                self._failures.clear()  # a flood of addresses: forget, rather than grow without bound
            recent = [t for t in self._failures.get(client, []) if now - t < self.window_s] + [now]
            if len(recent) >= self.limit:
                self._paused_until[client] = now + self.pause_s
                self._failures.pop(client, None)
            else:
                self._failures[client] = recent

    def succeeded(self, client: str) -> None:
        with self._lock:
            self._failures.pop(client, None)


class _SessionInterface(SecureCookieSessionInterface):
    """Flask's signed cookie, marked Secure when the request came over HTTPS (directly or, as a
    reverse proxy says in X-Forwarded-Proto, to the proxy)."""

    def get_cookie_secure(self, app) -> bool:
        request = flask.request
        forwarded = request.headers.get("X-Forwarded-Proto", "").split(",")[0].strip().lower()
        return request.is_secure or forwarded == "https"


@dataclass
class Access:
    """The checks before every route of a server (after its Host guard)."""

    users: UsersFile | None
    metrics_token: str | None
    failures: FailedLogins = field(default_factory=FailedLogins)

    def before_request(self):
        request = flask.request
        if request.path == "/metrics" and self.metrics_token is not None:
            return None if self._bearer_matches(request.headers.get("Authorization", "")) else _unauthorized(
                "Bearer", "/metrics takes `Authorization: Bearer <token>` (--metrics-token-file).")
        if self.users is None or request.path in ("/login", "/logout"):
            return None
        header = request.headers.get("Authorization", "")
        if header[:6].lower() == "basic ":
            return self._basic(header[6:].strip())
        name = flask.session.get("user")
        user = self.users.user(name) if isinstance(name, str) else None
        if user is not None:
            flask.g.user = user
            return None
        if request.method == "GET" and request.path == "/":
            return flask.redirect("/login", code=302)
        return _unauthorized("Basic", "Log in: HTTP Basic (curl -u NAME) or the form at /login.")

    def _bearer_matches(self, header: str) -> bool:
        scheme, _, token = header.partition(" ")
        assert self.metrics_token is not None
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), self.metrics_token.encode())

    def _basic(self, encoded: str):
        try:
            name, colon, password = base64.b64decode(encoded, validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            colon = ""
        if not colon:
            return _unauthorized("Basic", "Unreadable HTTP Basic credentials.")
        user = self.login(name, password)
        if isinstance(user, flask.Response):
            return user
        flask.g.user = user
        return None

    def login(self, name: str, password: str) -> User | flask.Response:
        """The user, or the answer to give: 429 while the client is paused, 401 for wrong credentials."""
        assert self.users is not None
        client = flask.request.remote_addr or "unknown"
        wait = self.failures.wait_s(client)
        if wait > 0:
            return _too_many(wait)
        user = self.users.check(name, password)
        if user is None:
            self.failures.failed(client)
            # A name that is no user's may be a password typed in the wrong field: never logged.
            known = f"user {name}" if self.users.user(name) is not None else "an unknown name"
            log.warning("failed login for %s from %s", known, client)
            return _unauthorized("Basic", "Wrong name or password.")
        self.failures.succeeded(client)
        return user


def _unauthorized(scheme: str, text: str) -> flask.Response:
    response = flask.Response(text + "\n", status=401, mimetype="text/plain")
    response.headers["WWW-Authenticate"] = f'{scheme} realm="{REALM}"' + (', charset="UTF-8"'
                                                                          if scheme == "Basic" else "")
    return response


def _too_many(wait_s: float) -> flask.Response:
    response = flask.Response(f"Too many failed logins from this address: try again in {wait_s:.0f} s.\n",
                              status=429, mimetype="text/plain")
    response.headers["Retry-After"] = str(max(1, round(wait_s)))
    return response


LOGIN_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Trade Summary: log in</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{{font-family:system-ui,sans-serif;display:flex;justify-content:center;margin-top:15vh}}
form{{display:grid;gap:.6em;min-width:16em}}.error{{color:#b00020}}</style></head><body>
<form method="post" action="/login"><h1>Trade Summary</h1>{message}
<label>Name <input name="name" autocomplete="username" required autofocus></label>
<label>Password <input name="password" type="password" autocomplete="current-password" required></label>
<button type="submit">Log in</button></form></body></html>"""


def _login_page(message: str = "", status: int = 200) -> flask.Response:
    shown = f'<p class="error" role="alert">{escape(message)}</p>' if message else ""
    return flask.Response(LOGIN_PAGE.format(message=shown), status=status, mimetype="text/html")


def install(server: flask.Flask, logins: Logins | None) -> None:
    """Logins on `server` when `logins` names a users file, and/or the bearer on /metrics when it
    names a token file; nothing otherwise. Registered after the Host guard, so that runs first."""
    if logins is None or (logins.users_file is None and logins.metrics_token_file is None):
        return
    users = UsersFile(logins.users_file) if logins.users_file is not None else None
    token = read_token(logins.metrics_token_file) if logins.metrics_token_file is not None else None
    access = Access(users, token)
    server.extensions[EXTENSION] = access
    server.before_request(access.before_request)
    if users is None:
        return
    server.secret_key = session_key(logins.session_key_file, logins.session_key_value)
    server.session_interface = _SessionInterface()
    server.config.update(SESSION_COOKIE_NAME=SESSION_COOKIE, SESSION_COOKIE_HTTPONLY=True,
                         SESSION_COOKIE_SAMESITE="Lax", PERMANENT_SESSION_LIFETIME=SESSION_LIFETIME)

    @server.route("/login", methods=["GET", "POST"])
    def login():
        if flask.request.method == "GET":
            return _login_page()
        form = flask.request.form
        user = access.login(form.get("name", ""), form.get("password", ""))
        if isinstance(user, flask.Response):
            return _login_page(user.get_data(as_text=True).strip(), user.status_code)
        flask.session.clear()  # a fresh session: none carried over from before the login
        flask.session["user"] = user.name
        log.info("%s %s logged in", user.role, user.name)
        return flask.redirect("/", code=303)

    @server.route("/logout", methods=["GET", "POST"])
    def logout():
        flask.session.clear()
        return flask.redirect("/login", code=303)
