"""A node in its operator's rolling driver upgrade: cordoned on purpose, not for maintenance.

The GPU Operator's upgrade controller (NVIDIA/k8s-operator-libs) walks each node through
states it writes in a node label (`Vendor.driver_upgrade`): upgrade-required (waiting its
turn, still schedulable), cordon-required, wait-for-jobs-required (cordoned, waiting for the
pods its policy's `waitForCompletion.podSelector` selects to finish), pod-deletion-required,
drain-required, pod-restart-required (the driver pod restarts with the new version),
validation-required, uncordon-required, then upgrade-done; upgrade-failed when a step failed
(the node stays cordoned). A pod kept off such a node waits on the driver upgrade: that is the
driver layer's, routed to whoever runs the GPU stack, never an ordinary cordon; a failed
upgrade is a driver failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from triage.cluster.events import parse_time
from triage.cluster.objects import Obj, annotations_of, labels, name_of
from triage.layers.node_verdict import NodeVerdict
from triage.layers.stacks.state import ComponentState
from triage.vendors import VENDORS, Vendor

# What the controller is doing to the node in each state that holds pods off it.
_DOING = {
    "cordon-required": "is cordoning the node",
    "wait-for-jobs-required": "cordoned the node and waits for the jobs running there to finish",
    "pod-deletion-required": "cordoned the node and is deleting the GPU pods still on it",
    "drain-required": "cordoned the node and is draining it",
    "node-maintenance-required": "cordoned the node and handed it to a NodeMaintenance",
    "post-maintenance-required": "cordoned the node and finishes its maintenance",
    "pod-restart-required": "cordoned the node and restarts its driver pod with the new version",
    "validation-required": "cordoned the node and waits for the new driver to pass validation",
    "uncordon-required": "upgraded the driver and is about to uncordon the node",
}
FAILED = "upgrade-failed"
# States in which the controller waits for pods still on the node (the report names them).
WAITS_FOR_PODS = ("wait-for-jobs-required", "pod-deletion-required", "drain-required")


@dataclass(frozen=True, slots=True)
class UpgradeState:
    vendor: Vendor
    state: str
    since: datetime | None  # when the state (or, failing that, the cordon) began
    cordon: bool  # the node is unschedulable

    @property
    def label(self) -> str:
        up = self.vendor.driver_upgrade
        return f"{up.state_label}={self.state}" if up else self.state

    def when(self) -> str:
        """ " since 2026-12-02 11:40 UTC", or "" when nothing dates it."""
        return f" since {self.since.strftime('%Y-%m-%d %H:%M')} UTC" if self.since else ""


def upgrade_state(node: Obj) -> UpgradeState | None:
    """The node's driver upgrade state, when an operator's upgrade controller set one that
    matters (not "upgrade-done", not empty)."""
    lab = labels(node)
    for vendor in VENDORS:
        up = vendor.driver_upgrade
        state = lab.get(up.state_label) if up else None
        if up is None or not state or state in ("upgrade-done", "upgrade-required"):
            continue
        ann = annotations_of(node)
        since = _unix(ann.get(up.since.get(state, ""))) or _cordoned_at(node)
        cordon = bool((node.get("spec") or {}).get("unschedulable"))
        return UpgradeState(vendor, state, since, cordon)
    return None


def _unix(value: object) -> datetime | None:
    try:
        return datetime.fromtimestamp(int(str(value)), tz=UTC) if value else None
    except (ValueError, OverflowError, OSError):
        return None


def _cordoned_at(node: Obj) -> datetime | None:
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("key") == "node.kubernetes.io/unschedulable":
            return parse_time(taint.get("timeAdded"))
    return None


def upgrade_verdict(
    node: Obj, *, has_gpus: bool, driver: ComponentState | None
) -> NodeVerdict | None:
    """The driver layer's verdict on a node its operator is upgrading, when the upgrade holds
    pods off it (cordoned, or its GPUs gone while the driver restarts), or failed."""
    found = upgrade_state(node)
    if found is None:
        return None
    name, vendor = name_of(node), found.vendor.name
    pod_text = f"; {driver.text}" if driver is not None and not driver.ok else ""
    detail = list(driver.detail) if driver is not None else []
    pod = driver.pod if driver is not None and not driver.ok else ""
    values = {"upgrade_state": found.state, "upgrade_label": found.label}
    if found.state == FAILED:
        return NodeVerdict(
            False,
            "driver.upgrade-failed",
            f"node {name}: the {vendor} driver upgrade failed ({found.label}{found.when()}); "
            f"the upgrade controller left the node "
            f"{'cordoned' if found.cordon else 'as it was'}{pod_text}",
            detail,
            pod,
            values,
        )
    doing = _DOING.get(found.state)
    if doing is None or not (found.cordon or not has_gpus or pod_text):
        return None  # a state this engine does not know, or one that holds nothing off
    return NodeVerdict(
        False,
        "driver.upgrade-in-progress",
        f"node {name}: {vendor} driver upgrade in progress ({found.label}{found.when()}): the "
        f"GPU Operator's upgrade controller {doing}{pod_text}",
        detail,
        pod,
        values,
    )


def selector_matches(selector: str, pod_labels: dict[str, str]) -> bool | None:
    """Whether a label selector in its string form ("app=train,tier!=web", "job-name",
    "!canary") matches; None for a form this does not read (set-based `in (…)`)."""
    for part in (p.strip() for p in selector.split(",") if p.strip()):
        if "(" in part:
            return None
        if "!=" in part:
            key, _, value = part.partition("!=")
            if pod_labels.get(key.strip()) == value.strip():
                return False
        elif "=" in part:
            key, _, value = part.replace("==", "=").partition("=")
            if pod_labels.get(key.strip()) != value.strip():
                return False
        elif part.startswith("!"):
            if part[1:].strip() in pod_labels:
                return False
        elif part not in pod_labels:
            return False
    return True
