"""Every sentence the bot says to a Slack user, in one place so wording is reviewed together:
the module is the Slack adapter's `bot.core.wording.Words`.

Values interpolated here are raw (names typed by users or read from a cluster): each goes
through `mrkdwn.code` / `mrkdwn.escape` here, before it reaches Slack.
"""

from __future__ import annotations

from bot.core.registry import usage
from bot.slack.ids import is_usergroup
from bot.slack.mrkdwn import channel_link, code, escape, truncate
from incidents.values import Incident
from triage import SourceStatus
from triage.verify.node import NodeVerification

COMMAND = "/gpu"
USAGE = "\n".join(
    [
        "*Usage*",
        *(f"• `{COMMAND} {typed}`: {does}" for typed, does in usage()),
        "In a channel you can also mention me: `@gpu-triage why-pending <pod>`.",
    ]
)


def command_prefix() -> str:
    return COMMAND + " "


def help_text() -> str:
    return USAGE


def malformed(problem: str) -> str:
    return f":warning: {escape(problem)}\n\n{USAGE}"


def too_long(length: int, limit: int) -> str:
    return f":warning: That command is {length} characters long; I take at most {limit}."


def working(*, namespace: str, name: str) -> str:
    return f":hourglass_flowing_sand: Triaging {code(namespace + '/' + name)}…"


def not_found(*, namespace: str, name: str) -> str:
    # The same sentence for "no such pod", "no such namespace" and "not yours to see".
    return (
        f"No pod or workload named {code(name)} in namespace {code(namespace)} "
        "that you can see. Check the name and namespace (`-n <namespace>`)."
    )


def invalid_name(reason: str) -> str:
    return f":warning: {escape(reason)}"


def no_namespace() -> str:
    return ":warning: Which namespace? This channel has no default namespace; add `-n <namespace>`."


# Cluster and database faults: a tenant reads the kind of fault; operators also get the
# detail (server addresses, users, database names), which is `None` for everyone else.


def cluster_unavailable(detail: str | None) -> str:
    more = f": {escape(detail)}" if detail else " (it is unreachable or not answering)"
    return f":x: The cluster could not be read{more}. Try again in a minute."


def cluster_forbidden(detail: str | None) -> str:
    more = f": {escape(detail)}" if detail else "; the operators have the details"
    return f":x: The bot may not read what it needs{more}."


def source_error(detail: str | None) -> str:
    more = f": {escape(detail)}" if detail else "; the operators have the details"
    return f":x: Triage failed{more}."


_STORE_FAULTS = {
    "locked": "is locked by another writer",
    "timeout": "did not answer in time",
    "unreachable": "cannot be reached",
    "read-only": "is read-only",
    "not-initialised": "is not set up yet",
    "gone": "has lost its file",
    "misconfigured": "is misconfigured",
}


def store_fault(fault: str | None) -> str:
    """The kind of database fault in words anyone may read."""
    return "the incident database " + _STORE_FAULTS.get(str(fault), "is unavailable")


def unknown_cluster(name: str) -> str:
    return f":warning: I don't serve a cluster named {code(name)}. `/gpu clusters` lists them."


def internal_error() -> str:
    return ":x: Something went wrong inside the bot; the operators have the log. Try again later."


def no_policy() -> str:
    # Nothing about the cluster: the asker has no grant, and nobody has one yet.
    return (
        ":lock: This workspace has no access policy for GPU Triage yet, so I answer nobody. "
        "Ask your admin to set one (`GPU_TRIAGE_ACCESS_POLICY`; see the README)."
    )


NO_POLICY_NOTICE = (
    "no access policy configured: every user is refused; set GPU_TRIAGE_ACCESS_POLICY "
    "(or --access-policy) to a policy file"
)


def busy() -> str:
    return ":hourglass: Too many triages are running right now. Try again in a minute."


def not_recorded(fault: str | None, *, detail: str | None = None) -> str:
    """The note on an answer whose record failed (the command's, or its incident's)."""
    more = f" ({escape(detail)})" if detail else ""
    return (
        f"_Not recorded: {store_fault(fault)}{more}. The answer is complete; it is only "
        "missing from the incident history._"
    )


def store_unavailable(fault: str | None, *, detail: str | None = None) -> str:
    more = f" ({escape(detail)})" if detail else ""
    return f":x: {store_fault(fault).capitalize()}{more}. Try again in a minute."


def operator_only() -> str:
    return ":lock: Only operators can do that."


def node_not_found(node: str) -> str:
    return f"No node named {code(node)} in this cluster."


_CHECK_MARK = {
    "pass": ":white_check_mark:",
    "fail": ":x:",
    "warn": ":warning:",
    "skip": ":heavy_minus_sign:",
}


def verification(result: NodeVerification) -> str:
    """The verification template for one node, as mrkdwn. Cluster text is escaped."""
    verdict = (
        "passes"
        if result.passed
        else f"fails at layer `{result.failing_layer.value if result.failing_layer else '?'}`"
    )
    lines = [f"*Node {code(result.node)} {verdict}* (driver {escape(result.driver_strategy)})"]
    for c in result.checks:
        lines.append(
            f"{_CHECK_MARK.get(c.status.value, '•')} *{escape(c.name)}*: {escape(c.summary)}"
        )
        if c.status.value == "fail":
            lines.extend(f"      ◦ {escape(e)}" for e in c.evidence[:3])
    if result.owner is not None:
        channel = f" ({escape(result.owner.channel)})" if result.owner.channel else ""
        lines.append(f"Owner: *{escape(result.owner.team)}*{channel}")
    return truncate("\n".join(lines), limit=3000)


