"""`/gpu pending` and its "Incident thread" button: the fleet view, for one asker.

Every stuck GPU workload the asker may see, grouped by root cause. A tenant sees only groups
with members in their namespaces; a mention in a channel answers with what the channel's
audience may see, and the rest of the asker's view reaches them alone.
"""

from __future__ import annotations

from dataclasses import replace

from slack_sdk.errors import SlackApiError

from bot.core.commands import Pending
from bot.core.handlers import Asker, Handlers, failure
from bot.slack import messages as msg
from bot.slack.blocks import with_note
from bot.slack.fleet import alert_text, parse_group_value, pending_blocks, stored_group_blocks
from incidents.values import ThreadRef
from triage import InvalidNameError, SourceError
from triage.fleet import Sweep


class FleetView:
    def __init__(self, *, handlers: Handlers) -> None:
        self.h = handlers

    def pending(self, asker: Asker, cmd: Pending) -> None:
        """Every stuck GPU workload the asker may see, grouped by root cause, privately."""
        cluster = self.h.cluster_for(asker, cmd.cluster)
        if cluster is None:
            return
        viewer = self.h.viewer(asker, cluster)
        namespaces: list[str] | None
        if cmd.namespace is not None:
            # A namespace the asker may not see reads as an empty one: nothing leaks.
            namespaces = [cmd.namespace] if viewer.may_see(cmd.namespace) else []
            scope = f"namespace {cmd.namespace}"
        elif viewer.operator:
            namespaces, scope = None, "all namespaces"
        else:
            namespaces, scope = sorted(viewer.namespaces), "your namespaces"
        try:
            result = self.h.service.sweep(cluster=cluster, namespaces=namespaces)
        except (InvalidNameError, SourceError, LookupError) as e:
            self.h.say(asker, failure(e, detail=viewer.operator))
            return
        mine = result.only(viewer.may_see)
        in_channel = asker.channel is not None and not asker.channel.startswith("D")
        if (asker.respond is not None and asker.thread_ts is None) or not in_channel:
            self._private_groups(asker, mine, scope=scope)
            return
        # A mention in a channel answers there, for everyone in it: only what the channel's
        # audience may see too; whatever else the asker may see reaches them alone.
        assert asker.channel is not None
        audience = self.h.policy.audience(asker.channel, cluster=cluster)
        public = result.only(lambda ns: viewer.may_see(ns) and audience.may_see(ns))
        self.h.post(
            asker,
            channel=asker.channel,
            thread_ts=asker.thread_ts,
            text=_pending_text(public),
            blocks=pending_blocks(
                public, scope=scope if audience.operator else "the namespaces this channel may see"
            ),
        )
        if _members(public) != _members(mine):
            self._private_groups(asker, mine, scope=scope)

    def _private_groups(self, asker: Asker, result: Sweep, *, scope: str) -> None:
        text, blocks = _pending_text(result), pending_blocks(result, scope=scope)
        if asker.respond is not None:
            asker.respond(
                text=text, blocks=blocks, response_type="ephemeral", replace_original=False
            )
        elif asker.channel and asker.may_reply():
            message = {"text": text, "blocks": blocks, "thread_ts": asker.thread_ts}
            self.h.client.chat_postEphemeral(
                channel=asker.channel, user=asker.user, **with_note(message, asker.note())
            )

    def open_group(self, asker: Asker, value: str) -> None:
        """The "Incident thread" button: a link to the group's thread, opening one for an
        operator when the group has none yet."""
        try:
            cluster, key = parse_group_value(value)
        except ValueError:
            self.h.say(asker, msg.group_not_found())
            return
        # Rights from the presser alone: the channel a button press names is the payload's
        # claim, and a group has no recorded channel to check it against.
        viewer = self.h.viewer(replace(asker, channel=None), cluster)
        row = self.h.store.groups.find(cluster, key)
        if row is None or not any(viewer.may_see(str(m.get("namespace"))) for m in row.members):
            self.h.say(asker, msg.group_not_found())
            return
        if row.channel is None or row.thread is None:
            if not viewer.operator or not asker.channel or asker.channel.startswith("D"):
                self.h.say(asker, msg.group_no_thread())
                return
            claimed = self.h.store.groups.claim_post(row.id, channel=asker.channel)
            if claimed is None:
                self.h.say(asker, msg.group_no_thread())
                return
            try:
                posted = self.h.client.chat_postMessage(
                    channel=asker.channel,
                    text=alert_text(row.layer.value, row.cluster, row.cause),
                    blocks=stored_group_blocks(row),
                    unfurl_links=False,
                )
            except SlackApiError:
                self.h.store.groups.release_post(row.id)
                raise
            channel, ts = str(posted.get("channel") or asker.channel), str(posted.get("ts"))
            self.h.store.groups.attach_thread(row.id, thread=ThreadRef("slack", channel, ts))
        else:
            channel, ts = row.channel, row.thread
        link = self.h.client.chat_getPermalink(channel=channel, message_ts=ts).get("permalink")
        self.h.say(asker, msg.group_thread(str(link or "")))


def _pending_text(result: Sweep) -> str:
    return f"{result.workloads} stuck GPU workload(s), {result.gpus} GPU(s) waiting"


def _members(result: Sweep) -> set[tuple[str, str]]:
    return {(m.namespace, m.name) for g in result.groups for m in g.members} | {
        (m.namespace, m.name) for m in result.waiting
    }
