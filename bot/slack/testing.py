"""Slack on loopback, for tests and the load bench: a fake of Slack's servers (the Web API methods
the bot calls, and response_urls) and a sender that plays Slack's side of the Events API
(signed slash commands, events and button clicks).

Like bolt-python's `tests/mock_web_api_server` and kube.testing's fake API server: stdlib HTTP
on 127.0.0.1 that records every call, so callers assert on what the bot actually sent.
Nothing here knows about the bot.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

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


class _Server(ThreadingHTTPServer):
    request_queue_size = 1024  # the load bench posts answers 50 at a time
    daemon_threads = True


class FakeSlackServer:
    def __init__(self) -> None:
        self.state = FakeSlack()
        self.httpd = _Server(("127.0.0.1", 0), _handler(self.state))
        self.httpd.daemon_threads = True
        self.state.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeSlack:
        self.thread.start()
        return self.state

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


SECRET = "test-signing-secret"
_ids = itertools.count(1)


def sign(secret: str, *, timestamp: str, body: bytes) -> str:
    """Slack's request signature (v0) over the raw bytes, as Slack computes it."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


@dataclass
class Reply:
    status: int
    body: str
    seconds: float

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class SlackSender:
    """Posts to the bot's `/slack/events` the way Slack does, signed with `secret`."""

    url: str
    fake_url: str
    secret: str = SECRET

    def post(
        self,
        body: str | bytes,
        *,
        content_type: str,
        timestamp: int | None = None,
        signature: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        ts = str(int(time.time()) if timestamp is None else timestamp)
        data = body.encode() if isinstance(body, str) else body
        sig = signature or sign(self.secret, timestamp=ts, body=data)
        req = urllib.request.Request(
            self.url,
            data=data,
            method="POST",
            headers={
                "Content-Type": content_type,
                "X-Slack-Request-Timestamp": ts,
                "X-Slack-Signature": sig,
                **(headers or {}),
            },
        )
        start = time.perf_counter()
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return Reply(resp.status, resp.read().decode(), time.perf_counter() - start)
        except urllib.error.HTTPError as e:
            return Reply(e.code, e.read().decode(), time.perf_counter() - start)

    def command_body(
        self, text: str, *, user: str = "UOPS", channel: str = "COPS", trigger: str | None = None
    ) -> str:
        n = next(_ids)
        return urlencode(
            {
                "token": "legacy",
                "team_id": "T1",
                "team_domain": "fake",
                "channel_id": channel,
                "channel_name": "ops",
                "user_id": user,
                "user_name": user.lower(),
                "command": "/gpu",
                "text": text,
                "api_app_id": "A1",
                "response_url": f"{self.fake_url}/response/{n}",
                "trigger_id": trigger or f"trigger-{n}",
            }
        )

    def command(self, text: str, **kw: Any) -> Reply:
        headers = kw.pop("headers", None)
        body = self.command_body(text, **kw)
        return self.post(body, content_type="application/x-www-form-urlencoded", headers=headers)

    def mention(self, text: str, *, headers: dict[str, str] | None = None, **event: Any) -> Reply:
        """Mention the bot: `mention_body(text, **event)`, posted."""
        body = self.mention_body(text, **event)
        return self.post(json.dumps(body), content_type="application/json", headers=headers)

    def mention_body(
        self,
        text: str,
        *,
        user: str = "UOPS",
        channel: str = "COPS",
        event_id: str | None = None,
        thread_ts: str | None = None,
    ) -> dict[str, Any]:
        """An `app_mention` event callback as Slack sends it."""
        n = next(_ids)
        event: dict[str, Any] = {
            "type": "app_mention",
            "user": user,
            "text": f"<@UBOT> {text}",
            "channel": channel,
            "ts": f"1600000000.{n:06d}",
            "event_ts": f"1600000000.{n:06d}",
        }
        if thread_ts:
            event["thread_ts"] = thread_ts
        return {
            "token": "legacy",
            "team_id": "T1",
            "api_app_id": "A1",
            "type": "event_callback",
            "event_id": event_id or f"Ev{n}",
            "event_time": int(time.time()),
            "event": event,
            "authorizations": [{"team_id": "T1", "user_id": "UBOT", "is_bot": True}],
        }

    def click(self, **press: Any) -> Reply:
        """Press a button: `click_payload(**press)`, posted."""
        return self.interaction(self.click_payload(**press))

    def click_payload(
        self,
        *,
        action_id: str,
        value: str,
        user: str = "UOPS",
        channel: str = "COPS",
        message: dict[str, Any] | None = None,
        ephemeral: bool = False,
    ) -> dict[str, Any]:
        """A `block_actions` payload as Slack sends it for a button press."""
        n = next(_ids)
        message = message or {"ts": "1700000000.000001", "blocks": []}
        return {
            "type": "block_actions",
            "team": {"id": "T1"},
            "user": {"id": user, "name": user.lower()},
            "api_app_id": "A1",
            "token": "legacy",
            "container": {
                "type": "message",
                "message_ts": message.get("ts"),
                "channel_id": channel,
                "is_ephemeral": ephemeral,
            },
            "trigger_id": f"trigger-{n}",
            "channel": {"id": channel, "name": "ops"},
            "message": None if ephemeral else message,
            "response_url": f"{self.fake_url}/response/{n}",
            "actions": [
                {
                    "type": "button",
                    "action_id": action_id,
                    "block_id": "gpu_actions",
                    "value": value,
                    "action_ts": str(time.time()),
                }
            ],
        }

    def interaction(self, payload: Any) -> Reply:
        """Post an interactive payload (any JSON value) as Slack's `payload=` form."""
        body = urlencode({"payload": json.dumps(payload)})
        return self.post(body, content_type="application/x-www-form-urlencoded")
