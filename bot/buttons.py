"""The report's buttons: Re-run, Resolve, Escalate to owner (run on the worker pool).

Follow-ups stay in the incident's thread. A button carries only a `ButtonRef` (cluster,
namespace, name, incident id); the clicking user's access is checked again, so a forwarded
message does not widen anyone's view.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk.errors import SlackApiError

from bot import messages as msg
from bot.commands import WhyPending
from bot.handlers import Asker, Handlers
from bot.render import (
    ButtonRef,
    channel_link,
    escalation_blocks,
    headline_text,
    report_blocks,
    without_buttons,
)
from incidents.errors import IncidentNotFoundError, IncidentStoreError, InvalidTransitionError
from incidents.values import IncidentStatus

log = logging.getLogger(__name__)


class Buttons:
    def __init__(self, *, handlers: Handlers) -> None:
        self.h = handlers

    def press(self, *, body: dict[str, Any], respond: Any) -> None:
        action = body["actions"][0]
        try:
            ref = ButtonRef.from_value(str(action.get("value", "")))
        except ValueError:
            log.warning("ignoring a button with a malformed value")
            return
        container = body.get("container") or {}
        message = body.get("message") or {}
        channel = container.get("channel_id") or (body.get("channel") or {}).get("id")
        asker = Asker(user=body["user"]["id"], channel=channel, respond=respond)
        if not self.h.viewer(asker).may_see(ref.namespace):
            self.h.say(asker, msg.not_found(namespace=ref.namespace, name=ref.name))
            return
        ephemeral = bool(container.get("is_ephemeral")) or not message
        root_ts = message.get("thread_ts") or message.get("ts") or container.get("message_ts")
        where = Where(channel=channel, root_ts=None if ephemeral else root_ts, message=message)
        handler = {
            "gpu_rerun": self.rerun,
            "gpu_resolve": self.resolve,
            "gpu_escalate": self.escalate,
        }.get(str(action.get("action_id")))
        if handler is not None:
            handler(asker, ref, where)

    def rerun(self, asker: Asker, ref: ButtonRef, where: Where) -> None:
        outcome = self.h.triage(
            asker, WhyPending(name=ref.name, namespace=ref.namespace, cluster=ref.cluster)
        )
        if outcome is None:
            return
        inc = outcome.incident
        new_ref = ButtonRef(
            cluster=ref.cluster,
            namespace=ref.namespace,
            name=ref.name,
            incident_id=None if inc is None else str(inc.id),
        )
        if where.root_ts is None or where.channel is None:
            blocks = report_blocks(
                outcome.report, include_detail=self.h.viewer(asker).operator, ref=new_ref
            )
            asker_respond = asker.respond
            if asker_respond is not None:
                asker_respond(
                    text=headline_text(outcome.report),
                    blocks=blocks,
                    response_type="ephemeral",
                    replace_original=True,
                )
            return
        blocks = report_blocks(
            outcome.report,
            include_detail=self.h.channel_audience_is_operator(where.channel),
            ref=new_ref,
        )
        self.h.client.chat_postMessage(
            channel=where.channel,
            thread_ts=where.root_ts,
            text=msg.rerun_posted(user=asker.user) + " " + headline_text(outcome.report),
            blocks=[_text_block(msg.rerun_posted(user=asker.user)), *blocks],
            unfurl_links=False,
        )

    def resolve(self, asker: Asker, ref: ButtonRef, where: Where) -> None:
        if ref.incident_id is None:
            self.h.say(asker, msg.incident_not_found("?"))
            return
        try:
            current = self.h.store.get(int(ref.incident_id))
            if current is not None and not current.is_open:
                self.h.say(
                    asker, msg.incident_already(incident_id=ref.incident_id, status="resolved")
                )
                return
            inc = self.h.store.set_status(
                int(ref.incident_id), IncidentStatus.RESOLVED, by=asker.user
            )
        except IncidentNotFoundError:
            self.h.say(asker, msg.incident_not_found(ref.incident_id))
            return
        except InvalidTransitionError:
            self.h.say(asker, msg.incident_already(incident_id=ref.incident_id, status="resolved"))
            return
        except IncidentStoreError as e:
            self.h.store_failed(asker, e)
            return
        note = msg.incident_resolved(incident_id=str(inc.id), user=asker.user)
        blocks = without_buttons(list(where.message.get("blocks") or []), note=note)
        if where.root_ts is None or where.channel is None:
            if asker.respond is not None:
                asker.respond(text=note, blocks=blocks, replace_original=True)
            return
        ts = str(where.message.get("ts") or where.root_ts)
        self.h.client.chat_update(channel=where.channel, ts=ts, text=note, blocks=blocks)
        self.h.client.chat_postMessage(channel=where.channel, thread_ts=where.root_ts, text=note)

    def escalate(self, asker: Asker, ref: ButtonRef, where: Where) -> None:
        outcome = self.h.triage(
            asker, WhyPending(name=ref.name, namespace=ref.namespace, cluster=ref.cluster)
        )
        if outcome is None:
            return
        report = outcome.report
        owner = report.owner
        if report.failing_layer is None or owner is None or not owner.channel:
            self.h.say(asker, msg.no_owner_channel())
            return
        permalink: str | None = None
        if where.channel and where.root_ts:
            try:
                link = self.h.client.chat_getPermalink(
                    channel=where.channel, message_ts=where.root_ts
                )
                permalink = str(link.get("permalink") or "") or None
            except SlackApiError as e:
                log.warning("chat.getPermalink failed: %s", e)
        summary = msg.escalation_summary(
            layer=report.failing_layer.value,
            headline=f"{report.pod.namespace}/{report.pod.name}: {report.headline}",
            permalink=permalink,
            user=asker.user,
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
            self.h.say(asker, msg.escalation_failed(str(e.response.get("error", "error"))))
            return
        done = msg.escalated(channel=channel_link(owner.channel), user=asker.user)
        if where.channel and where.root_ts:
            self.h.client.chat_postMessage(
                channel=where.channel, thread_ts=where.root_ts, text=done
            )
        else:
            self.h.say(asker, done)


class Where:
    """Where the pressed button's message lives; `root_ts` is None for ephemeral messages."""

    def __init__(
        self, *, channel: str | None, root_ts: str | None, message: dict[str, Any]
    ) -> None:
        self.channel, self.root_ts, self.message = channel, root_ts, message


def _text_block(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}
