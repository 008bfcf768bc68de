"""The one why-pending path: `/gpu why-pending`, a mention, `/gpu ask` about a pod and the
Re-run and Escalate buttons all triage here.

A policy check first (which cluster, which namespace, may the asker see it), then the triage
is joined or started (`Flights`): everyone asking about one workload meanwhile shares one run,
so twenty people asking during an incident are one triage and one incident. Each cluster is a
lane of its own: a cluster that answers slowly holds at most its lane's share of the workers.
The answer goes where it was asked: privately, or in the channel, in the thread of the
workload's open incident, unless the channel says where its answers go (`Asker.place`), and
always rendered for whoever may read it there; a caller with an answer of its own (a button) passes it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from bot.core.chat import Asker, ChatError, Message, Place
from bot.core.commands import WhyPending
from bot.core.context import Context
from bot.core.ports import OutcomeLike
from bot.core.refs import ButtonRef
from bot.core.wording import Notes
from bot.core.work import Busy, Done, Flights
from incidents.errors import IncidentStoreError
from incidents.values import ThreadRef
from triage import Audience, InvalidNameError, NotFoundError, SourceError, TriageReport

log = logging.getLogger(__name__)

Answer = Callable[[Asker, WhyPending, OutcomeLike], None]


@dataclass(frozen=True)
class Target:
    """A why-pending the asker may ask: its cluster named, and the namespace to triage in."""

    cmd: WhyPending
    cluster: str
    namespace: str


class WhyPendingFlow:
    def __init__(self, *, ctx: Context, flights: Flights) -> None:
        self.ctx, self.flights = ctx, flights

    def ask(
        self,
        asker: Asker,
        cmd: WhyPending,
        *,
        then: Callable[[], None] = lambda: None,
        answer: Answer | None = None,
    ) -> None:
        """Answer `asker` with the triage of `cmd`'s workload (`answer`, else `self.answer`),
        sharing one run with everyone asking about it meanwhile; busy when the pool has no
        room for a new one. Nothing here waits for the cluster. `then` runs once `asker`
        was answered."""
        target = self.target(asker, cmd)
        if target is None:
            then()
            return
        answered = answer or self.answer

        def deliver(done: Done[OutcomeLike]) -> None:
            try:
                self._reply(asker, target, done, answered)
            finally:
                then()

        self.flights.join(
            ("why-pending", target.cluster, target.namespace, cmd.name),
            lambda: self.ctx.service.run(
                cluster=target.cluster,
                namespace=target.namespace,
                name=cmd.name,
                requested_by=asker.user,
                channel=asker.channel,
                via=self.ctx.chat.name,
            ),
            deliver,
            lane=target.cluster,
        )

    def target(self, asker: Asker, cmd: WhyPending) -> Target | None:
        """`cmd` with its cluster named and the namespace to triage in for `asker`; None
        once a refusal was answered."""
        cluster = self.ctx.cluster_for(asker, cmd.cluster)
        if cluster is None:
            return None
        viewer = self.ctx.viewer(asker, cluster)
        namespace = cmd.namespace or viewer.default_namespace
        if namespace is None:
            self.ctx.say(asker, self.ctx.words.no_namespace())
            return None
        if not viewer.may_see(namespace):
            # Exactly the not-found answer: a tenant learns nothing about other namespaces.
            self.ctx.say(asker, self.ctx.words.not_found(namespace=namespace, name=cmd.name))
            return None
        return Target(replace(cmd, cluster=cluster), cluster, namespace)

    def _reply(self, asker: Asker, target: Target, done: Done[OutcomeLike], answer: Answer) -> None:
        words = self.ctx.words
        try:
            if isinstance(done.error, Busy):
                self.ctx.say(asker, words.busy())
            elif isinstance(done.error, NotFoundError):
                self.ctx.say(
                    asker, words.not_found(namespace=target.namespace, name=target.cmd.name)
                )
            elif isinstance(done.error, InvalidNameError | SourceError | LookupError):
                operator = self.ctx.viewer(asker, target.cluster).operator
                self.ctx.say(asker, self.ctx.failure(done.error, detail=operator))
            elif done.error is not None:
                raise done.error
            elif done.result is not None:
                answer(asker, target.cmd, done.result)
        except IncidentStoreError as e:
            self.ctx.store_failed(asker, e)
        except Exception:
            log.exception("why-pending answer failed")
            self.ctx.say(asker, words.internal_error())

    # -- the answer, where it was asked ------------------------------------------------------
    def answer(self, asker: Asker, cmd: WhyPending, outcome: OutcomeLike) -> None:
        """Post a triage's answer where `asker` asked: privately, or in the channel's thread
        of the workload's open incident."""
        report, incident = outcome.report, outcome.incident
        ref = ButtonRef(
            cluster=cmd.cluster,
            namespace=report.pod.namespace,
            name=cmd.name,
            incident_id=None if incident is None else str(incident.id),
        )
        if (
            not self.ctx.in_channel(asker)
            or asker.place == "ephemeral"  # answered_privately, and never posted for a mention
            or (
                asker.answered_privately
                and incident is None
                and not report.blocked
                and not asker.answers_in_channel
            )
        ):
            self._privately(asker, outcome, ref=ref)
            return
        assert asker.channel is not None
        thread = asker.reply_thread
        known = None if incident is None else incident.thread_ref
        if known is not None and self._here(known, asker.channel) and asker.place != "channel":
            thread = known.thread  # the open incident's thread: keep follow-ups there
        audience = self.ctx.channel_audience(asker.channel)
        try:
            posted = self.ctx.chat.post(
                self._message(outcome, audience=audience, ref=ref),
                to=Place(asker.channel, thread),
                asker=asker,
            )
        except ChatError as e:
            if asker.answered_privately and e.absent:
                self._privately(asker, outcome, ref=ref)
                return
            raise
        if posted is None or incident is None:
            return
        if known is None or not self._here(known, asker.channel):
            root = ThreadRef(
                chat=posted.chat, channel=asker.channel, thread=thread or posted.thread
            )
            try:
                self.ctx.store.attach_thread(incident.id, thread=root)
            except IncidentStoreError as e:
                log.warning("could not attach thread to incident %s: %s", incident.id, e)

    def _here(self, thread: ThreadRef, channel: str) -> bool:
        return thread.chat == self.ctx.chat.name and thread.channel == channel

    def _privately(self, asker: Asker, outcome: OutcomeLike, *, ref: ButtonRef) -> None:
        viewer = self.ctx.viewer(asker, outcome.report.cluster)
        message = self._message(outcome, audience=Audience.of(operator=viewer.operator), ref=ref)
        if asker.private is not None or asker.place == "ephemeral":
            self.ctx.chat.ephemeral(asker, message)
        elif asker.channel:
            self.ctx.chat.post(message, to=Place(asker.channel, asker.thread), asker=asker)

    def _message(self, outcome: OutcomeLike, *, audience: Audience, ref: ButtonRef) -> Message:
        """The report for `audience`, with the model's summary and the note that its record
        failed, if either."""
        operator = audience is Audience.OPERATOR
        unrecorded = None
        if outcome.store_error:
            detail = outcome.store_error if operator else None
            unrecorded = self.ctx.words.not_recorded(outcome.store_fault, detail=detail)
        summary = self.summary(outcome.report, operator=operator)
        notes = Notes(summary=summary, unrecorded=unrecorded)
        return self.ctx.render.report(outcome.report, audience=audience, ref=ref, notes=notes)

    def summary(self, report: TriageReport, *, operator: bool) -> str | None:
        """The model's guarded summary line, only when a model is configured."""
        assistant = self.ctx.assistant
        if assistant is None or assistant.model is None:
            return None
        text = assistant.summarize(report, operator=operator)
        return None if text is None else self.ctx.words.summary(text)
