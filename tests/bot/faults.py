"""What the database-fault tests send and check, through the real bot over signed HTTP: each
command is acknowledged well inside Slack's 3 s, never with a 500, and answered exactly once."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

from sqlalchemy import text

from bot.slack.testing import Reply
from tests.bot.conftest import Bot


@dataclass
class Sent:
    """One command sent: Slack's view of the ack, and where its answer is to be found."""

    reply: Reply
    key: str  # its delivery key
    path: str | None = None  # a slash command's response URL path
    thread: str | None = None  # a mention's thread

    def answers(self, bot: Bot) -> list[str]:
        if self.path is not None:
            calls = [c for c in bot.fake.of("response") if c.path == self.path]
        else:
            calls = [
                c for c in bot.fake.of("chat.postMessage") if c.args.get("thread_ts") == self.thread
            ]
        return [str(c.args.get("text", "")) + str(c.args.get("blocks") or "") for c in calls]


def command(bot: Bot, text_: str, *, user: str = "UOPS", channel: str = "DOPS") -> Sent:
    body = bot.slack.command_body(text_, user=user, channel=channel)
    fields = dict(parse_qsl(body))
    reply = bot.slack.post(body, content_type="application/x-www-form-urlencoded")
    return Sent(
        reply, f"trigger:{fields['trigger_id']}", path=urlsplit(fields["response_url"]).path
    )


def mention(bot: Bot, text_: str, *, channel: str = "COPS") -> Sent:
    body = bot.slack.mention_body(text_, channel=channel)
    reply = bot.slack.post(json.dumps(body), content_type="application/json")
    return Sent(reply, f"event:{body['event_id']}", thread=body["event"]["ts"])


def acked_at_once(sent: list[Sent]) -> None:
    for s in sent:
        assert s.reply.status == 200, s.reply
        assert s.reply.seconds < 3, f"ack took {s.reply.seconds:.1f}s"


def answered_once(bot: Bot, sent: list[Sent], *, timeout: float = 30.0) -> list[str]:
    """Wait until every command has an answer; each has exactly one. Their answers."""
    bot.fake.wait(lambda: all(s.answers(bot) for s in sent), timeout=timeout)
    counts = [len(s.answers(bot)) for s in sent]
    assert counts == [1] * len(sent), counts
    return [s.answers(bot)[0] for s in sent]


def still_once(bot: Bot, sent: list[Sent], *, wait: float) -> None:
    """After `wait` seconds (past a job's lease: nobody replays them), still one answer each."""
    time.sleep(wait)
    assert [len(s.answers(bot)) for s in sent] == [1] * len(sent)


def recorded_keys(bot: Bot) -> set[str]:
    with bot.store.engine.connect() as conn:
        return {str(k) for (k,) in conn.execute(text("SELECT key FROM deliveries"))}
