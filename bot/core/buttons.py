"""The report's buttons: Re-run, Resolve, Escalate to owner (run on the worker pool).

A press acts only on what its presser may touch. The button's value names an incident (or, for
a report that opened none, a workload), and nothing else in the payload is believed:

- the incident is loaded from the store, and its recorded cluster and namespace (not the
  value's) are checked against the presser's grants;
- the channel counts for the presser's rights (a channel-granted tenant, an operator channel)
  only when the channel Slack reports for the press is the one recorded for the incident;
- the bot edits (`chat.update`) only the message it posted for the incident, in the channel
  recorded for it, with blocks rebuilt from the stored report; follow-ups go into that thread.

Anywhere else (a private reply, a forwarded message) the presser gets the answer privately.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from slack_sdk.errors import SlackApiError

from bot.core.commands import MAX_ID, WhyPending
from bot.core.handlers import Asker, Handlers
from bot.slack import messages as msg
from bot.slack.blocks import (
    Block,
    ButtonRef,
    channel_link,
    context,
    escalation_blocks,
    headline_text,
    report_blocks,
)
from incidents.errors import IncidentNotFoundError, IncidentStoreError, InvalidTransitionError
from incidents.values import Incident, IncidentStatus
from triage import Audience

log = logging.getLogger(__name__)
_ID = re.compile(r"[0-9]{1,19}")


@dataclass(frozen=True)
class Press:
    """One button press, as far as it can be trusted."""

    asker: Asker  # the presser; `channel` only when it is the incident's recorded channel
    ref: ButtonRef  # the workload acted on: the incident's when there is one
    incident: Incident | None
    in_thread: bool  # pressed on a message in the incident's recorded channel
    ephemeral: bool  # pressed on a private reply (response_url replaces it)


class Buttons:
    def __init__(self, *, handlers: Handlers) -> None:
        self.h = handlers

    def press(self, *, body: dict[str, Any], respond: Any) -> None:
        action = body["actions"][0]
        presser = Asker(user=body["user"]["id"], channel=None, respond=respond)
        press = self._trusted(body, action, presser)
        if press is None:
            return
        viewer = self.h.viewer(press.asker, press.ref.cluster)
        if not viewer.may_see(press.ref.namespace):
            self.h.say(
                press.asker, msg.not_found(namespace=press.ref.namespace, name=press.ref.name)
            )
            return
        handler = {
            "gpu_rerun": self.rerun,
            "gpu_resolve": self.resolve,
            "gpu_escalate": self.escalate,
        }.get(str(action.get("action_id")))
        if handler is not None:
            handler(press)

    def _trusted(
        self, body: dict[str, Any], action: dict[str, Any], presser: Asker
    ) -> Press | None:
        """The press with the incident loaded and the rights channel checked; None once a
        refusal was answered."""
        try:
            ref = ButtonRef.from_value(str(action.get("value", "")))
        except ValueError:
            self.h.say(presser, msg.button_malformed())
            return None
        incident = None
        if ref.incident_id is not None:
            found = _ID.fullmatch(ref.incident_id)
            if found is None or not 0 < int(ref.incident_id) <= MAX_ID:
                self.h.say(presser, msg.incident_not_found(ref.incident_id))
                return None
            try:
                incident = self.h.store.get(int(ref.incident_id))
            except IncidentStoreError as e:
                self.h.store_failed(presser, e)
                return None
            if incident is None:
                self.h.say(presser, msg.incident_not_found(ref.incident_id))
                return None
            ref = ButtonRef(incident.cluster, incident.namespace, incident.name, str(incident.id))
        container = body.get("container") or {}
        reported = (body.get("channel") or {}).get("id")
        ephemeral = bool(container.get("is_ephemeral")) or not body.get("message")
        in_thread = (
            incident is not None
            and not ephemeral
            and reported is not None
            and container.get("channel_id", reported) == reported
            and reported == incident.channel
            and incident.thread is not None
        )
        asker = Asker(
            user=presser.user, channel=reported if in_thread else None, respond=presser.respond
        )
        return Press(asker, ref, incident, in_thread, ephemeral)

    def _privately(self, press: Press, **message: Any) -> None:
        if press.asker.respond is not None:
            press.asker.respond(
                response_type="ephemeral", replace_original=press.ephemeral, **message
            )

    def rerun(self, press: Press) -> None:
        ref = press.ref
        outcome = self.h.triage(
            press.asker, WhyPending(name=ref.name, namespace=ref.namespace, cluster=ref.cluster)
        )
        if outcome is None:
            return
        inc = outcome.incident
        new_ref = ButtonRef(
            ref.cluster, ref.namespace, ref.name, None if inc is None else str(inc.id)
        )
        if not press.in_thread or press.incident is None:
            operator = self.h.viewer(press.asker).operator
            blocks = report_blocks(
                outcome.report, audience=Audience.of(operator=operator), ref=new_ref
            )
            self._privately(press, text=headline_text(outcome.report), blocks=blocks)
            return
        channel, thread = press.incident.channel, press.incident.thread
        assert channel is not None  # in_thread: the press came from the recorded channel
        blocks = report_blocks(
            outcome.report,
            audience=Audience.of(operator=self.h.channel_audience_is_operator(channel)),
            ref=new_ref,
        )
        self.h.client.chat_postMessage(
            channel=channel,
            thread_ts=thread,
            text=msg.rerun_posted(user=press.asker.user) + " " + headline_text(outcome.report),
            blocks=[context(msg.rerun_posted(user=press.asker.user)), *blocks],
            unfurl_links=False,
        )

    def resolve(self, press: Press) -> None:
        inc = press.incident
        if inc is None:
            self.h.say(press.asker, msg.incident_not_found("?"))
            return
        if not inc.is_open:
            self.h.say(
                press.asker, msg.incident_already(incident_id=str(inc.id), status="resolved")
            )
            return
        try:
            inc = self.h.store.set_status(inc.id, IncidentStatus.RESOLVED, by=press.asker.user)
        except IncidentNotFoundError:
            self.h.say(press.asker, msg.incident_not_found(str(inc.id)))
            return
        except InvalidTransitionError:
            self.h.say(
                press.asker, msg.incident_already(incident_id=str(inc.id), status="resolved")
            )
            return
        except IncidentStoreError as e:
            self.h.store_failed(press.asker, e)
            return
        note = msg.incident_resolved(incident_id=str(inc.id), user=press.asker.user)
        if not press.in_thread or inc.channel is None or inc.thread is None:
            self._privately(press, text=note, blocks=self._resolved_blocks(inc, note, detail=False))
            return
        detail = self.h.channel_audience_is_operator(inc.channel)
        self.h.client.chat_update(
            channel=inc.channel,
            ts=inc.thread,
            text=note,
            blocks=self._resolved_blocks(inc, note, detail=detail),
        )
        self.h.client.chat_postMessage(channel=inc.channel, thread_ts=inc.thread, text=note)

    def _resolved_blocks(self, inc: Incident, note: str, *, detail: bool) -> list[Block]:
        """The incident's message after Resolve, rebuilt from its last stored report (never
        from the blocks a payload carried), without buttons."""
        try:
            runs = self.h.store.runs(inc.id)
        except IncidentStoreError as e:
            log.warning("incident %s: its report could not be read back: %s", inc.id, e)
            runs = []
        report = runs[-1].parsed_report() if runs else None
        if report is None:
            return [context(note)]
        ref = ButtonRef(inc.cluster, inc.namespace, inc.name, str(inc.id))
        blocks = report_blocks(
            report, audience=Audience.of(operator=detail), ref=ref, buttons=False
        )
        return [*blocks[:49], context(note)]

    def escalate(self, press: Press) -> None:
        ref = press.ref
        outcome = self.h.triage(
            press.asker, WhyPending(name=ref.name, namespace=ref.namespace, cluster=ref.cluster)
        )
        if outcome is None:
            return
        report = outcome.report
        owner = report.owner
        if report.failing_layer is None or owner is None or not owner.channel:
            self.h.say(press.asker, msg.no_owner_channel())
            return
        inc = press.incident
        permalink: str | None = None
        if inc is not None and inc.channel and inc.thread:
            try:
                link = self.h.client.chat_getPermalink(channel=inc.channel, message_ts=inc.thread)
                permalink = str(link.get("permalink") or "") or None
            except SlackApiError as e:
                log.warning("chat.getPermalink failed: %s", e)
        summary = msg.escalation_summary(
            layer=report.failing_layer.value,
            headline=f"{report.pod.namespace}/{report.pod.name}: {report.headline}",
            permalink=permalink,
            user=press.asker.user,
        )
        if owner.usergroup:
            summary = f"<!subteam^{owner.usergroup}> {summary}"
        try:
            self.h.client.chat_postMessage(
                channel=owner.channel,
                text=summary,
                blocks=escalation_blocks(report, summary=summary),
                unfurl_links=False,
            )
        except SlackApiError as e:
            self.h.say(press.asker, msg.escalation_failed(str(e.response.get("error", "error"))))
            return
        done = msg.escalated(channel=channel_link(owner.channel), user=press.asker.user)
        if press.in_thread and inc is not None and inc.channel and inc.thread:
            self.h.client.chat_postMessage(channel=inc.channel, thread_ts=inc.thread, text=done)
        else:
            self.h.say(press.asker, done)
