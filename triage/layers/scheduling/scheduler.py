"""Reading what kube-scheduler said: `FailedScheduling` messages and the PodScheduled condition.

The message has the shape "0/9 nodes are available: 3 Insufficient nvidia.com/gpu, 2 node(s)
had untolerated taint {k: v}. preemption: 0/9 nodes are available: …". We parse it into counts
per reason so the report can set the scheduler's words beside our own node-by-node evaluation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from triage.cluster.events import Event
from triage.cluster.objects import Obj, condition
from triage.layers.scheduling.registry import SCHEDULER_WORDS

_HEAD = re.compile(r"^\s*(\d+)/(\d+) nodes are available(?::\s*(.*))?$", re.DOTALL)
_ITEM_SPLIT = re.compile(r",\s+(?=\d+ )")
_ITEM = re.compile(r"^(\d+)\s+(.+?)\.?$")

# Reasons from the scheduler's plugins mapped to the category we report them under: what
# each filter of the registry says it corresponds to.
CATEGORIES: tuple[tuple[str, str], ...] = SCHEDULER_WORDS


def category(reason: str) -> str:
    for needle, cat in CATEGORIES:
        if needle.lower() in reason.lower():
            return cat
    return "other"


@dataclass
class SchedulerMessage:
    available: int
    total: int
    reasons: dict[str, int] = field(default_factory=dict)
    preemption: dict[str, int] = field(default_factory=dict)
    raw: str = ""

    def categories(self) -> set[str]:
        return {category(r) for r in self.reasons}


def _items(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    text = text.strip().rstrip(".")
    for part in _ITEM_SPLIT.split(text):
        m = _ITEM.match(part.strip())
        if m:
            out[m.group(2).strip()] = out.get(m.group(2).strip(), 0) + int(m.group(1))
        elif part.strip():
            out[part.strip()] = out.get(part.strip(), 0) + 1
    return out


def parse(message: str) -> SchedulerMessage | None:
    """Parse a FailedScheduling message; None if it does not have the scheduler's shape."""
    text = " ".join(message.split())
    main, _, preempt = text.partition(" preemption: ")
    m = _HEAD.match(main)
    if not m:
        return None
    parsed = SchedulerMessage(available=int(m.group(1)), total=int(m.group(2)), raw=text)
    parsed.reasons = _items(m.group(3) or "")
    if preempt:
        pm = _HEAD.match(preempt)
        parsed.preemption = _items(pm.group(3) or "") if pm else _items(preempt)
    return parsed


def latest_failed_scheduling(pod: Obj, events: list[Event]) -> tuple[str, str] | None:
    """(message, where it came from), from the newest event or else the PodScheduled condition."""
    for ev in events:
        # Karpenter writes FailedScheduling too, in its own words (`autoscaler` reads it).
        if (
            ev.reason == "FailedScheduling"
            and ev.message
            and not ev.message.startswith("Failed to schedule pod")
        ):
            times = f", seen {ev.times} times" if ev.times > 1 else ""
            return ev.message, f"event FailedScheduling{times}"
    cond = condition(pod, "PodScheduled")
    if cond and cond.get("status") == "False" and cond.get("message"):
        return str(
            cond["message"]
        ), f"PodScheduled condition ({cond.get('reason', 'Unschedulable')})"
    return None
