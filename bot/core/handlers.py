"""What each `/gpu` command, mention and button does once acknowledged (runs on the worker pool).

Listeners in `bot.app` only parse and `ack()`; everything here may be slow (cluster, database,
Slack Web API) and never runs on Slack's request path. Replies go to one of two places: the
requester privately (`response_url`), or a channel thread (`chat.postMessage`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.core.commands import (
    VerifyNode,
    WhyPending,
)
from bot.core.policy import AccessPolicy, UsergroupCache, Viewer
from bot.core.ports import IncidentStoreLike, OutcomeLike, TriageServiceLike
from bot.core.work import Busy, Done, Flights
from bot.slack import messages as msg
from bot.slack.blocks import (
    ButtonRef,
    headline_text,
    note_block,
    report_blocks,
    with_note,
    with_summary,
)
from incidents.errors import IncidentStoreError
from incidents.values import ThreadRef
from triage import (
    Audience,
    ForbiddenError,
    InvalidNameError,
    NotFoundError,
    SourceError,
    SourceStatus,
    TriageReport,
    UnavailableError,
)

if TYPE_CHECKING:
    from assist.ask import Assistant

log = logging.getLogger(__name__)

Respond = Callable[..., Any]


@dataclass(frozen=True)
class Asker:
    """Who asked, where, and how to answer them privately (None for mentions)."""

    user: str
    channel: str | None
    respond: Respond | None = None
    thread_ts: str | None = None  # set for mentions: answer in that thread
    # Asked before each post to a channel (`respond` is gated by the same check): False when
    # another replica answers this command. See `bot.relay`.
    may_reply: Callable[[], bool] = lambda: True
    # The "not recorded" note every reply to this command carries, if its record failed
    # (asked after `may_reply`; `respond` adds it itself).
    note: Callable[[], str | None] = lambda: None


class Handlers:
    """The bot's behaviour, independent of how bolt delivers requests."""

    def __init__(
        self,
        *,
        client: WebClient,
        service: TriageServiceLike,
        store: IncidentStoreLike,
        policy: AccessPolicy,
        groups: UsergroupCache,
        assistant: Assistant | None = None,
    ) -> None:
        self.client, self.service, self.store, self.policy = client, service, store, policy
        self.groups = groups
        self.assistant = assistant  # `/gpu ask` and summaries; None: FAQ and why-pending only
        # Clusters other replicas serve (and this one does not), for `/gpu clusters`.
        self.remote_clusters: Callable[[], Sequence[SourceStatus]] = list

    # -- replies ---------------------------------------------------------------------------
    def say(self, asker: Asker, text: str) -> None:
        """A short private answer (or a thread reply for mentions)."""
        if asker.respond is not None and asker.thread_ts is None:
            asker.respond(text=text, response_type="ephemeral", replace_original=False)
        elif asker.channel:
            self.post(
                asker,
                channel=asker.channel,
                thread_ts=asker.thread_ts,
                text=text,
                unfurl_links=False,
            )

    def post(self, asker: Asker, **message: Any) -> Any:
        """`chat.postMessage` on behalf of `asker`'s command; None when another replica
        answers it."""
        if not asker.may_reply():
            return None
        return self.client.chat_postMessage(**with_note(message, asker.note()))

    def store_failed(self, asker: Asker, e: IncidentStoreError) -> None:
        """Tell `asker` the incident store failed them: the kind of fault, and for an
        operator the detail (the database's name and host)."""
        fault = getattr(e, "fault", None)
        detail = str(e) if self.viewer(asker).operator else None
        self.say(asker, msg.store_unavailable(fault, detail=detail))

    def viewer(self, asker: Asker, cluster: str | None = None) -> Viewer:
        """What `asker` may see in `cluster` (a resolved name; None: the grants that hold in
        every cluster)."""
        return self.policy.viewer(
            user=asker.user,
            channel=asker.channel,
            groups_of=self.groups.groups_of,
            cluster=cluster,
        )

    def cluster_for(self, asker: Asker, cluster: str | None) -> str | None:
        """The cluster a command is about, by name: the one asked for, else the channel's
        default (access policy), else the bot's default. None once an unknown name was
        answered."""
        try:
            return self.service.cluster_name(cluster or self.policy.cluster_for(asker.channel))
        except (LookupError, SourceError) as e:  # unknown, or a context that does not load
            self.say(asker, failure(e, detail=self.viewer(asker).operator))
        return None

    def channel_audience_is_operator(self, channel: str | None) -> bool:
        return channel is not None and channel in self.policy.operators.channels

    # -- why-pending -------------------------------------------------------------------------
    def target(self, asker: Asker, cmd: WhyPending) -> tuple[WhyPending, str] | None:
        """`cmd` with its cluster named, and the namespace to triage in for `asker`; None
        once a refusal was answered."""
        cluster = self.cluster_for(asker, cmd.cluster)
        if cluster is None:
            return None
        viewer = self.viewer(asker, cluster)
        namespace = cmd.namespace or viewer.default_namespace
        if namespace is None:
            self.say(asker, msg.no_namespace())
            return None
        if not viewer.may_see(namespace):
            # Exactly the not-found answer: a tenant learns nothing about other namespaces.
            self.say(asker, msg.not_found(namespace=namespace, name=cmd.name))
            return None
        return replace(cmd, cluster=cluster), namespace

    def triage(self, asker: Asker, cmd: WhyPending) -> OutcomeLike | None:
        """Run the triage for `asker`, answering errors; None when an error was answered."""
        found = self.target(asker, cmd)
        if found is None:
            return None
        cmd, namespace = found
        try:
            return self._run(asker, cmd, namespace)
        except Exception as e:
            self._failed(asker, cmd, namespace, e)
        return None

    def _run(self, asker: Asker, cmd: WhyPending, namespace: str) -> OutcomeLike:
        return self.service.run(
            cluster=cmd.cluster,
            namespace=namespace,
            name=cmd.name,
            requested_by=asker.user,
            channel=asker.channel,
        )

    def _failed(self, asker: Asker, cmd: WhyPending, namespace: str, e: Exception) -> None:
        """Tell `asker` why the triage gave no answer (other errors are for the caller)."""
        if isinstance(e, NotFoundError):
            self.say(asker, msg.not_found(namespace=namespace, name=cmd.name))
        elif isinstance(e, (InvalidNameError, SourceError, LookupError)):
            self.say(asker, failure(e, detail=self.viewer(asker, cmd.cluster).operator))
        else:
            raise e

    def why_pending_shared(
        self,
        asker: Asker,
        cmd: WhyPending,
        flights: Flights,
        *,
        then: Callable[[], None] = lambda: None,
    ) -> None:
        """Answer `asker` with the triage of `cmd`'s workload, sharing one run with everyone
        asking about the same workload meanwhile (one triage, one incident); say busy when
        the pool has no room for a new one. Each cluster is a lane of its own: a cluster
        that answers slowly holds at most its lane's share of the workers. `then` runs once
        `asker` was answered."""
        found = self.target(asker, cmd)
        if found is None:
            then()
            return
        cmd, namespace = found

        def deliver(done: Done[OutcomeLike]) -> None:
            try:
                reply(done)
            finally:
                then()

        def reply(done: Done[OutcomeLike]) -> None:
            try:
                if isinstance(done.error, Busy):
                    self.say(asker, msg.busy())
                elif done.error is not None:
                    self._failed(asker, cmd, namespace, done.error)
                elif done.result is not None:
                    self.answer(asker, cmd, done.result)
            except IncidentStoreError as e:
                self.store_failed(asker, e)
            except Exception:
                log.exception("why-pending answer failed")
                self.say(asker, msg.internal_error())

        flights.join(
            ("why-pending", cmd.cluster, namespace, cmd.name),
            lambda: self._run(asker, cmd, namespace),
            deliver,
            lane=cmd.cluster,
        )

    def why_pending(self, asker: Asker, cmd: WhyPending) -> None:
        outcome = self.triage(asker, cmd)
        if outcome is not None:
            self.answer(asker, replace(cmd, cluster=outcome.report.cluster), outcome)

    def answer(self, asker: Asker, cmd: WhyPending, outcome: OutcomeLike) -> None:
        """Post a triage's answer where `asker` asked: privately, or in the channel's thread
        of the workload's open incident."""
        report = outcome.report
        incident = outcome.incident
        ref = ButtonRef(
            cluster=cmd.cluster,
            namespace=report.pod.namespace,
            name=cmd.name,
            incident_id=None if incident is None else str(incident.id),
        )
        in_channel = asker.channel is not None and not asker.channel.startswith("D")
        private = asker.respond is not None and asker.thread_ts is None
        if not in_channel or (private and incident is None and not report.blocked):
            self._reply_private(asker, outcome, ref=ref)
            return
        assert asker.channel is not None
        thread_ts = asker.thread_ts
        if incident is not None and incident.thread and incident.channel == asker.channel:
            thread_ts = incident.thread  # the open incident's thread: keep follow-ups there
        operators = self.channel_audience_is_operator(asker.channel)
        blocks = report_blocks(report, audience=Audience.of(operator=operators), ref=ref)
        blocks = with_summary(blocks, self.summary(report, operator=operators))
        if outcome.store_error:
            detail = outcome.store_error if operators else None
            blocks.append(note_block(msg.not_recorded(outcome.store_fault, detail=detail)))
        try:
            posted = self.post(
                asker,
                channel=asker.channel,
                thread_ts=thread_ts,
                text=headline_text(report),
                blocks=blocks,
                unfurl_links=False,
            )
        except SlackApiError as e:
            if private and _error_code(e) in ("not_in_channel", "channel_not_found"):
                self._reply_private(asker, outcome, ref=ref)
                return
            raise
        if posted is None:
            return
        root = thread_ts or str(posted.get("ts"))
        if incident is not None and (incident.thread is None or incident.channel != asker.channel):
            try:
                self.store.attach_thread(
                    incident.id, thread=ThreadRef("slack", asker.channel, root)
                )
            except IncidentStoreError as e:
                log.warning("could not attach thread to incident %s: %s", incident.id, e)

    def _reply_private(self, asker: Asker, outcome: OutcomeLike, *, ref: ButtonRef) -> None:
        viewer = self.viewer(asker, outcome.report.cluster)
        blocks = report_blocks(
            outcome.report, audience=Audience.of(operator=viewer.operator), ref=ref
        )
        blocks = with_summary(blocks, self.summary(outcome.report, operator=viewer.operator))
        if outcome.store_error:
            detail = outcome.store_error if viewer.operator else None
            blocks.append(note_block(msg.not_recorded(outcome.store_fault, detail=detail)))
        if asker.respond is not None:
            asker.respond(
                text=headline_text(outcome.report),
                blocks=blocks,
                response_type="ephemeral",
                replace_original=False,
            )
        elif asker.channel:
            self.post(
                asker,
                channel=asker.channel,
                thread_ts=asker.thread_ts,
                text=headline_text(outcome.report),
                blocks=blocks,
            )

    def summary(self, report: TriageReport, *, operator: bool) -> str | None:
        """The model's guarded summary line, only when a model is configured."""
        if self.assistant is None or self.assistant.model is None:
            return None
        text = self.assistant.summarize(report, operator=operator)
        return None if text is None else msg.summary(text)

    # -- other commands ----------------------------------------------------------------------
    def verify_node(self, asker: Asker, cmd: VerifyNode) -> None:
        if not self.viewer(asker).operator:
            self.say(asker, msg.operator_only())
            return
        cluster = self.cluster_for(asker, cmd.cluster)
        if cluster is None:
            return
        try:
            result = self.service.verify(cluster=cluster, node=cmd.node)
        except NotFoundError:
            self.say(asker, msg.node_not_found(cmd.node))
            return
        except (InvalidNameError, SourceError, LookupError) as e:
            self.say(asker, failure(e, detail=True))  # operators only
            return
        self.say(asker, msg.verification(result))

    def clusters(self, asker: Asker) -> None:
        """The clusters this bot serves (with its other replicas) and the state of their
        caches; operators also see sizes and what is failing (server addresses may appear
        there)."""
        operator = self.viewer(asker).operator
        found = [*self.service.clusters(), *self.remote_clusters()]
        if not found:
            self.say(asker, msg.no_clusters())
            return
        default = self.cluster_for(asker, None)
        lines = [
            msg.cluster_line(
                name=c.name,
                state=c.state,
                default=c.name == default,
                nodes=c.nodes if operator else None,
                pods=c.pods if operator else None,
                detail=c.detail if operator else "",
            )
            for c in found
        ]
        self.say(asker, "\n".join(lines))


def _error_code(e: SlackApiError) -> str:
    data = getattr(e.response, "data", None)
    return str(data.get("error", "")) if isinstance(data, dict) else ""


def failure(e: Exception, *, detail: bool) -> str:
    """The reply for an error the engine or the cluster raised (not-found is handled apart).
    Only with `detail` (an operator asking) does it quote the error, which may name the API
    server, a service account or a file; anyone else reads the kind of fault."""
    if isinstance(e, InvalidNameError):
        return msg.invalid_name(str(e))
    if isinstance(e, LookupError):  # an unknown --cluster name, as the asker typed it
        return msg.unknown_cluster(str(e).strip("'\""))
    shown = str(e) if detail else None
    if isinstance(e, UnavailableError):
        return msg.cluster_unavailable(shown)
    if isinstance(e, ForbiddenError):
        return msg.cluster_forbidden(shown)
    return msg.source_error(shown)
