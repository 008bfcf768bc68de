"""The chat port is enough for a second chat: the core served through the dispatcher alone by a
chat that is not Slack (plain text held in memory; it borrows Slack's words and renderer,
which are plain values, and reads only their text).

It asks why a pod is pending in a channel (one post, the incident's thread recorded as that
chat's), asks again (the follow-up goes into that thread), presses Resolve (the thread's
message is updated, the incident resolved) and asks for help (from the registry)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from bot.core.chat import Asker, Message, Place, Pressed, ThreadRef
from bot.core.context import Context
from bot.core.dispatch import Dispatcher
from bot.core.policy import AccessPolicy, UsergroupCache
from bot.core.refs import Action, ButtonRef
from bot.core.registry import usage
from bot.slack import messages as words
from bot.slack import render
from gpu_triage.service import TriageService
from incidents.store import IncidentStore
from tests.bot.bot_cluster import objects
from triage import MemorySource


@dataclass
class Sent:
    how: str  # say | ephemeral | post | update
    to: str | None
    text: str
    thread: str | None = None


@dataclass
class MemoryChat:
    """A chat whose channels are lists of plain text."""

    sent: list[Sent] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: int = 0

    @property
    def name(self) -> str:
        return "memo"

    def _add(self, sent: Sent) -> str:
        with self.lock:
            self.sent.append(sent)
            self._ids += 1
            return f"m{self._ids}"

    def say(self, asker: Asker, text: str) -> None:
        self._add(Sent("say", asker.channel, text, asker.thread))

    def ephemeral(self, asker: Asker, message: Message, *, replace: bool = False) -> None:
        self._add(Sent("ephemeral", asker.user, message.text))

    def post(self, message: Message, *, to: Place, asker: Asker | None = None) -> ThreadRef | None:
        if asker is not None and not asker.may_reply():
            return None
        return ThreadRef(
            "memo", to.channel, self._add(Sent("post", to.channel, message.text, to.thread))
        )

    def update(self, message: Message, *, thread: ThreadRef) -> None:
        self._add(Sent("update", thread.channel, message.text, thread.thread))

    def permalink(self, thread: ThreadRef) -> str | None:
        return f"memo://{thread.channel}/{thread.thread}"

    def is_direct(self, channel: str) -> bool:
        return channel.startswith("@")

    def wait(self, n: int) -> list[Sent]:
        for _ in range(1000):
            with self.lock:
                if len(self.sent) >= n:
                    return list(self.sent)
            threading.Event().wait(0.01)
        raise AssertionError(f"only {self.sent}")


@pytest.fixture
def core(tmp_path: Path) -> Iterator[tuple[Dispatcher, MemoryChat, IncidentStore]]:
    store = IncidentStore.from_url(f"sqlite:///{tmp_path / 'incidents.sqlite'}")
    store.upgrade()
    source = MemorySource(objects(), cluster_name="demo")
    chat = MemoryChat()
    ctx = Context(
        chat=chat,
        words=words,
        render=render,
        service=TriageService(source_for=lambda _cluster: source, store=store),
        store=store,
        policy=AccessPolicy.model_validate({"operators": {"users": ["ops"]}}),
        groups=UsergroupCache(groups=[], fetch=lambda _group: []),
    )
    settings = SimpleNamespace(workers=2, max_pending=4, http_threads=2, replica_id=None,
                               job_lease=30.0, job_poll=1.0, delivery_deadline=1.0)  # fmt: skip
    dispatcher = Dispatcher(ctx, settings=settings, replay=lambda _job: None)
    try:
        yield dispatcher, chat, store
    finally:
        dispatcher.close()
        store.close()


def _why_pending(dispatcher: Dispatcher, asker: Asker) -> Asker:
    """`why-pending train-x -n team-a` as `asker`, acknowledged as the core says."""
    reception = dispatcher.receive("why-pending train-x -n team-a")
    assert reception.reply is not None and "team-a/train-x" in reception.reply
    assert reception.command is not None
    dispatcher.command(asker, reception.command, None)
    return asker


def test_a_second_chat_needs_only_the_port(
    core: tuple[Dispatcher, MemoryChat, IncidentStore],
) -> None:
    dispatcher, chat, store = core
    asked = _why_pending(dispatcher, dispatcher.asker(user="ops", channel="#ops"))
    [first] = chat.wait(1)
    assert (first.how, first.to, first.thread) == ("post", "#ops", None)
    assert "team-a/train-x: blocked at scheduling" in first.text
    # the thread is attached just after the post: wait for it, as a second question would
    deadline = time.monotonic() + 10
    while True:
        incident = store.open_incident_for(cluster="demo", namespace="team-a", name="train-x")
        if (incident and incident.thread_ref) or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert incident is not None and incident.thread_ref == ThreadRef("memo", "#ops", "m1")

    _why_pending(dispatcher, asked)  # asked again: in its thread
    assert chat.wait(2)[1].thread == "m1"

    ref = ButtonRef("demo", "team-a", "train-x", str(incident.id))
    pressed = Pressed(action=Action.RESOLVE, value=ref.to_value(), user="ops", channel="#ops",
                      same_channel=True, on_message=True, private=None)  # fmt: skip
    dispatcher.press(pressed)
    update, note = chat.wait(4)[2:4]
    assert (update.how, update.thread) == ("update", "m1") and "resolved by" in update.text
    assert (note.how, note.thread) == ("post", "m1")
    assert store.open_incident_for(cluster="demo", namespace="team-a", name="train-x") is None

    help_ = dispatcher.receive("help")
    assert help_.command is None and help_.reply is not None
    assert all(typed in help_.reply for typed, _ in usage())


def test_the_core_refuses_nobody_it_should_not(
    core: tuple[Dispatcher, MemoryChat, IncidentStore],
) -> None:
    dispatcher, chat, store = core
    _why_pending(dispatcher, dispatcher.asker(user="nobody", channel="#random"))
    [refused] = chat.wait(1)
    assert refused.how == "say" and "No pod or workload named `train-x`" in refused.text
    assert store.list() == []
