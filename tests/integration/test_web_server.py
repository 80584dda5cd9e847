"""The app's HTTP server (streaming/run/web.py, waitress) on 127.0.0.1: a streamed response goes
out chunk by chunk, a full house of live pages leaves requests their threads, a page beyond
--max-pages is told so, and a stop lets the requests in hand finish, ends the live connections
and frees the port for the next start."""

from __future__ import annotations

import contextlib
import http.client
import threading
import time

import flask
import pytest

from dashboard.dash_app import create_app
from dashboard.push import EVENTS_PATH
from streaming.lake.store import Lake
from streaming.run.web import AddressUnusable, WebServer, bind_address
from tests.support.kafka import free_port

TIMEOUT_S = 20  # generous: a shared machine; each wait ends as soon as its answer comes


@pytest.fixture
def serve():
    """serve(app, max_pages) -> a WebServer on a free port; every one is stopped after the test."""
    servers: list[WebServer] = []

    def start(app, max_pages: int = 2, on_stop=None) -> WebServer:
        server = WebServer(app, bind_address("127.0.0.1", free_port()), max_pages, "test-web", on_stop)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()


def open_stream(port: int, path: str = EVENTS_PATH) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
    connection.request("GET", path)
    return connection.getresponse()


def test_a_streamed_response_reaches_the_client_chunk_by_chunk(serve):
    app, second = flask.Flask("stream"), threading.Event()

    @app.route("/stream")
    def stream():
        def chunks():
            yield "data: first\n\n"
            second.wait(TIMEOUT_S)
            yield "data: second\n\n"
        return flask.Response(chunks(), mimetype="text/event-stream")

    response = open_stream(serve(app).port, "/stream")
    try:
        assert response.status == 200
        assert response.readline() == b"data: first\n"  # while the app still holds the second back
        second.set()
        assert response.readline() == b"\n" and response.readline() == b"data: second\n"
    finally:
        second.set()
        response.close()


def test_with_every_live_place_taken_a_request_is_answered_and_one_more_page_is_told_why(serve, tmp_path):
    app = create_app(Lake(tmp_path / "data"), max_pages=2)
    port = serve(app.server, max_pages=2).port
    pages = [open_stream(port) for _ in range(2)]
    try:
        assert [page.status for page in pages] == [200, 200]
        assert all(page.readline().startswith(b"retry: ") for page in pages)
        started = time.monotonic()
        status = open_stream(port, "/api/status")
        assert status.status == 200 and b"queries" in status.read()
        assert time.monotonic() - started < TIMEOUT_S
        refused = open_stream(port)
        assert refused.status == 503 and refused.getheader("Retry-After")
        assert b"2 pages are live already (--max-pages)" in refused.read()
    finally:
        for page in pages:
            page.close()


def test_a_stop_ends_the_live_connections_and_frees_the_port_for_the_next_start(serve, tmp_path):
    app = create_app(Lake(tmp_path / "data"), max_pages=2)
    publisher = app.server.extensions["dashboard.push"]
    server = serve(app.server, on_stop=publisher.stop)
    page = open_stream(server.port)
    assert page.status == 200 and page.readline().startswith(b"retry: ")
    started = time.monotonic()
    server.shutdown()
    assert time.monotonic() - started < TIMEOUT_S
    with contextlib.suppress(http.client.IncompleteRead):  # cut between chunks
        page.read()  # the stream ended: read() returns instead of waiting for the next keep-alive
    # as a restart would
    again = WebServer(flask.Flask("again"), bind_address("127.0.0.1", server.port), 2, "test-web-again")
    again.shutdown()


def test_a_request_in_hand_when_the_stop_comes_gets_its_whole_answer(serve):
    app, in_hand = flask.Flask("slow"), threading.Event()

    @app.route("/slow")
    def slow():
        in_hand.set()
        time.sleep(0.5)
        return "answered"

    server, answers = serve(app), []
    client = threading.Thread(target=lambda: answers.append(open_stream(server.port, "/slow").read()))
    client.start()
    assert in_hand.wait(TIMEOUT_S)
    server.shutdown()
    client.join(TIMEOUT_S)
    assert answers == [b"answered"]


def test_the_address_is_held_from_the_start_and_what_comes_early_is_answered_once_served():
    app = flask.Flask("held")
    app.add_url_rule("/", "root", lambda: "served")
    port = free_port()
    sockets = bind_address("127.0.0.1", port)
    try:
        with pytest.raises(AddressUnusable, match=f"port {port} on 127.0.0.1 is already in use: .* --port N"):
            bind_address("127.0.0.1", port)  # a second run, or anything else, meanwhile
        early = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
        early.request("GET", "/")  # before anything serves the address
        server = WebServer(app, sockets, 2, "test-web-held")
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    try:
        assert early.getresponse().read() == b"served"
    finally:
        server.shutdown()


def test_an_address_this_machine_does_not_have_is_named_with_what_to_use_instead():
    with pytest.raises(AddressUnusable, match="--host 192.0.2.1 is not an address of this machine: use 127.0.0.1"):
        bind_address("192.0.2.1", free_port())  # TEST-NET-1, never assigned
    with pytest.raises(AddressUnusable, match="--host no-such-host.invalid is not a host name"):
        bind_address("no-such-host.invalid", free_port())


def test_a_proxy_on_this_machine_is_believed_about_the_scheme_and_the_client(serve):
    app = flask.Flask("who")

    @app.route("/who")
    def who():
        return f"{flask.request.remote_addr} {flask.request.scheme}"

    connection = http.client.HTTPConnection("127.0.0.1", serve(app).port, timeout=TIMEOUT_S)
    connection.request("GET", "/who", headers={"X-Forwarded-For": "203.0.113.9", "X-Forwarded-Proto": "https"})
    assert connection.getresponse().read() == b"203.0.113.9 https"
    connection.request("GET", "/who")
    assert connection.getresponse().read() == b"127.0.0.1 http"
