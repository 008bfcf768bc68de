"""Plays Slack's side of the Events API: signed slash commands, events and button clicks."""

from __future__ import annotations

import itertools
import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from slack_sdk.signature import SignatureVerifier

SECRET = "test-signing-secret"
_ids = itertools.count(1)


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
        body: str,
        *,
        content_type: str,
        timestamp: int | None = None,
        signature: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        ts = str(int(time.time()) if timestamp is None else timestamp)
        sig = signature or SignatureVerifier(self.secret).generate_signature(
            timestamp=ts, body=body
        )
        req = urllib.request.Request(
            self.url,
            data=body.encode(),
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

    def mention(
        self,
        text: str,
        *,
        user: str = "UOPS",
        channel: str = "COPS",
        event_id: str | None = None,
        thread_ts: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
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
        body = json.dumps(
            {
                "token": "legacy",
                "team_id": "T1",
                "api_app_id": "A1",
                "type": "event_callback",
                "event_id": event_id or f"Ev{n}",
                "event_time": int(time.time()),
                "event": event,
                "authorizations": [{"team_id": "T1", "user_id": "UBOT", "is_bot": True}],
            }
        )
        return self.post(body, content_type="application/json", headers=headers)

    def click(
        self,
        *,
        action_id: str,
        value: str,
        user: str = "UOPS",
        channel: str = "COPS",
        message: dict[str, Any] | None = None,
        ephemeral: bool = False,
    ) -> Reply:
        n = next(_ids)
        message = message or {"ts": "1700000000.000001", "blocks": []}
        payload = {
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
        body = urlencode({"payload": json.dumps(payload)})
        return self.post(body, content_type="application/x-www-form-urlencoded")
