"""Block Kit for a `TriageReport`: the Slack sink of the platform-neutral report.

Order follows what an on-call engineer needs first: the failing layer in plain words, the key
evidence, who owns it, what to do next, then buttons. Every string from the cluster goes through
`mrkdwn.escape`; Slack's size limits are enforced here, not hoped for.
"""

from __future__ import annotations

from typing import Any

from bot.core.refs import SNOOZE_HOURS, Action, ButtonRef
from bot.slack.ids import is_usergroup
from bot.slack.mrkdwn import channel_link, code, escape, plain, truncate
from triage import Audience, OwnerRoute, Status, TriageReport
from triage.model import Answer

MAX_BLOCKS = 50
MAX_SECTION = 3000
MAX_HEADER = 150
EVIDENCE_SHOWN = 8
LINE_LIMIT = 300

Block = dict[str, Any]

_STATUS_ICON = {
    Status.OK: ":white_check_mark:",
    Status.WARN: ":warning:",
    Status.FAIL: ":x:",
    Status.UNKNOWN: ":grey_question:",
    Status.SKIPPED: ":heavy_minus_sign:",
}


def section(text: str) -> Block:
    return {
        "type": "section",
        "text": {"type": "mrkdwn", "text": truncate(text, limit=MAX_SECTION)},
    }


def context(text: str) -> Block:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": truncate(text, limit=3000)}]}


def bullet_list(lines: list[str], *, shown: int = EVIDENCE_SHOWN) -> str:
    """Escaped bullets, at most `shown` of them, then "… and N more"."""
    out = [f"• {escape(truncate(line, limit=LINE_LIMIT))}" for line in lines[:shown]]
    if len(lines) > shown:
        out.append(f"… and {len(lines) - shown} more")
    return "\n".join(out)


def owner_text(owner: OwnerRoute) -> str:
    parts = [f"*Owner:* {escape(owner.team)}"]
    if owner.channel:
        parts.append(channel_link(owner.channel))
    if is_usergroup(owner.usergroup):
        parts.append(f"<!subteam^{owner.usergroup}>")
    return " · ".join(parts)


def headline_text(report: TriageReport) -> str:
    """Notification fallback text: plain words, escaped."""
    ref = f"{report.pod.namespace}/{report.pod.name}"
    if report.answer == Answer.UNKNOWN:
        return escape(f"{ref}: unknown. {report.headline}")
    if report.failing_layer is None:
        return escape(f"{ref}: not blocked. {report.headline}")
    return escape(f"{ref}: blocked at {report.failing_layer.value}. {report.headline}")


