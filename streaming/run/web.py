"""The HTTP server of the dashboard, its API and /metrics: waitress, a production WSGI server.

Why waitress (docs/running.md#the-server): pure Python with no dependencies, it runs in the app's
own process (the page reads the pipeline's state in memory), and it writes each chunk of a
streamed response as it comes, so server-sent events are not held back. Its socket loop keeps
idle and slow connections without a thread; a request, and a page's live connection for as long
as it is open, holds one of a fixed pool. The pool is sized for --max-pages live connections
plus REQUEST_THREADS for everything else, so a full house of pages never starves a request.
"""

from __future__ import annotations

import errno
import logging
import socket
import threading
from typing import Any, Callable

log = logging.getLogger("trade-summary")
REQUEST_THREADS = 16  # threads for requests, besides those the pages' live connections hold
CONNECTIONS_PER_PAGE = 6  # a browser opens up to six to one origin
LISTEN_BACKLOG = 1024  # waitress' own
# A reverse proxy on this machine (docs/running.md#tls-a-reverse-proxy-in-front) is believed about the
# scheme and the client's address: the session cookie is then Secure, and failed logins are
# counted per client rather than for the proxy as a whole. Anyone else's X-Forwarded-* is dropped.
TRUSTED_PROXY = "127.0.0.1"
TRUSTED_PROXY_HEADERS = ("x-forwarded-proto", "x-forwarded-for")


def server_settings(max_pages: int) -> dict[str, Any]:
    """waitress' settings for max_pages live pages."""
    return {
        "threads": max_pages + REQUEST_THREADS,
        "connection_limit": CONNECTIONS_PER_PAGE * max_pages + 100,
        "asyncore_use_poll": True,  # select() stops at 1024 descriptors
        "ident": "trade-summary",
        "trusted_proxy": TRUSTED_PROXY,
        "trusted_proxy_count": 1,
        "trusted_proxy_headers": set(TRUSTED_PROXY_HEADERS),
        "clear_untrusted_proxy_headers": True,
    }


class AddressUnusable(RuntimeError):
    """The web server's address cannot be bound; the message says why and what to do."""


def bind_address(host: str, port: int) -> list[socket.socket]:
    """Listens on host:port at once, on every address host resolves to as waitress would; a
    WebServer answers later, in order, what came meanwhile. Held from the start, the port cannot be
    taken by a socket the kernel numbers (Spark's, the broker's, an outgoing connection's), and a
    second run fails at once. Listening, not just bound: a bound socket does not keep out another
    that also sets SO_REUSEADDR, as every server does."""
    from waitress.adjustments import Adjustments

    try:
        addresses = Adjustments(host=host, port=port).listen
    except ValueError:
        raise AddressUnusable(f"--host {host} is not a host name or address this machine can resolve") from None
    sockets: list[socket.socket] = []
    try:
        for family, kind, protocol, address in addresses:
            sock = socket.socket(family, kind, protocol)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as waitress: a restart need not wait
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise AddressUnusable(f"port {port} on {host} is already in use: choose another with --port N") from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise AddressUnusable(f"--host {host} is not an address of this machine: use 127.0.0.1 (this machine "
                                  "only), 0.0.0.0 (every network) or one of its own addresses") from None
        raise AddressUnusable(f"cannot bind {host}:{port}: {exc.strerror or exc}") from None
    return sockets


class WebServer:
    """Serves a WSGI app (a Flask server) on sockets from bind_address, from a thread of its own until shutdown().
    on_stop runs first when it stops: it ends the pages' live connections, so their threads are free."""

    def __init__(self, app: Any, sockets: list[socket.socket], max_pages: int, name: str,
                 on_stop: Callable[[], None] | None = None):
        import waitress

        self.app, self.on_stop = app, on_stop
        self._map: dict = {}  # waitress' socket map: closing all in it ends the loop
        self._server = waitress.create_server(app, map=self._map, sockets=sockets, **server_settings(max_pages))
        self.port = int(sockets[0].getsockname()[1])
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._server.run()
        except Exception:  # noqa: BLE001 - the loop's end is logged, the app runs on without a page
            log.exception("the web server stopped")

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Lets the requests in hand finish, ends every connection and waits for the loop (then the port is free)."""
        from waitress import wasyncore
        from waitress.trigger import trigger as Trigger

        if not self._thread.is_alive():
            return
        if self.on_stop is not None:
            self.on_stop()
        # As waitress' own close: the requests in hand finish first, so no thread writes to a closed channel.
        self._server.task_dispatcher.shutdown(timeout=timeout_s / 2)
        # Sockets are closed in the loop's own thread: a trigger (one a listening socket) runs the closing there.
        triggers = [channel for channel in list(self._map.values()) if isinstance(channel, Trigger)]
        try:
            if not triggers:
                raise OSError("no wake-up pipe left")
            triggers[0].pull_trigger(lambda: wasyncore.close_all(self._map))
        except OSError as exc:  # the trigger is closed already: close them from here
            log.warning("the web server's wake-up pipe was closed before the stop (%s; %d connections): "
                        "closing from this thread", exc, len(self._map))
            wasyncore.close_all(self._map, ignore_all=True)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            log.warning("the web server did not stop within %g s", timeout_s)
