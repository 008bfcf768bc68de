"""The fleet view's alerts in Slack: the `bot.core.alerts.AlertSink` that posts a group's thread,
updates it in place (`chat.update`), says its growth once (broadcast from the thread) and marks
it resolved, in Block Kit (`bot.slack.fleet`)."""

from __future__ import annotations

from datetime import datetime

from slack_sdk import WebClient

from bot.core.chat import Message, Place, ThreadRef
from bot.slack.blocks import section
from bot.slack.chat import SlackChat
from bot.slack.fleet import alert_text, group_blocks
from bot.slack.mrkdwn import escape
from incidents.values import GroupIncident
from triage.fleet import Group


class SlackAlerts:
    def __init__(self, client: WebClient) -> None:
        self.chat = SlackChat(client)

    def open(self, group: Group, *, channel: str, now: datetime) -> ThreadRef:
        posted = self.chat.post(_alert(group, now), to=Place(channel))
        assert posted is not None  # posted on nobody's behalf: nothing gates it
        return posted

    def update(self, thread: ThreadRef, group: Group, *, now: datetime) -> None:
        self.chat.update(_alert(group, now), thread=thread)

    def grew(self, thread: ThreadRef, group: Group, *, before: int) -> None:
        text = (
            f"grew from {before} to {group.workloads} stuck workload(s), "
            f"{group.gpus} GPU(s) waiting"
        )
        self.chat.post(Message(text), to=Place(thread.channel, thread.thread, broadcast=True))

    def resolved(self, thread: ThreadRef, row: GroupIncident) -> None:
        text = "resolved: " + alert_text(row.layer.value, row.cluster, row.cause)
        root = section(f":white_check_mark: {escape(text)}\nno workload is stuck on it now")
        self.chat.update(Message(text, [root]), thread=thread)
        done = Message("resolved: no workload is stuck on it now")
        self.chat.post(done, to=Place.of(thread))


def _alert(group: Group, now: datetime) -> Message:
    return Message(
        alert_text(group.layer.value, group.cluster, group.cause), group_blocks(group, now=now)
    )