def report_blocks(
    report: TriageReport,
    *,
    audience: Audience,
    ref: ButtonRef,
    buttons: bool = True,
) -> list[Block]:
    """The full reply, as much of it as `audience` may read (`TriageReport.for_audience`):
    what only operators see is marked `[operator]`."""
    report = report.for_audience(audience)
    layer = report.failing_layer
    pod = report.pod
    title = "Not blocked" if layer is None else f"Blocked at {layer.value}: {layer.label}"
    if report.answer == Answer.UNKNOWN:
        title = "Unknown: a layer could not be judged"
    blocks: list[Block] = [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": truncate(plain(title), limit=MAX_HEADER)},
        },
    ]
    where = f"{pod.kind} {code(pod.namespace + '/' + pod.name)}"
    if pod.pod and pod.pod != pod.name:
        where += f" (pod {code(pod.pod)})"
    if pod.node:
        where += f" on {code(pod.node)}"
    if layer is None:
        lead = f"*Nothing blocks it.* {escape(report.headline)}"
    else:
        lead = f"*Failing layer:* {escape(layer.label)} ({code(layer.value)})"
        lead += "\n" + escape(report.headline)
    blocks.append(section(f"{lead}\n{where} · cluster {code(report.cluster)}"))

    if layer is not None:
        finding = report.finding(layer)
        lines = list(finding.evidence) + [f"[operator] {d}" for d in finding.detail]
        if lines:
            blocks.append(section("*Evidence*\n" + bullet_list(lines)))
    side = [
        f for f in report.findings if f.layer != layer and f.status in (Status.FAIL, Status.WARN)
    ]
    for f in side[:3]:
        extra = list(f.evidence) + list(f.detail)
        icon = _STATUS_ICON[f.status]
        text = f"{icon} *Side finding ({escape(f.layer.value)}):* {escape(f.summary)}"
        if extra:
            text += "\n" + bullet_list(extra, shown=3)
        blocks.append(section(text))

    if report.owner is not None and layer is not None:
        blocks.append(section(owner_text(report.owner)))
    remediation = report.operator_steps + report.remediation
    if remediation:
        steps = [
            f"{i}. {escape(truncate(s, limit=LINE_LIMIT))}"
            for i, s in enumerate(remediation[:6], 1)
        ]
        if len(remediation) > 6:
            steps.append(f"… and {len(remediation) - 6} more")
        blocks.append(section("*Next steps*\n" + "\n".join(steps)))
    if report.verification:
        blocks.append(section("*Verify*\n" + bullet_list(report.verification, shown=5)))

    layers = " · ".join(f"{_STATUS_ICON[f.status]} {f.layer.value}" for f in report.findings)
    age = report.data_age_note
    note = f" · {escape(age)}" if age else ""
    blocks.append(context(layers + note))
    if buttons:
        blocks.append(action_buttons(ref, escalate=layer is not None))
    return blocks[:MAX_BLOCKS]


NOT_RECORDED = "gpu_not_recorded"  # block id of the one "not recorded" note a message carries


def with_note(message: dict[str, Any], note: str | None) -> dict[str, Any]:
    """`message` (chat.postMessage or response_url arguments) with a "not recorded" note,
    once: as a context block when it has blocks, else as a last line of its text."""
    if not note:
        return message
    blocks = message.get("blocks")
    if blocks is None:
        return {**message, "text": f"{message.get('text') or ''}\n{note}".strip()}
    if any(b.get("block_id") == NOT_RECORDED for b in blocks):
        return message
    return {**message, "blocks": [*blocks[: MAX_BLOCKS - 1], note_block(note)]}


def note_block(text: str) -> Block:
    """The "not recorded" note as a context block (already worded and escaped)."""
    return {**context(text), "block_id": NOT_RECORDED}


def with_summary(blocks: list[Block], text: str | None) -> list[Block]:
    """`blocks` with a summary line after the verdict (already worded and escaped), if any."""
    if not text:
        return blocks
    return [*blocks[:2], context(text), *blocks[2:]][:MAX_BLOCKS]


def action_buttons(ref: ButtonRef, *, escalate: bool) -> Block:
    value = ref.to_value()
    elements: list[Block] = [
        _button("Re-run", Action.RERUN, value),
        _button("Resolve", Action.RESOLVE, value, style="primary"),
    ]
    if ref.incident_id is not None:  # the lifecycle needs an incident to act on
        elements += [
            _button("Acknowledge", Action.ACKNOWLEDGE, value),
            _button(f"Snooze {SNOOZE_HOURS}h", Action.SNOOZE, value),
        ]
    if escalate:
        elements.append(_button("Escalate to owner", Action.ESCALATE, value, style="danger"))
    return {"type": "actions", "block_id": "gpu_actions", "elements": elements}


def _button(label: str, action_id: str, value: str, *, style: str | None = None) -> Block:
    button: Block = {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": label},
        "value": value,
    }
    if style:
        button["style"] = style
    return button


def escalation_blocks(report: TriageReport, *, summary: str) -> list[Block]:
    """Summary for the owner's channel: headline, key evidence (tenant-safe), the link back."""
    blocks = [section(summary)]
    if report.failing_layer is not None:
        ev = report.finding(report.failing_layer).evidence
        if ev:
            blocks.append(section(bullet_list(list(ev), shown=5)))
    return blocks
