"""The HTTP server of the dashboard, its API and /metrics: waitress, a production WSGI server.

Why waitress (docs/running.md#the-server): pure Python with no dependencies, it runs in the app's
own process (the page reads the pipeline's state in memory), and it writes each chunk of a
streamed response as it comes, so server-sent events are not held back. Its socket loop keeps
idle and slow connections without a thread; a request, and a page's live connection for as long
as it is open, holds one of a fixed pool. The pool is sized for --max-pages live connections
plus REQUEST_THREADS for everything else, so a full house of pages never starves a request.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

log = logging.getLogger("trade-summary")
REQUEST_THREADS = 16  # threads for requests, besides those the pages' live connections hold
CONNECTIONS_PER_PAGE = 6  # a browser opens up to six to one origin
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


class WebServer:
    """Serves a WSGI app (a Flask server) on host:port from a thread of its own until shutdown().
    on_stop runs first when it stops: it ends the pages' live connections, so their threads are free."""

    def __init__(self, app: Any, host: str, port: int, max_pages: int, name: str,
                 on_stop: Callable[[], None] | None = None):
        import waitress

        self.app, self.on_stop = app, on_stop
        self._map: dict = {}  # waitress' socket map: closing all in it ends the loop
        self._server = waitress.create_server(app, map=self._map, host=host, port=port, **server_settings(max_pages))
        self.port = int(self._server.effective_port)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._server.run()
        except Exception:  # noqa: BLE001 - the loop's end is logged, the app runs on without a page
            log.exception("the web server stopped")

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stops accepting, ends every connection and waits for the loop (then the port is free)."""
        from waitress import wasyncore

        if not self._thread.is_alive():
            return
        if self.on_stop is not None:
            self.on_stop()
        # Sockets are closed in the loop's own thread: the trigger runs the closing there.
        try:
            self._server.trigger.pull_trigger(lambda: wasyncore.close_all(self._map))
        except OSError as exc:  # the trigger is closed already: close them from here
            log.warning("the web server's wake-up pipe was closed before the stop (%s; listening: %s; "
                        "%d connections): closing from this thread", exc, self._server.accepting, len(self._map))
            wasyncore.close_all(self._map, ignore_all=True)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            log.warning("the web server did not stop within %g s", timeout_s)
