"""Verify before parsing: what reaches `/slack/events` is sized, verified and shape-checked on
its raw bytes before bolt or a listener sees it, and nothing malformed ends as HTTP 500."""

from __future__ import annotations

import copy
import json
import socket
import time
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest

from bot.slack.testing import Reply
from tests.bot.conftest import Bot

FORM = "application/x-www-form-urlencoded"


def _raw_request(bot: Bot, head: str, body: bytes) -> tuple[str, float]:
    """Send a request head and the start of its body on a socket; the status line back and
    how long it took. The server must answer without waiting for the rest of the body."""
    url = urlsplit(bot.base_url)
    start = time.perf_counter()
    with socket.create_connection((url.hostname, url.port), timeout=10) as s:
        s.sendall(head.encode() + body)
        answer = b""
        while b"\r\n" not in answer:
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
    return answer.split(b"\r\n", 1)[0].decode(), time.perf_counter() - start


def test_a_48_mb_unsigned_body_is_refused_from_its_length_before_it_is_read(bot: Bot) -> None:
    size = 48 * 1024 * 1024
    head = (
        "POST /slack/events HTTP/1.1\r\nHost: bot\r\n"
        f"Content-Type: {FORM}\r\nContent-Length: {size}\r\n\r\n"
    )
    status, seconds = _raw_request(bot, head, b"command=%2Fgpu&text=" + b"x" * 65536)
    assert status.startswith("HTTP/1.1 413")
    assert seconds < 3  # generous: it answers before the remaining 48 MB are even sent
    assert bot.service.count == 0 and bot.fake.posts() == []


def test_a_signed_body_over_the_limit_is_refused(bot: Bot) -> None:
    body = bot.slack.command_body("ask " + "x" * (300 * 1024))
    reply = bot.slack.post(body, content_type=FORM)
    assert reply.status == 413
    assert bot.service.count == 0


def test_an_unsigned_body_is_refused_before_it_is_parsed(bot: Bot) -> None:
    body = "payload=" + "[" * 100_000  # deep nesting: costly to parse, never parsed
    reply = bot.slack.post(body, content_type=FORM, signature="v0=" + "0" * 64)
    assert reply.status == 401 and reply.seconds < 3


def _action(bot: Bot, **changes: Any) -> dict[str, Any]:
    payload = bot.slack.click_payload(action_id="gpu_resolve", value='{"n":"team-a","p":"x"}')
    payload.update(changes)
    return payload


MALFORMED: list[tuple[str, Any, str]] = [
    ("json that does not parse", b"{not json", "application/json"),
    ("a JSON array", b"[1, 2]", "application/json"),
    ("a payload that is an array", b"payload=%5B1%2C2%5D", FORM),
    ("a payload that does not parse", b"payload=%7Bnot", FORM),
    ("JSON nested past the parser's depth", b"[" * 200_000, "application/json"),
    ("bytes that are not UTF-8", b"command=%2Fgpu&text=\xff\xfe", FORM),
    ("a command without its user", b"command=%2Fgpu&text=help", FORM),
    ("an event callback without its event", b'{"type":"event_callback"}', "application/json"),
    (
        "a mention without its channel",
        b'{"type":"event_callback","event_id":"Ev1","event":{"type":"app_mention","user":"U1",'
        b'"text":"hi","ts":"1.2"}}',
        "application/json",
    ),
    ("an unsupported content type", b"hello", "text/plain"),
]