def group_not_found() -> str:
    return (
        "No open incident for that cause any more (it may have cleared): run `/gpu pending` again."
    )


def group_no_thread() -> str:
    return (
        "That cause has no incident thread yet: the owner's channel gets one when alerts are on "
        "for it. Drill in with `/gpu why-pending <workload> -n <namespace>`."
    )


def group_thread(link: str) -> str:
    if link:
        return f"Incident thread of that cause: {link}"
    return "Incident thread of that cause is open."


def no_incidents() -> str:
    return "No open incidents. :tada:"


def incident_not_found(incident_id: str) -> str:
    return f"No incident {code(incident_id)}."


def button_malformed() -> str:
    return ":warning: That button's data is malformed. Run the command again for a fresh one."


def incident_resolved(*, incident_id: str, user: str) -> str:
    return f":white_check_mark: Incident {code(incident_id)} resolved by <@{user}>."


def incident_acknowledged(*, incident_id: str, user: str) -> str:
    return f":eyes: Incident {code(incident_id)} acknowledged by <@{user}>."


def incident_snoozed(*, incident_id: str, user: str, until: str) -> str:
    return (
        f":zzz: Incident {code(incident_id)} snoozed by <@{user}> until {escape(until)} UTC; "
        "if its cause is still there after that, it is open again."
    )


def incident_already(*, incident_id: str, status: str) -> str:
    return f"Incident {code(incident_id)} is already {escape(status)}."


def rerun_posted(*, user: str) -> str:
    return f":repeat: Re-run by <@{user}>:"


def escalated(*, channel: str, user: str) -> str:
    return f":rotating_light: Escalated to {channel_link(channel)} by <@{user}>."


def escalation_summary(
    *, layer: str, headline: str, permalink: str | None, user: str, usergroup: str | None
) -> str:
    """What the owner's channel reads, mentioning the owner's user group when the playbook
    names one."""
    link = f" <{permalink}|Open the incident thread>" if permalink else ""
    summary = (
        f":rotating_light: <@{user}> escalates a GPU incident to you. "
        f"Failing layer: *{escape(layer)}*. {escape(headline)}.{link}"
    )
    return f"<!subteam^{usergroup}> {summary}" if is_usergroup(usergroup) else summary


def no_owner_channel() -> str:
    return ":warning: The owner route has no Slack channel configured; nothing to escalate to."


def escalation_failed(reason: str) -> str:
    return f":x: Could not post to the owner's channel: {escape(reason)}."


def incident_line(incident: Incident, *, cluster: bool) -> str:
    """One incident in a list: id, workload (and with `cluster` its cluster), layer, status."""
    where = code(f"{incident.namespace}/{incident.name}")
    if cluster:
        where += f" in {code(incident.cluster)}"
    layer = incident.failing_layer.value if incident.failing_layer else "not blocked"
    status = incident.status.value
    return f"• {code(str(incident.id))} {where}: {escape(layer)} ({escape(status)})"


def incident_detail(incident: Incident) -> str:
    """One incident on its own: its line, then its headline."""
    return f"{incident_line(incident, cluster=True)}\n{escape(incident.headline)}"


CLUSTER_STATES = {
    "synced": ":white_check_mark: synced",
    "syncing": ":hourglass_flowing_sand: syncing",
    "stale": ":warning: stale",
    "down": ":x: unreachable",
    "snapshot": ":camera: snapshot",
}


def cluster_line(status: SourceStatus, *, default: bool, sizes: bool) -> str:
    """One served cluster in `/gpu clusters`: name, cache state, and with `sizes` its size
    and trouble (`status.detail`, already blanked for those who may not read it)."""
    line = f"• {code(status.name)}{' (default here)' if default else ''}: "
    line += CLUSTER_STATES.get(status.state, escape(status.state))
    if sizes and status.state != "down":
        line += f", {status.nodes} nodes, {status.pods} pods"
    if status.detail:
        line += f" ({escape(truncate(status.detail, limit=200))})"
    return line


def no_clusters() -> str:
    return "No cluster is connected yet."


def stats_scope_yours() -> str:
    return "_Incidents in the namespaces you may see:_"


def stats_line(*, label: str, count: int) -> str:
    return f"• {escape(label)}: {count}"


def ask_answer(text: str, *, trusted: bool) -> str:
    """An `ask` answer. Only our own FAQ wording is `trusted`; model and check answers are
    escaped line by line (their lines are the answer's own: cluster values inside them were
    put on one line where they were read, in `assist.checks`)."""
    shown = text if trusted else "\n".join(escape(line) for line in text.split("\n"))
    return truncate(shown, limit=3000)


def model_overruled(why: str) -> str:
    return (
        f"_The language model's answer was discarded ({escape(why)}); "
        "this is the triage engine's answer._"
    )


def ask_unavailable() -> str:
    return (
        ":grey_question: I can answer the FAQ and `why is pod <pod> pending in namespace <ns>` "
        "here; other questions need the assistant, which is not enabled on this bot."
    )


def summary(text: str) -> str:
    return (
        f":speech_balloon: _Summary (written by a language model from the report):_ {escape(text)}"
    )
