"""The report's buttons: Re-run, Resolve, Escalate to owner (run on the worker pool).

A press acts only on what its presser may touch. The button's value names an incident (or, for
a report that opened none, a workload), and nothing else in the press is believed:

- the incident is loaded from the store, and its recorded cluster and namespace (not the
  value's) are checked against the presser's grants;
- the channel counts for the presser's rights (a channel-granted tenant, an operator channel)
  only when the channel the chat reports for the press is the one recorded for the incident;
- the bot updates only the message it posted for the incident, in the thread recorded for it,
  rebuilt from the stored report; follow-ups go into that thread.

Anywhere else (a private reply, a forwarded message) the presser gets the answer privately.
Re-run and Escalate triage through the one why-pending path (`bot.core.why_pending`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from bot.core.chat import Asker, ChatError, Message, Place, Pressed
from bot.core.commands import MAX_ID, WhyPending
from bot.core.context import Context
from bot.core.ports import OutcomeLike
from bot.core.refs import SNOOZE_HOURS, Action, ButtonRef
from bot.core.why_pending import WhyPendingFlow
from incidents.errors import IncidentNotFoundError, IncidentStoreError, InvalidTransitionError
from incidents.values import Incident, IncidentStatus, ThreadRef
from triage import Audience

log = logging.getLogger(__name__)
_ID = re.compile(r"[0-9]{1,19}")


@dataclass(frozen=True)
class Press:
    """One button press, as far as it can be trusted."""

    asker: Asker  # the presser; `channel` only when it is the incident's recorded channel
    ref: ButtonRef  # the workload acted on: the incident's when there is one
    incident: Incident | None
    thread: ThreadRef | None  # the incident's thread, when pressed on a message in it
    ephemeral: bool  # pressed on a private reply (answered in its place)

    def privately(self, ctx: Context, message: Message) -> None:
        ctx.chat.ephemeral(self.asker, message, replace=self.ephemeral)


class Buttons:
    def __init__(self, *, ctx: Context, why: WhyPendingFlow) -> None:
        self.ctx, self.why = ctx, why
        self._actions: dict[str, Callable[[Press], None]] = {
            Action.RERUN: self.rerun,
            Action.RESOLVE: self.resolve,
            Action.ESCALATE: self.escalate,
            Action.ACKNOWLEDGE: self.acknowledge,
            Action.SNOOZE: self.snooze,
        }

    def press(self, pressed: Pressed) -> None:
        press = self._trusted(pressed)
        if press is None:
            return
        viewer = self.ctx.viewer(press.asker, press.ref.cluster)
        if not viewer.may_see(press.ref.namespace):
            refused = self.ctx.words.not_found(namespace=press.ref.namespace, name=press.ref.name)
            self.ctx.say(press.asker, refused)
            return
        act = self._actions.get(pressed.action)
        if act is not None:
            act(press)

    def _trusted(self, pressed: Pressed) -> Press | None:
        """The press with the incident loaded and the rights channel checked; None once a
        refusal was answered."""
        words = self.ctx.words
        presser = Asker(user=pressed.user, channel=None, private=pressed.private)
        try:
            ref = ButtonRef.from_value(pressed.value)
        except ValueError:
            self.ctx.say(presser, words.button_malformed())
            return None
        incident = None
        if ref.incident_id is not None:
            found = _ID.fullmatch(ref.incident_id)
            if found is None or not 0 < int(ref.incident_id) <= MAX_ID:
                self.ctx.say(presser, words.incident_not_found(ref.incident_id))
                return None
            try:
                incident = self.ctx.store.get(int(ref.incident_id))
            except IncidentStoreError as e:
                self.ctx.store_failed(presser, e)
                return None
            if incident is None:
                self.ctx.say(presser, words.incident_not_found(ref.incident_id))
                return None
            ref = ButtonRef(incident.cluster, incident.namespace, incident.name, str(incident.id))
        thread = None if incident is None else incident.thread_ref
        in_thread = (
            thread is not None
            and pressed.on_message
            and pressed.same_channel
            and thread.chat == self.ctx.chat.name
            and pressed.channel == thread.channel
        )
        asker = Asker(
            user=pressed.user,
            channel=pressed.channel if in_thread else None,
            private=pressed.private,
        )
        return Press(asker, ref, incident, thread if in_thread else None, not pressed.on_message)

    def _triage(self, press: Press, answer: Callable[[Press, OutcomeLike], None]) -> None:
        """The press's workload through the one why-pending path, answered by `answer`."""
        ref = press.ref
        self.why.ask(
            press.asker,
            WhyPending(name=ref.name, namespace=ref.namespace, cluster=ref.cluster),
            answer=lambda _asker, _cmd, outcome: answer(press, outcome),
        )

    # -- Re-run -------------------------------------------------------------------------------
    def rerun(self, press: Press) -> None:
        self._triage(press, self._rerun_answer)

    def _rerun_answer(self, press: Press, outcome: OutcomeLike) -> None:
        ref, inc = press.ref, outcome.incident
        new_ref = ButtonRef(
            ref.cluster, ref.namespace, ref.name, None if inc is None else str(inc.id)
        )
        if press.thread is None:
            operator = self.ctx.viewer(press.asker).operator
            audience = Audience.of(operator=operator)
            press.privately(
                self.ctx, self.ctx.render.report(outcome.report, audience=audience, ref=new_ref)
            )
            return
        message = self.ctx.render.rerun(
            outcome.report,
            audience=self.ctx.channel_audience(press.thread.channel),
            ref=new_ref,
            user=press.asker.user,
        )
        self.ctx.chat.post(message, to=Place.of(press.thread))

    # -- Resolve ------------------------------------------------------------------------------
    def resolve(self, press: Press) -> None:
        words, inc = self.ctx.words, press.incident
        if inc is None:
            self.ctx.say(press.asker, words.incident_not_found("?"))
            return
        already = words.incident_already(incident_id=str(inc.id), status="resolved")
        if not inc.is_open:
            self.ctx.say(press.asker, already)
            return
        try:
            inc = self.ctx.store.set_status(inc.id, IncidentStatus.RESOLVED, by=press.asker.user)
        except IncidentNotFoundError:
            self.ctx.say(press.asker, words.incident_not_found(str(inc.id)))
            return
        except InvalidTransitionError:
            self.ctx.say(press.asker, already)
            return
        except IncidentStoreError as e:
            self.ctx.store_failed(press.asker, e)
            return
        note = words.incident_resolved(incident_id=str(inc.id), user=press.asker.user)
        thread = inc.thread_ref if press.thread is not None else None
        if thread is None:
            press.privately(self.ctx, self._resolved(inc, note, Audience.TENANT))
            return
        resolved = self._resolved(inc, note, self.ctx.channel_audience(thread.channel))
        self.ctx.chat.update(resolved, thread=thread)
        self.ctx.chat.post(Message(note), to=Place.of(thread))

    def _resolved(self, inc: Incident, note: str, audience: Audience) -> Message:
        """The incident's message after Resolve, rebuilt from its last stored report (never
        from what a press carried), without buttons."""
        try:
            runs = self.ctx.store.runs(inc.id)
        except IncidentStoreError as e:
            log.warning("incident %s: its report could not be read back: %s", inc.id, e)
            runs = []
        report = runs[-1].parsed_report() if runs else None
        ref = ButtonRef(inc.cluster, inc.namespace, inc.name, str(inc.id))
        return self.ctx.render.resolved(report, audience=audience, ref=ref, note=note)

    # -- Acknowledge, Snooze --------------------------------------------------------------------
    def acknowledge(self, press: Press) -> None:
        self._lifecycle(press, snooze=False)

    def snooze(self, press: Press) -> None:
        self._lifecycle(press, snooze=True)

    def _lifecycle(self, press: Press, *, snooze: bool) -> None:
        """Acknowledge (or snooze) the press's incident, recorded with the presser; said in
        its thread when pressed there, else to the presser alone."""
        words, inc, user = self.ctx.words, press.incident, press.asker.user
        if inc is None:
            self.ctx.say(press.asker, words.incident_not_found("?"))
            return
        if not inc.is_open:
            self.ctx.say(
                press.asker, words.incident_already(incident_id=str(inc.id), status="resolved")
            )
            return
        try:
            if snooze:
                inc = self.ctx.store.snooze(inc.id, until=timedelta(hours=SNOOZE_HOURS), by=user)
            else:
                inc = self.ctx.store.set_status(inc.id, IncidentStatus.ACKNOWLEDGED, by=user)
        except IncidentNotFoundError:
            self.ctx.say(press.asker, words.incident_not_found(str(inc.id)))
            return
        except InvalidTransitionError:
            self.ctx.say(
                press.asker, words.incident_already(incident_id=str(inc.id), status="resolved")
            )
            return
        except IncidentStoreError as e:
            self.ctx.store_failed(press.asker, e)
            return
        if snooze and inc.snoozed_until is not None:
            until_text = f"{inc.snoozed_until:%Y-%m-%d %H:%M}"
            note = words.incident_snoozed(incident_id=str(inc.id), user=user, until=until_text)
        else:
            note = words.incident_acknowledged(incident_id=str(inc.id), user=user)
        if press.thread is not None and inc.thread_ref is not None:
            self.ctx.chat.post(Message(note), to=Place.of(inc.thread_ref))
        else:
            self.ctx.say(press.asker, note)

    # -- Escalate -----------------------------------------------------------------------------
    def escalate(self, press: Press) -> None:
        self._triage(press, self._escalate_answer)

    def _escalate_answer(self, press: Press, outcome: OutcomeLike) -> None:
        words, report = self.ctx.words, outcome.report
        owner = report.owner
        if report.failing_layer is None or owner is None or not owner.channel:
            self.ctx.say(press.asker, words.no_owner_channel())
            return
        inc = press.incident
        thread = None if inc is None else inc.thread_ref
        permalink: str | None = None
        if thread is not None:
            try:
                permalink = self.ctx.chat.permalink(thread)
            except ChatError as e:
                log.warning("no link to the incident thread: %s", e)
        summary = words.escalation_summary(
            layer=report.failing_layer.value,
            headline=f"{report.pod.namespace}/{report.pod.name}: {report.headline}",
            permalink=permalink,
            user=press.asker.user,
            usergroup=owner.usergroup,
        )
        try:
            self.ctx.chat.post(
                self.ctx.render.escalation(report, summary=summary), to=Place(owner.channel)
            )
        except ChatError as e:
            self.ctx.say(press.asker, words.escalation_failed(e.reason))
            return
        done = Message(words.escalated(channel=owner.channel, user=press.asker.user))
        if press.thread is not None and thread is not None:
            self.ctx.chat.post(done, to=Place.of(thread))
        else:
            self.ctx.say(press.asker, done.text)