@pytest.mark.parametrize(("what", "body", "content_type"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_a_malformed_signed_body_is_a_400_not_a_500(
    bot: Bot, what: str, body: bytes, content_type: str, caplog: pytest.LogCaptureFixture
) -> None:
    reply = bot.slack.post(body, content_type=content_type)
    assert reply.status in (400, 415), reply
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]
    time.sleep(0.1)
    assert bot.service.count == 0 and bot.fake.posts() == []


@pytest.mark.parametrize(
    "changes",
    [
        {"actions": []},
        {"actions": None},
        {"actions": [1]},
        {"actions": [{"value": "x"}]},
        {"user": ["UOPS"]},
        {"user": {"name": "no id"}},
        {"channel": "COPS"},
        {"container": []},
        {"message": "a string"},
        {"team": ["T1"]},
        {"authorizations": {"team_id": "T1"}},
    ],
    ids=str,
)
def test_an_action_payload_of_the_wrong_shape_is_a_400(bot: Bot, changes: dict[str, Any]) -> None:
    reply = bot.slack.interaction(_action(bot, **changes))
    assert reply.status == 400, reply
    time.sleep(0.1)
    assert bot.fake.posts() == []


def _mutations(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    """Every field (two levels deep) replaced by every wrong kind of value."""
    wrong: list[Any] = [None, [], {}, "", "x", 0, True, [1, 2], {"id": []}]
    out = []
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, sub in items:
        out += [((*path, key), w) for w in wrong]
        if isinstance(sub, (dict, list)) and len(path) < 1:
            out += _mutations(sub, (*path, key))
    return out


def _mutated(payload: Any, path: tuple[Any, ...], value: Any) -> Any:
    changed = copy.deepcopy(payload)
    target = changed
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return changed


def test_no_mutation_of_a_signed_payload_is_a_500(
    bot: Bot, caplog: pytest.LogCaptureFixture
) -> None:
    """A command, a button press and a mention, each field replaced by wrong kinds of value:
    each request is answered with 200, 400 or 404 and nothing is logged as an error."""
    command = dict(
        (k, v) for k, v in (p.split("=", 1) for p in bot.slack.command_body("help").split("&"))
    )
    replies: list[tuple[str, Reply]] = []
    for path, value in _mutations(_action(bot)):
        replies.append(
            (f"action {path}={value!r}", bot.slack.interaction(_mutated(_action(bot), path, value)))
        )
    mention = bot.slack.mention_body("help")
    for path, value in _mutations(mention):
        body = json.dumps(_mutated(mention, path, value))
        replies.append(
            (f"mention {path}={value!r}", bot.slack.post(body, content_type="application/json"))
        )
    for key in command:
        body = "&".join(f"{k}={v}" for k, v in command.items() if k != key)
        replies.append((f"command without {key}", bot.slack.post(body, content_type=FORM)))
    bad = [(what, r.status) for what, r in replies if r.status not in (200, 400, 404)]
    assert bad == []
    errors = [r.getMessage() for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]
    assert errors == []


def test_a_response_url_that_is_not_slacks_is_refused(bot: Bot) -> None:
    body = urlencode(
        {
            "command": "/gpu",
            "text": "incidents",
            "user_id": "UOPS",
            "channel_id": "DOPS",
            "trigger_id": "t-evil",
            "response_url": "https://evil.example/collect",
        }
    )
    reply = bot.slack.post(body, content_type=FORM)
    assert reply.status == 400
    press = _action(bot, response_url="http://127.0.0.1:1/steal")
    assert bot.slack.interaction(press).status == 400
    time.sleep(0.2)
    assert bot.fake.posts() == [] and bot.service.count == 0


def test_an_oversized_command_is_refused_in_one_line_before_any_work(bot: Bot) -> None:
    reply = bot.slack.command("why-pending " + "a" * 200_000)
    assert reply.status == 200 and reply.seconds < 3
    text = reply.json()["text"]
    assert "\n" not in text and "200012 characters long" in text and "at most 3000" in text
    with bot.store.engine.connect() as conn:  # not even its delivery was recorded
        assert conn.exec_driver_sql("SELECT count(*) FROM deliveries").scalar() == 0
    assert bot.service.count == 0


def test_a_command_mentioning_the_word_payload_is_answered(bot: Bot) -> None:
    """bolt's own parser took any form containing "payload" for an interaction and dropped
    the command; the intake parses the form by its fields."""
    reply = bot.slack.command("ask what is the payload of a GPU pod")
    assert reply.status == 200
    assert bot.fake.wait_posts(1)[0].method == "response"


@pytest.mark.parametrize("text", ["incident ²", "incident ١٢", "incident 100000000000000000000000"])
def test_an_incident_id_that_is_not_a_plain_number_is_answered(bot: Bot, text: str) -> None:
    reply = bot.slack.command(text)
    assert reply.status == 200
    assert "incident takes one numeric incident id" in reply.json()["text"].replace("\u2060", "")
