"""What every command's handler works with: the chat (its port, words and renderer), the
triage service, the incident store, the access policy, and the few rules they share (who
sees what where, which cluster a command is about, how a fault is told).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from bot.core.chat import Asker, Chat, Message, Place
from bot.core.policy import AccessPolicy, UsergroupCache, Viewer
from bot.core.ports import IncidentStoreLike, TriageServiceLike
from bot.core.wording import Render, Words
from incidents.errors import IncidentStoreError
from triage import (
    Audience,
    ForbiddenError,
    InvalidNameError,
    SourceError,
    SourceStatus,
    UnavailableError,
)

if TYPE_CHECKING:
    from assist.ask import Assistant


class Context:
    def __init__(
        self,
        *,
        chat: Chat,
        words: Words,
        render: Render,
        service: TriageServiceLike,
        store: IncidentStoreLike,
        policy: AccessPolicy,
        groups: UsergroupCache,
        assistant: Assistant | None = None,
    ) -> None:
        self.chat, self.words, self.render = chat, words, render
        self.service, self.store, self.policy, self.groups = service, store, policy, groups
        self.assistant = assistant  # `/gpu ask` and summaries; None: FAQ and why-pending only
        # Clusters other replicas serve (and this one does not), for `/gpu clusters`.
        self.remote_clusters: Callable[[], Sequence[SourceStatus]] = list

    def say(self, asker: Asker, text: str) -> None:
        """A short answer (already worded), where `asker` is answered."""
        self.chat.say(asker, text)

    def answer(self, asker: Asker, text: str) -> None:
        """An answer anyone may read (an FAQ answer): in the channel when it wants answers
        there, else where `asker` is answered."""
        if asker.answers_in_channel and self.in_channel(asker):
            assert asker.channel is not None
            self.chat.post(Message(text), to=Place(asker.channel, asker.reply_thread), asker=asker)
        else:
            self.chat.say(asker, text)

    def viewer(self, asker: Asker, cluster: str | None = None) -> Viewer:
        """What `asker` may see in `cluster` (a resolved name; None: the grants that hold in
        every cluster)."""
        return self.policy.viewer(
            user=asker.user,
            channel=asker.channel,
            groups_of=self.groups.groups_of,
            cluster=cluster,
        )

    def in_channel(self, asker: Asker) -> bool:
        """`asker` asked where others read along (not in a direct conversation)."""
        return asker.channel is not None and not self.chat.is_direct(asker.channel)

    def channel_audience(self, channel: str | None) -> Audience:
        """Who reads a channel: operators in the policy's operator channels, else tenants."""
        operators = channel is not None and channel in self.policy.operators.channels
        return Audience.of(operator=operators)

    def cluster_for(self, asker: Asker, cluster: str | None) -> str | None:
        """The cluster a command is about, by name: the one asked for, else the channel's
        default (access policy), else the bot's default. None once an unknown name was
        answered."""
        try:
            return self.service.cluster_name(cluster or self.policy.cluster_for(asker.channel))
        except (LookupError, SourceError) as e:  # unknown, or a context that does not load
            self.say(asker, self.failure(e, detail=self.viewer(asker).operator))
        return None

    def store_failed(self, asker: Asker, e: IncidentStoreError) -> None:
        """Tell `asker` the incident store failed them: the kind of fault, and for an
        operator the detail (the database's name and host)."""
        fault = getattr(e, "fault", None)
        detail = str(e) if self.viewer(asker).operator else None
        self.say(asker, self.words.store_unavailable(fault, detail=detail))

    def failure(self, e: Exception, *, detail: bool) -> str:
        """The reply for an error the engine or the cluster raised (not-found is answered
        apart). Only with `detail` (an operator asking) does it quote the error, which may
        name the API server, a service account or a file; anyone else reads the kind."""
        if isinstance(e, InvalidNameError):
            return self.words.invalid_name(str(e))
        if isinstance(e, LookupError):  # an unknown --cluster name, as the asker typed it
            return self.words.unknown_cluster(str(e).strip("'\""))
        shown = str(e) if detail else None
        if isinstance(e, UnavailableError):
            return self.words.cluster_unavailable(shown)
        if isinstance(e, ForbiddenError):
            return self.words.cluster_forbidden(shown)
        return self.words.source_error(shown)
