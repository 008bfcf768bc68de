"""Kubelet's admission refusals read closely: what the device manager's "Allocate failed"
says, where a node shows its Topology Manager policy, and which of the pod's node labels the
node no longer carries.

Kubelet admits a pod after the scheduler bound it, with its own counts and policies: its
device manager's `UnexpectedAdmissionError` ("Allocate failed due to requested number of
devices unavailable for nvidia.com/gpu. Requested: 1, Available: 0, which is unexpected";
"… can't allocate unhealthy devices …"; "… cannot allocate unregistered device …", a plugin
not registered since kubelet restarted; an rpc error from the plugin's Allocate), its
Topology Manager's `TopologyAffinityError` ("Resources cannot be allocated with Topology
locality"), and the scheduler's predicates run again (`NodeAffinity`: the node's labels
changed after binding).
"""

from __future__ import annotations

import re

from triage.cluster.objects import Obj

_UNAVAILABLE = re.compile(
    r"requested number of devices unavailable for (\S+?)\.? Requested: (\d+), Available: (\d+)"
)
_UNHEALTHY = re.compile(r"can't allocate unhealthy devices (\S+?),?\s")
_UNREGISTERED = re.compile(r"cannot allocate unregistered device (\S+?)[,.]?(?:\s|$)")


def allocate_cause(message: str) -> tuple[str, dict[str, str]]:
    """Why kubelet's device manager could not allocate the pod's devices, in words, and the
    resource it names (empty when the message says nothing more)."""
    found = _UNAVAILABLE.search(message)
    if found:
        res, want, have = found.groups()
        return (f"its device manager had {have} healthy {res} left where the pod asked {want}",
                {"resource": res})  # fmt: skip
    found = _UNREGISTERED.search(message)
    if found:
        return (f"no device plugin is registered for {found.group(1)} (kubelet restarted and "
                "the plugin has not registered again)", {"resource": found.group(1)})  # fmt: skip
    found = _UNHEALTHY.search(message)
    if found:
        return (f"the devices of {found.group(1)} it picked are unhealthy",
                {"resource": found.group(1)})  # fmt: skip
    if "rpc error" in message:
        return "the device plugin's Allocate call failed", {}
    return "the device plugin could not allocate its GPUs", {}


# Where a node may show its kubelet's Topology Manager settings: labels some platforms and
# NFD rules write (kubelet itself publishes them nowhere on the Node object).
_TOPOLOGY_KEYS = ("topology-manager-policy", "topologyManagerPolicy", "topology-manager-scope",
                  "topologyManagerScope")  # fmt: skip


def topology_shown(node_labels: dict[str, str] | None) -> str:
    """The node's Topology Manager policy and scope where its labels show them, else a line
    saying the node does not show them."""
    shown = sorted(f"{k}={v}" for k, v in (node_labels or {}).items() if k.endswith(_TOPOLOGY_KEYS))
    if shown:
        return "node labels: " + ", ".join(shown)
    return ("the node does not show its Topology Manager policy or scope (kubelet "
            "configuration topologyManagerPolicy/topologyManagerScope, not on the Node object)")  # fmt: skip


def affinity_mismatch(pod: Obj, node_labels: dict[str, str] | None) -> list[str]:
    """The pod's nodeSelector entries the node's labels no longer satisfy."""
    if node_labels is None:
        return []
    out = []
    for key, want in ((pod.get("spec") or {}).get("nodeSelector") or {}).items():
        have = node_labels.get(key)
        if have != want:
            now = f"node has {key}={have}" if have is not None else "node lacks the label"
            out.append(f"pod spec.nodeSelector {key}={want}; {now}")
    return out
