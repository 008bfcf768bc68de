"""The chat port over Slack's Web API and response URLs (`bot.core.chat.Chat`).

Every write on an asker's behalf passes their relay gate and carries their "not recorded"
note (a context block, or a last line); a refused call is a `ChatError` with Slack's error
code. Links never unfurl: what the bot posts quotes cluster text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slack_bolt import Respond
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.core.chat import Asker, ChatError, Message, Place, ThreadRef
from bot.slack.blocks import with_note
from bot.slack.ids import DIRECT

NAME = "slack"
_ABSENT = ("not_in_channel", "channel_not_found")  # the bot cannot post there


class SlackReply:
    """An asker's private answer: the request's response URL (bolt's `Respond`)."""

    def __init__(self, respond: Respond) -> None:
        self._respond = respond

    def __call__(self, message: Message, *, replace: bool = False) -> None:
        self._respond(**_args(message), response_type="ephemeral", replace_original=replace)


class SlackChat:
    def __init__(self, client: WebClient) -> None:
        self.client = client

    @property
    def name(self) -> str:
        return NAME

    def say(self, asker: Asker, text: str) -> None:
        if asker.answered_privately:
            self.ephemeral(asker, Message(text))
        elif asker.channel:
            self.post(Message(text), to=Place(asker.channel, asker.thread), asker=asker)

    def ephemeral(self, asker: Asker, message: Message, *, replace: bool = False) -> None:
        if not asker.may_reply():
            return
        noted = _noted(message, asker.note())
        if asker.private is not None:
            asker.private(noted, replace=replace)
        elif asker.channel:
            extra = {} if asker.thread is None else {"thread_ts": asker.thread}
            self._call(
                self.client.chat_postEphemeral,
                channel=asker.channel,
                user=asker.user,
                **_args(noted),
                **extra,
            )

    def post(self, message: Message, *, to: Place, asker: Asker | None = None) -> ThreadRef | None:
        if asker is not None:
            if not asker.may_reply():
                return None
            message = _noted(message, asker.note())
        extra: dict[str, Any] = {} if to.thread is None else {"thread_ts": to.thread}
        if to.broadcast:
            extra["reply_broadcast"] = True
        posted = self._call(
            self.client.chat_postMessage,
            channel=to.channel,
            unfurl_links=False,
            **_args(message),
            **extra,
        )
        return ThreadRef(NAME, str(posted.get("channel") or to.channel), str(posted.get("ts")))

    def update(self, message: Message, *, thread: ThreadRef) -> None:
        self._call(
            self.client.chat_update, channel=thread.channel, ts=thread.thread, **_args(message)
        )

    def permalink(self, thread: ThreadRef) -> str | None:
        link = self._call(
            self.client.chat_getPermalink, channel=thread.channel, message_ts=thread.thread
        )
        return str(link.get("permalink") or "") or None

    def is_direct(self, channel: str) -> bool:
        return channel.startswith(DIRECT)

    @staticmethod
    def _call(method: Callable[..., Any], **args: Any) -> Any:
        try:
            return method(**args)
        except SlackApiError as e:
            data = getattr(e.response, "data", None)
            code = str(data.get("error", "")) if isinstance(data, dict) else ""
            raise ChatError(code or "error", absent=code in _ABSENT) from e


def _args(message: Message) -> dict[str, Any]:
    """A message as Web API / response URL arguments."""
    if message.parts is None:
        return {"text": message.text}
    return {"text": message.text, "blocks": message.parts}


def _noted(message: Message, note: str | None) -> Message:
    if not note:
        return message
    noted = with_note(_args(message), note)
    return Message(str(noted.get("text") or ""), noted.get("blocks"))
