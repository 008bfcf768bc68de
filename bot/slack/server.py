"""Serving the bolt app: HTTP (Events API) or Socket Mode, plus `/healthz` and `/metrics`.

Why not `App.start()`: bolt's built-in server serves only the Slack path and is documented as
development-only. Its WSGI adapter (`SlackRequestHandler`) is the production entry point, so we
mount it in a tiny WSGI router next to the probes and serve that with waitress, a production
WSGI server: one process (the watch caches and the worker pool live in it), a fixed pool of
HTTP threads, a listen backlog of 1024 and a cap on open connections. HTTP threads only verify,
parse and ack; the triage work itself is on the app's bounded pool. In Socket Mode the same
router still serves the probes and metrics on PORT; Slack traffic arrives over the WebSocket
instead of `/slack/events`.

The Slack path does not go through bolt's WSGI adapter: that adapter parses a body before
bolt checks its signature. `bot.slack.intake` checks size, timestamp and signature on the raw bytes
first, parses once and checks the request's shape; bolt then dispatches the parsed body.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from slack_bolt import BoltRequest
from slack_bolt.adapter.wsgi.http_response import WsgiHttpResponse
from waitress import wasyncore
from waitress.server import create_server

from bot.slack.app import TriageApp
from bot.slack.intake import Answer

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIEnvironment

log = logging.getLogger(__name__)

SLACK_PATH = "/slack/events"


class Router:
    """WSGI app: `/slack/events` → bolt, `/healthz` and `/readyz` → probes, `/metrics`."""

    def __init__(
        self,
        app: TriageApp,
        *,
        metrics: Callable[[], tuple[bytes, str]] | None,
        slack: bool = True,
        not_ready: Callable[[], str | None] = lambda: None,
        notice: str | None = None,
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.not_ready = not_ready
        self.notice = notice  # what an operator should know, in /readyz's body
        self.slack = slack

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "GET")
        if path in ("/healthz", "/livez") and method in ("GET", "HEAD"):
            return _plain(start_response, "200 OK", b"ok\n")
        if path == "/readyz" and method in ("GET", "HEAD"):
            why = "shutting down" if self.app.dispatcher.pool.closed else self.not_ready()
            if why:
                return _plain(start_response, "503 Service Unavailable", f"{why}\n".encode())
            # Degraded is still ready: commands are answered, only not recorded (a read-only
            # database, or a SQLite file deleted under the bot).
            degraded = self.app.core.store.condition()
            notes = [n for n in (self.notice, degraded and f"degraded: {degraded}") if n]
            ready = "; ".join(["ready", *notes]) + "\n"
            return _plain(start_response, "200 OK", ready.encode())
        if path == "/metrics" and method == "GET" and self.metrics is not None:  # else a port apart
            body, content_type = self.metrics()
            start_response("200 OK", [("Content-Type", content_type)])
            return [body]
        if self.slack and path == SLACK_PATH:
            return self._slack(environ, start_response)
        return _plain(start_response, "404 Not Found", b"not found\n")

    def _slack(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        checked = self.app.intake.check(environ)
        if isinstance(checked, Answer):
            start_response(checked.status, [("Content-Type", checked.content_type)])
            return [checked.body]
        # Verified and parsed already: bolt gets the body as a dict, the way Socket Mode hands
        # it over (bolt skips its own signature check for those, which needs the raw text).
        request = BoltRequest(
            body=checked.body,
            query=environ.get("QUERY_STRING", ""),
            headers=checked.headers,
            mode="socket_mode",
        )
        response = self.app.dispatch(request)
        out = WsgiHttpResponse(status=response.status, headers=response.headers, body=response.body)
        start_response(out.status, out.get_headers())
        return out.get_body()


def _plain(start_response: StartResponse, status: str, body: bytes) -> list[bytes]:
    start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
    return [body]


class Server:
    """The running bot: a WSGI server on `host:port`, optionally a Socket Mode connection."""

    def __init__(
        self,
        app: TriageApp,
        *,
        host: str,
        port: int,
        metrics: Callable[[], tuple[bytes, str]] | None,
        app_token: str | None = None,
        not_ready: Callable[[], str | None] = lambda: None,
        threads: int = 16,
        connection_limit: int = 1000,
        notice: str | None = None,
    ) -> None:
        self.app = app
        self.router = Router(
            app, metrics=metrics, slack=app_token is None, not_ready=not_ready, notice=notice
        )
        self.httpd: Any = create_server(
            self.router,
            host=host,
            port=port,
            threads=threads,
            backlog=1024,
            connection_limit=connection_limit,
            channel_timeout=60,  # Slack sends small bodies; a stalled client goes
            # Larger bodies are refused (413) from their Content-Length, before being read.
            max_request_body_size=app.intake.max_body + 1,
            ident="gpu-triage",
            clear_untrusted_proxy_headers=True,
        )
        self._socket_mode = None
        if app_token is not None:
            from slack_bolt.adapter.socket_mode import SocketModeHandler

            self._socket_mode = SocketModeHandler(app, app_token)
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    @property
    def port(self) -> int:
        port = getattr(self.httpd, "effective_port", None)
        return int(port if port is not None else self.httpd.effective_listen[0][1])

    def start(self) -> None:
        """Serve in background threads (tests); `serve_forever()` blocks (the CLI)."""
        self._thread = threading.Thread(target=self._serve, name="http", daemon=True)
        self._thread.start()
        if self._socket_mode is not None:
            self._socket_mode.connect()  # type: ignore[no-untyped-call]

    def serve_forever(self) -> None:
        """Serve until SIGINT/SIGTERM (raised here as KeyboardInterrupt)."""
        if self._socket_mode is not None:
            self._socket_mode.connect()  # type: ignore[no-untyped-call]
        self._serve()

    def _serve(self) -> None:
        """waitress's loop, one poll at a time until `close_http()`. Whatever it served is
        closed here, in the thread that polls it, so no other thread closes a descriptor that
        `select()` may still hold, and stopping does not depend on the trigger being open."""
        httpd, everything = self.httpd, self.httpd._map
        try:
            while everything and not self._stopping.is_set():
                wasyncore.loop(
                    timeout=httpd.adj.asyncore_loop_timeout,
                    use_poll=httpd.adj.asyncore_use_poll,
                    map=everything,
                    count=1,
                )
        finally:
            wasyncore.close_all(everything, ignore_all=True)

    def stop(self) -> None:
        """Stop serving HTTP, then wait for the triages in flight to post their answers."""
        if self._socket_mode is not None:
            self._socket_mode.close()  # type: ignore[no-untyped-call]
        self.close_http()
        self.app.close(wait=True)

    def close_http(self) -> None:
        """Close the listening socket and open connections, then let requests being answered
        finish (5 s at most). The loop is woken through waitress's trigger, or ends within its
        poll timeout (1 s) should the trigger be gone."""
        self._stopping.set()
        thread = self._thread
        if thread is not None and thread.is_alive():
            trigger = self.httpd.trigger
            if trigger._closed:  # its pipe's numbers may be someone else's by now
                log.warning("the HTTP loop's wake-up pipe is closed; stopping on its timeout")
            else:
                try:
                    trigger.pull_trigger()
                except OSError as e:
                    log.warning("could not wake the HTTP loop (%s); stopping on its timeout", e)
            thread.join(timeout=5)
        else:  # never started, or serve_forever() returned: nothing else touches them now
            wasyncore.close_all(self.httpd._map, ignore_all=True)
        self.httpd.task_dispatcher.shutdown(cancel_pending=False)
