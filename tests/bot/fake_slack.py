"""A fake of Slack's servers on loopback: the Web API methods the bot uses and response_urls.

Like bolt-python's `tests/mock_web_api_server`: a stdlib HTTP server that records every call,
so tests assert on what the bot actually sent. Nothing here knows about the bot.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

BOT_USER = "UBOT"


@dataclass
class Call:
    method: str  # Web API method ("chat.postMessage") or "response" for response_url posts
    args: dict[str, Any]
    path: str


@dataclass
class FakeSlack:
    """State of the fake: recorded calls, group members, channels that refuse the bot."""

    calls: list[Call] = field(default_factory=list)
    usergroups: dict[str, list[str]] = field(default_factory=dict)
    not_in_channel: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""
    _ts: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def api_url(self) -> str:
        return self.url + "/api/"

    def response_url(self, key: str) -> str:
        return f"{self.url}/response/{key}"

    def of(self, method: str) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.method == method]

    def posts(self) -> list[Call]:
        """Every message the bot sent anywhere (channel posts and response_url replies)."""
        with self.lock:
            return [c for c in self.calls if c.method in ("chat.postMessage", "response")]

    def wait(self, predicate: Callable[[], bool], *, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; calls so far: {[c.method for c in self.calls]}")
            time.sleep(0.01)

    def wait_posts(self, n: int, *, timeout: float = 10.0) -> list[Call]:
        self.wait(lambda: len(self.posts()) >= n, timeout=timeout)
        return self.posts()

    def answer(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        if method == "auth.test":
            return {"ok": True, "user_id": BOT_USER, "bot_id": "B1", "team_id": "T1", "user": "bot"}
        if method == "chat.postMessage":
            channel = str(args.get("channel"))
            if channel in self.not_in_channel:
                return {"ok": False, "error": "not_in_channel"}
            return {"ok": True, "channel": channel, "ts": f"1700000000.{next(self._ts):06d}"}
        if method == "chat.postEphemeral":
            return {"ok": True, "message_ts": f"1700000000.{next(self._ts):06d}"}
        if method == "chat.update":
            return {"ok": True, "channel": args.get("channel"), "ts": args.get("ts")}
        if method == "chat.getPermalink":
            ts = str(args.get("message_ts", "")).replace(".", "")
            return {
                "ok": True,
                "permalink": f"https://fake.slack/archives/{args.get('channel')}/p{ts}",
            }
        if method == "usergroups.users.list":
            return {"ok": True, "users": self.usergroups.get(str(args.get("usergroup")), [])}
        return {"ok": False, "error": "unknown_method"}


def _handler(state: FakeSlack) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def _args(self) -> dict[str, Any]:
            url = urlsplit(self.path)
            args: dict[str, Any] = dict(parse_qsl(url.query))
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode() if length else ""
            if raw:
                if (self.headers.get("Content-Type") or "").startswith("application/json"):
                    args.update(json.loads(raw))
                else:
                    args.update(dict(parse_qsl(raw)))
            for key in ("blocks", "attachments"):
                if isinstance(args.get(key), str):
                    args[key] = json.loads(args[key])
            return args

        def _handle(self) -> None:
            path = urlsplit(self.path).path
            args = self._args()
            if path.startswith("/response/"):
                with state.lock:
                    state.calls.append(Call("response", args, path))
                self._send(200, b"ok", "text/plain")
                return
            method = path.removeprefix("/api/")
            with state.lock:
                state.calls.append(Call(method, args, path))
            body = json.dumps(state.answer(method, args)).encode()
            self._send(200, body, "application/json")

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = _handle
        do_GET = _handle

    return Handler


class FakeSlackServer:
    def __init__(self) -> None:
        self.state = FakeSlack()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.state))
        self.httpd.daemon_threads = True
        self.state.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeSlack:
        self.thread.start()
        return self.state

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
