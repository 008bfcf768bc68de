"""The chat port: what the core asks of a chat platform, and the values it hands it.

The core decides who may see what, what to say and where (privately to the asker, in a
channel, in an incident's thread); the chat's adapter decides how. Its port is small: say a
line, post a message, answer one person privately, update a message, link to a thread. A
message is a `Message`: the plain text every chat can show, and the adapter's own rich form
of it, which the adapter's renderer built (`bot.core.wording.Render`) and the core passes
through without reading. Ids (users, channels, threads) are strings the chat chose.

Slack's adapter implements it in `bot.slack.chat`; another chat implements `Chat`, `Words`
and `Render`, and turns its requests into calls of `bot.core.dispatch.Dispatcher`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from incidents.values import ThreadRef

__all__ = ["Asker", "Chat", "ChatError", "Message", "Place", "Pressed", "Private", "ThreadRef"]


@dataclass(frozen=True)
class Message:
    """What to send: `text` always (a plain-text chat shows it, a notification quotes it),
    `parts` the adapter's rich form of the same message (Slack: Block Kit blocks), if any."""

    text: str
    parts: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class Place:
    """Where a message goes: a channel, the thread in it (None: a message of its own, which
    may root a thread), and whether a reply in a thread is shown in the channel too."""

    channel: str
    thread: str | None = None
    broadcast: bool = False

    @classmethod
    def of(cls, thread: ThreadRef) -> Place:
        """Into `thread`."""
        return cls(thread.channel, thread.thread)


class Private(Protocol):
    """How a chat answers one asker alone (Slack: the request's response URL)."""

    def __call__(self, message: Message, *, replace: bool = False) -> None: ...


@dataclass(frozen=True)
class Asker:
    """Who asked, where, and how they can be answered.

    `private` answers them alone (None: they can be answered only where they asked);
    `thread` is set when they asked inside a thread (a mention): answers go there. `place`
    is where their channel wants answers (the access policy's `defaults.answers`):
    "ephemeral" (the asker alone), "channel" (a message of its own), "thread"; None: as
    always (privately for a command, in the thread for a mention)."""

    user: str
    channel: str | None
    private: Private | None = None
    thread: str | None = None
    # Asked before each reply (the adapter asks it for every write on this asker's behalf):
    # False when another replica answers this command (`bot.core.relay`).
    may_reply: Callable[[], bool] = lambda: True
    # The "not recorded" note every reply to this command carries, if its record failed
    # (asked after `may_reply`; the adapter adds it to each reply).
    note: Callable[[], str | None] = lambda: None
    place: str | None = None

    @property
    def answered_privately(self) -> bool:
        """Replies to this asker go to them alone (they did not ask inside a thread, or their
        channel wants every answer seen by the asker alone)."""
        return self.place == "ephemeral" or (self.private is not None and self.thread is None)

    @property
    def answers_in_channel(self) -> bool:
        """Their channel wants answers posted where everyone in it reads them."""
        return self.place in ("channel", "thread") and self.channel is not None

    @property
    def reply_thread(self) -> str | None:
        """The thread a public answer goes in: none when the channel wants answers as
        messages of their own."""
        return None if self.place == "channel" else self.thread


@dataclass(frozen=True)
class Pressed:
    """A button press, as the chat reports it; nothing in it is believed but who pressed.

    `channel` is the channel the chat says it came from; `same_channel` whether the message
    pressed on is in that channel too; `on_message` whether it was a message in a channel
    (not a private answer, which `private` then replaces)."""

    action: str
    value: str
    user: str
    channel: str | None
    same_channel: bool
    on_message: bool
    private: Private | None


class ChatError(Exception):
    """A chat refused a message. `reason` is its word for why (Slack's error code);
    `absent` when the bot is not in that channel or the channel does not exist."""

    def __init__(self, reason: str, *, absent: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.absent = reason, absent


class Chat(Protocol):
    """A chat platform, as the core uses it. Writes raise `ChatError` when refused."""

    @property
    def name(self) -> str:
        """The chat's name in thread references and in the incident store (`slack`)."""
        ...

    def say(self, asker: Asker, text: str) -> None:
        """A short answer (already worded): privately when the asker can be answered so and
        did not ask in a thread, else in their channel (thread)."""
        ...

    def ephemeral(self, asker: Asker, message: Message, *, replace: bool = False) -> None:
        """`message` for the asker alone: through their private answer (`replace`: in place
        of the message they pressed on), else as a message only they see in their channel."""
        ...

    def post(self, message: Message, *, to: Place, asker: Asker | None = None) -> ThreadRef | None:
        """`message` where `to` says, on behalf of `asker`'s command when given: None, and
        nothing posted, when another replica answers it. Where it went: the channel
        (resolved from a name) and the posted message's id, the root of a thread when it
        opened one."""
        ...

    def update(self, message: Message, *, thread: ThreadRef) -> None:
        """Replace the message that roots `thread` (the bot's own)."""
        ...

    def permalink(self, thread: ThreadRef) -> str | None:
        """A link people can open to `thread`."""
        ...

    def is_direct(self, channel: str) -> bool:
        """Whether `channel` is a direct conversation with the bot (nobody else reads it)."""
        ...
