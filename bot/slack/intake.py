"""Slack requests checked on their raw bytes before anything parses them.

bolt's WSGI adapter parsed a body (form, JSON, the `payload` field) when it built the request,
before its middleware checked the signature: a 48 MB unsigned form cost tens of seconds of
CPU before its 401, and a signed but malformed body (`{not json`, `payload=[1,2]`) ended as
HTTP 500. Here, in order, each step cheaper than the next:

1. the body's declared size against the limit (waitress refuses larger ones itself: 413);
2. the timestamp (ASCII digits, within five minutes) and the signature's form (401);
3. the body read, at most the limit, and its HMAC compared in constant time (401);
4. UTF-8, then one parse: JSON, or a form whose `payload` field holds JSON (400, 415);
5. the shape of the kind of request it is (`bot.slack.shapes`), and its response URL (400);
6. a slash command's text against its length limit: one line back, nothing run.

Only then does bolt get the request, already parsed (bolt's own parser mistakes a command
whose text contains the word "payload" for an interaction and drops it).
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from hashlib import sha256
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from bot.core.commands import MAX_TEXT
from bot.slack import messages as msg
from bot.slack.shapes import kind, problem

if TYPE_CHECKING:
    from wsgiref.types import WSGIEnvironment

log = logging.getLogger(__name__)

MAX_BODY = 256 * 1024  # Slack's requests are a few KB; a message's blocks at most ~50 KB
MAX_AGE = 300  # seconds a signed request stays valid (Slack's own rule)
SLACK_RESPONSE_URLS = ("https://hooks.slack.com/",)
_TIMESTAMP = re.compile(r"[0-9]{1,15}")  # Unix seconds, ASCII digits only (not "¹²³")
_SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")
_FORM = "application/x-www-form-urlencoded"


@dataclass(frozen=True)
class Accepted:
    """A verified, parsed request of a kind the bot handles."""

    body: dict[str, Any]
    kind: str
    headers: dict[str, str | Sequence[str]]


@dataclass(frozen=True)
class Answer:
    """What to send back at once, without bolt: a refusal, or a reply that needs no work."""

    status: str
    body: bytes
    content_type: str = "text/plain; charset=utf-8"


def _refuse(status: str, why: str) -> Answer:
    return Answer(status, f"{why}\n".encode())


class Intake:
    def __init__(
        self,
        *,
        secret: str,
        max_body: int = MAX_BODY,
        response_urls: tuple[str, ...] = SLACK_RESPONSE_URLS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._key = secret.encode()
        self.max_body = max_body
        self.response_urls = tuple(response_urls)
        self._clock = clock

    def check(self, environ: WSGIEnvironment) -> Accepted | Answer:
        """Verify, parse and shape-check one request to the Slack path."""
        if environ.get("REQUEST_METHOD") != "POST":
            return _refuse("405 Method Not Allowed", "POST only")
        declared = str(environ.get("CONTENT_LENGTH") or "0")
        if not declared.isascii() or not declared.isdigit():
            return _refuse("400 Bad Request", "invalid Content-Length")
        if int(declared) > self.max_body:
            return _refuse("413 Content Too Large", "request body too large")
        stamp = str(environ.get("HTTP_X_SLACK_REQUEST_TIMESTAMP") or "")
        signature = str(environ.get("HTTP_X_SLACK_SIGNATURE") or "")
        if not (_TIMESTAMP.fullmatch(stamp) and _SIGNATURE.fullmatch(signature)):
            log.info("refused a Slack request: no valid timestamp or signature header")
            return _refuse("401 Unauthorized", "invalid request")
        if abs(self._clock() - int(stamp)) > MAX_AGE:
            log.info("refused a Slack request: timestamp %s is more than 5 minutes off", stamp)
            return _refuse("401 Unauthorized", "invalid request")
        raw = environ["wsgi.input"].read(min(int(declared), self.max_body + 1))
        if len(raw) > self.max_body:
            return _refuse("413 Content Too Large", "request body too large")
        mac = hmac.new(self._key, b"v0:" + stamp.encode() + b":" + raw, sha256).hexdigest()
        if not hmac.compare_digest("v0=" + mac, signature):
            log.info("refused a Slack request: the signature does not match")
            return _refuse("401 Unauthorized", "invalid request")
        return self._parsed(raw, environ)

    def _parsed(self, raw: bytes, environ: WSGIEnvironment) -> Accepted | Answer:
        content_type = str(environ.get("CONTENT_TYPE") or "").split(";")[0].strip().lower()
        if content_type not in (_FORM, "application/json"):
            return _refuse("415 Unsupported Media Type", "unsupported content type")
        try:
            body = _parse(raw.decode("utf-8"), form=content_type == _FORM)
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            log.info("refused a signed Slack request: the body does not parse")
            return _refuse("400 Bad Request", "malformed request")
        if not isinstance(body, dict):
            log.info("refused a signed Slack request: the body is not an object")
            return _refuse("400 Bad Request", "malformed request")
        what = kind(body)
        if what is None:  # a kind the bot does not handle: acknowledged, nothing done
            return Answer("200 OK", b"")
        wrong = problem(body, what) or self._response_url_problem(body)
        if wrong is not None:
            log.info("refused a signed Slack request (%s): %s", what, wrong)
            return _refuse("400 Bad Request", "malformed request")
        text = body.get("text")
        if what == "command" and isinstance(text, str) and len(text) > MAX_TEXT:
            reply = {"response_type": "ephemeral", "text": msg.too_long(len(text), MAX_TEXT)}
            return Answer("200 OK", json.dumps(reply).encode(), "application/json")
        headers: dict[str, str | Sequence[str]] = {
            k[5:].lower().replace("_", "-"): str(v)
            for k, v in environ.items()
            if k.startswith("HTTP_")
        }
        headers["content-type"] = content_type
        return Accepted(body=body, kind=what, headers=headers)

    def allowed(self, url: object) -> bool:
        """Whether `url` is a response URL the bot may post to (Slack's, by default)."""
        return isinstance(url, str) and url.startswith(self.response_urls)

    def _response_url_problem(self, body: dict[str, Any]) -> str | None:
        urls = [body["response_url"]] if "response_url" in body else []
        urls += [u.get("response_url") for u in body.get("response_urls") or []]
        bad = [u for u in urls if u is not None and not self.allowed(u)]
        return "a response URL that is not Slack's" if bad else None


def _parse(text: str, *, form: bool) -> Any:
    """One parse of the body: JSON, a form, or a form whose `payload` field is JSON."""
    if not form:
        return json.loads(text)
    fields = dict(parse_qsl(text, keep_blank_values=True, max_num_fields=200))
    return json.loads(fields["payload"]) if "payload" in fields else fields
