"""What a button carries and which button it is: the actions the core answers and the values
it puts on them, in any chat.

A value is whatever the press says, so reading one checks it like typed input: names are
validated as Kubernetes names, and the handler believes nothing else of it (`bot.core.buttons`
loads the incident it names and checks the presser's grants against that).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum

from triage import validate_cluster, validate_namespace
from triage.fleet import Group
from triage.named import parse_target

# The smallest limit a chat puts on a button's value (Slack's): ours are far below it.
MAX_VALUE = 2000


class Action(StrEnum):
    """The buttons the core answers, by the id the chat sends back for a press."""

    RERUN = "gpu_rerun"  # a new report in the incident's thread
    RESOLVE = "gpu_resolve"  # resolve the incident, remove the buttons
    ACKNOWLEDGE = "gpu_ack"  # acknowledge the incident: someone is on it
    SNOOZE = "gpu_snooze"  # acknowledge it for SNOOZE_HOURS; its cause after that reopens it
    ESCALATE = "gpu_escalate"  # a summary in the owner route's channel
    GROUP_THREAD = "gpu_group_thread"  # the fleet view: a link to a group's incident thread


REPORT_ACTIONS = (
    Action.RERUN,
    Action.RESOLVE,
    Action.ESCALATE,
    Action.ACKNOWLEDGE,
    Action.SNOOZE,
)
SNOOZE_HOURS = 4  # what the Snooze button gives (the CLI's `snooze --until` takes any time)


@dataclass(frozen=True)
class ButtonRef:
    """What a report's button press needs to find its triage again: the workload, and its
    incident when the report opened or continued one."""

    cluster: str | None
    namespace: str
    name: str
    incident_id: str | None = None

    def to_value(self) -> str:
        raw = {"c": self.cluster, "n": self.namespace, "p": self.name, "i": self.incident_id}
        value = json.dumps(raw, separators=(",", ":"))
        if len(value) > MAX_VALUE:  # cannot happen with DNS-1123 names; guard anyway
            raise ValueError("button value too long")
        return value

    @classmethod
    def from_value(cls, value: str) -> ButtonRef:
        """The reference a button carries; ValueError for anything malformed (a value is
        whatever a payload says: its names are checked like typed ones)."""
        try:
            raw = json.loads(value)
        except RecursionError:
            raise ValueError("malformed button value") from None
        if not isinstance(raw, dict):
            raise ValueError("malformed button value")
        cluster, namespace, name, incident = (
            raw.get("c"),
            raw.get("n"),
            raw.get("p", ""),
            raw.get("i"),
        )
        if not (
            isinstance(namespace, str)
            and isinstance(name, str)
            and (cluster is None or isinstance(cluster, str))
            and (
                incident is None
                or (isinstance(incident, str | int) and not isinstance(incident, bool))
            )
        ):
            raise ValueError("malformed button value")
        validate_namespace(namespace)  # InvalidNameError is a ValueError
        if parse_target(name).namespace is not None:  # NAME or KIND/NAME, as typed
            raise ValueError("malformed button value")
        if cluster is not None:
            validate_cluster(cluster)
        return cls(cluster, namespace, name, None if incident is None else str(incident))


def group_value(group: Group) -> str:
    """The value of a group's "Incident thread" button: its cluster and cause key."""
    return json.dumps({"c": group.cluster, "k": group.key}, separators=(",", ":"))[:MAX_VALUE]


def parse_group_value(value: str) -> tuple[str, str]:
    """(cluster, key) of a group button; ValueError for anything else."""
    raw = json.loads(value)
    if not isinstance(raw, dict) or not all(isinstance(raw.get(k), str) for k in ("c", "k")):
        raise ValueError("malformed group button value")
    return raw["c"], raw["k"]
