"""`/gpu pending` and its "Incident thread" button: the fleet view, for one asker.

Every stuck workload the asker may see, grouped by root cause. A tenant sees only groups
with members in their namespaces; a mention in a channel answers with what the channel's
audience may see, and the rest of the asker's view reaches them alone.
"""

from __future__ import annotations

from dataclasses import replace

from bot.core.chat import Asker, ChatError, Place
from bot.core.commands import Pending
from bot.core.context import Context
from bot.core.refs import parse_group_value
from triage import InvalidNameError, SourceError
from triage.fleet import Sweep


class FleetView:
    def __init__(self, *, ctx: Context) -> None:
        self.ctx = ctx

    def pending(self, asker: Asker, cmd: Pending) -> None:
        """Every stuck workload the asker may see, grouped by root cause, privately (or where
        the asker's channel wants answers)."""
        cluster = self.ctx.cluster_for(asker, cmd.cluster)
        if cluster is None:
            return
        viewer = self.ctx.viewer(asker, cluster)
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
            result = self.ctx.service.sweep(cluster=cluster, namespaces=namespaces)
        except (InvalidNameError, SourceError, LookupError) as e:
            self.ctx.say(asker, self.ctx.failure(e, detail=viewer.operator))
            return
        mine = result.only(viewer.may_see)
        if (asker.answered_privately and not asker.answers_in_channel) or not self.ctx.in_channel(
            asker
        ):
            self.ctx.chat.ephemeral(asker, self.ctx.render.pending(mine, scope=scope))
            return
        # A mention in a channel (or any question in a channel that wants its answers posted)
        # answers there, for everyone in it: only what the channel's
        # audience may see too; whatever else the asker may see reaches them alone.
        assert asker.channel is not None
        audience = self.ctx.policy.audience(asker.channel, cluster=cluster)
        public = result.only(lambda ns: viewer.may_see(ns) and audience.may_see(ns))
        shown = scope if audience.operator else "the namespaces this channel may see"
        self.ctx.chat.post(
            self.ctx.render.pending(public, scope=shown),
            to=Place(asker.channel, asker.reply_thread),
            asker=asker,
        )
        if _members(public) != _members(mine):
            self.ctx.chat.ephemeral(asker, self.ctx.render.pending(mine, scope=scope))

    def open_group(self, asker: Asker, value: str) -> None:
        """The "Incident thread" button: a link to the group's thread, opening one for an
        operator when the group has none yet."""
        words, store = self.ctx.words, self.ctx.store
        try:
            cluster, key = parse_group_value(value)
        except ValueError:
            self.ctx.say(asker, words.group_not_found())
            return
        # Rights from the presser alone: the channel a button press names is the payload's
        # claim, and a group has no recorded channel to check it against.
        viewer = self.ctx.viewer(replace(asker, channel=None), cluster)
        row = store.groups.find(cluster, key)
        if row is None or not any(viewer.may_see(str(m.get("namespace"))) for m in row.members):
            self.ctx.say(asker, words.group_not_found())
            return
        thread = row.thread_ref
        if thread is None:
            if not viewer.operator or not asker.channel or not self.ctx.in_channel(asker):
                self.ctx.say(asker, words.group_no_thread())
                return
            if store.groups.claim_post(row.id, channel=asker.channel) is None:
                self.ctx.say(asker, words.group_no_thread())
                return
            try:
                thread = self.ctx.chat.post(
                    self.ctx.render.group_root(row), to=Place(asker.channel)
                )
            except ChatError:
                store.groups.release_post(row.id)
                raise
            assert thread is not None  # posted on nobody's behalf: nothing gates it
            store.groups.attach_thread(row.id, thread=thread)
        self.ctx.say(asker, words.group_thread(self.ctx.chat.permalink(thread) or ""))


def _members(result: Sweep) -> set[tuple[str, str]]:
    return {(m.namespace, m.name) for g in result.groups for m in g.members} | {
        (m.namespace, m.name) for m in result.waiting
    }
