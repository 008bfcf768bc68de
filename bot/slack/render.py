"""The core's values as Slack messages: the module is the Slack adapter's
`bot.core.wording.Render`, each function a `Message` whose text is the notification line and
whose parts are Block Kit (`bot.slack.blocks`, `bot.slack.fleet`)."""

from __future__ import annotations

from bot.core.chat import Message
from bot.core.refs import ButtonRef
from bot.core.wording import NO_NOTES, Notes
from bot.slack import messages as msg
from bot.slack.blocks import (
    MAX_BLOCKS,
    context,
    escalation_blocks,
    headline_text,
    note_block,
    report_blocks,
    with_summary,
)
from bot.slack.fleet import alert_text, pending_blocks, stored_group_blocks
from incidents.values import GroupIncident
from triage import Audience, TriageReport
from triage.fleet import Sweep


def report(
    report: TriageReport, *, audience: Audience, ref: ButtonRef, notes: Notes = NO_NOTES
) -> Message:
    blocks = with_summary(report_blocks(report, audience=audience, ref=ref), notes.summary)
    if notes.unrecorded:
        blocks.append(note_block(notes.unrecorded))
    return Message(headline_text(report), blocks)


def rerun(report: TriageReport, *, audience: Audience, ref: ButtonRef, user: str) -> Message:
    said = msg.rerun_posted(user=user)
    blocks = report_blocks(report, audience=audience, ref=ref)
    return Message(said + " " + headline_text(report), [context(said), *blocks])


def resolved(
    report: TriageReport | None, *, audience: Audience, ref: ButtonRef, note: str
) -> Message:
    if report is None:
        return Message(note, [context(note)])
    blocks = report_blocks(report, audience=audience, ref=ref, buttons=False)
    return Message(note, [*blocks[: MAX_BLOCKS - 1], context(note)])


def escalation(report: TriageReport, *, summary: str) -> Message:
    return Message(summary, escalation_blocks(report, summary=summary))


def pending(sweep: Sweep, *, scope: str) -> Message:
    text = f"{sweep.workloads} stuck workload(s), {sweep.gpus} GPU(s) waiting"
    return Message(text, pending_blocks(sweep, scope=scope))


def group_root(row: GroupIncident) -> Message:
    return Message(alert_text(row.layer.value, row.cluster, row.cause), stored_group_blocks(row))
