"""Block Kit for the fleet view: a group of stuck workloads (in an alert, or in the answer to
`/gpu pending`), and the button that opens a group's incident thread."""

from __future__ import annotations

from datetime import datetime

from bot.core.refs import Action, group_value
from bot.slack.blocks import MAX_BLOCKS, MAX_SECTION, Block, context, section
from bot.slack.mrkdwn import escape, truncate
from incidents.values import GroupIncident
from triage.fleet import Group, Sweep, waited

MEMBERS_SHOWN = 10
GROUPS_SHOWN = 20


def _summary(group: Group, now: datetime) -> str:
    owner = group.owner.team if group.owner else "-"
    if group.owner and group.owner.channel:
        owner += f" ({group.owner.channel})"
    shown = group.members[:MEMBERS_SHOWN]
    names = ", ".join(escape(f"{m.namespace}/{m.name}") for m in shown)
    more = len(group.members) - len(shown)
    return (
        f"*{escape(group.layer.value)}* in cluster {escape(group.cluster)}: "
        f"{escape(group.cause)}\n"
        f"{group.workloads} workload(s), {group.gpus} GPU(s) waiting, oldest "
        f"{waited(group.oldest, now)}, owner {escape(owner)}\n"
        + names
        + (f" and {more} more" if more else "")
    )


def alert_text(layer: str, cluster: str, cause: str) -> str:
    """The plain text of a group alert (notifications, screen readers), escaped like all
    cluster text."""
    return escape(f"{layer} in cluster {cluster}: {cause}")


def group_blocks(group: Group, *, now: datetime) -> list[Block]:
    """One group as an alert: the cause, the numbers, who owns it, the members, how to drill in."""
    first = group.members[0]
    return [
        section(truncate(f":rotating_light: {_summary(group, now)}", limit=MAX_SECTION)),
        context(
            escape(
                f"drill in: /gpu why-pending {first.name} -n {first.namespace} "
                f"--cluster {group.cluster}"
            )
        ),
    ]


def pending_blocks(result: Sweep, *, scope: str) -> list[Block]:
    """The answer to `/gpu pending`: the totals, then a section per group with a button."""
    head = (
        f"*{result.workloads} stuck workload(s), {result.gpus} GPU(s) waiting, "
        f"{len(result.groups)} cause(s)* in {escape(scope)} (cluster {escape(result.cluster)})"
    )
    blocks: list[Block] = [section(head)]
    if not result.groups:
        blocks.append(context("nothing stuck: every GPU workload you may see runs"))
    for group in result.groups[:GROUPS_SHOWN]:
        first = group.members[0]
        block = section(_summary(group, result.generated_at))
        block["accessory"] = {
            "type": "button",
            "action_id": Action.GROUP_THREAD,
            "text": {"type": "plain_text", "text": "Incident thread"},
            "value": group_value(group),
        }
        blocks += [
            block,
            context(
                escape(
                    f"drill in: /gpu why-pending {first.name} -n {first.namespace} "
                    f"--cluster {group.cluster}"
                )
            ),
        ]
    hidden = len(result.groups) - GROUPS_SHOWN
    if hidden > 0:
        blocks.append(context(f"… and {hidden} more cause(s): `gpu-triage pending` lists them all"))
    if result.waiting:
        blocks.append(context(f"{len(result.waiting)} more wait with nothing blocking them"))
    return blocks[:MAX_BLOCKS]


def stored_group_blocks(row: GroupIncident) -> list[Block]:
    """A stored group (what the store remembers of it), as the root of its incident thread."""
    names = [f"{m.get('namespace')}/{m.get('name')}" for m in row.members]
    shown = ", ".join(escape(n) for n in names[:MEMBERS_SHOWN])
    more = len(names) - MEMBERS_SHOWN
    owner = row.owner_team or "-"
    text = (
        f":rotating_light: *{escape(row.layer.value)}* in cluster {escape(row.cluster)}: "
        f"{escape(row.cause)}\n"
        f"{row.workloads} workload(s), {row.gpus} GPU(s) waiting, owner {escape(owner)}\n"
        + shown
        + (f" and {more} more" if more > 0 else "")
    )
    return [section(truncate(text, limit=MAX_SECTION))]
