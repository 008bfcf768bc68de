"""The accelerator components a cluster runs, recognised from their DaemonSets and pods.

Clusters do not follow one layout (each vendor module says what its components look like:
`triage.vendors`), and components run in any namespace.

The DaemonSets say which components exist, and their node selectors, affinity and tolerations
say which nodes each one serves: that, never a default namespace, decides which pods a node
should have. Without DaemonSets to read (a snapshot of pods only), the pods' own labels stand
in, and the nodes' labels decide.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from triage.cluster.objects import Obj, labels, meta, name_of, ns_of
from triage.cluster.selectors import node_selector_term_matches, taint_str, tolerates
from triage.vendors import component
from triage.vendors.nvidia import OPERATOR_OWNERS

# Taints a DaemonSet's pods tolerate without saying so (the DaemonSet controller adds them).
_DS_TOLERATED = "node.kubernetes.io/"


def pod_component(pod: Obj) -> tuple[str, str] | None:
    """(stack, role) of a pod judged by its own labels and name (no DaemonSet to go by)."""
    lab = labels(pod)
    name = name_of(pod)
    images = [c.get("image", "") for c in (pod.get("spec") or {}).get("containers") or []]
    found = component(name, lab, (), images)
    if found is not None:
        return found
    # Pod names are the DaemonSet's plus a suffix; the operator's labels say `app=<ds name>`.
    base = name.rsplit("-", 1)[0]
    return component(base, {}) if base != name else None


def _canon(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class Component:
    """One GPU component: a DaemonSet (or, without DaemonSets, the pods of one)."""

    stack: str
    role: str
    namespace: str
    name: str
    how: str  # how it was recognised, for the report
    # The pod template's placement as canonical JSON (what equality compares: a DaemonSet's
    # status changes every time one of its pods does), and parsed; None when unknown.
    placement: str | None = None
    parsed: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def of_daemonset(cls, ds: Obj) -> Component | None:
        owners = [str(r.get("kind")) for r in meta(ds).get("ownerReferences") or []]
        tpl = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
        images = [c.get("image", "") for c in tpl.get("containers") or []]
        tpl_meta = ((ds.get("spec") or {}).get("template") or {}).get("metadata") or {}
        lab = {**(tpl_meta.get("labels") or {}), **labels(ds)}
        found = component(name_of(ds), lab, owners, images)
        if found is None:
            return None
        how = f"owned by {owners[0]}" if owners and owners[0] in OPERATOR_OWNERS else "name"
        parsed = None
        if tpl:
            parsed = {
                "nodeSelector": tpl.get("nodeSelector") or {},
                "terms": (
                    ((tpl.get("affinity") or {}).get("nodeAffinity") or {}).get(
                        "requiredDuringSchedulingIgnoredDuringExecution"
                    )
                    or {}
                ).get("nodeSelectorTerms"),
                "tolerations": tpl.get("tolerations") or [],
            }
        placement = _canon(parsed) if parsed is not None else None
        return cls(found[0], found[1], ns_of(ds), name_of(ds), how, placement, parsed)

    def skips(self, node: Obj) -> str | None:
        """Why this DaemonSet puts no pod on `node` (None: it does; also None when unknown)."""
        p = self.parsed
        if p is None:
            return None
        node_labels = labels(node)
        for k, v in p["nodeSelector"].items():
            if node_labels.get(k) != v:
                have = node_labels.get(k)
                got = f"node has {k}={have}" if have is not None else "node lacks the label"
                return f"its nodeSelector wants {k}={v} ({got})"
        terms = p["terms"]
        if terms and not any(node_selector_term_matches(t, node) for t in terms):
            return "its required node affinity does not match the node's labels"
        tolerations = p["tolerations"]
        for taint in (node.get("spec") or {}).get("taints") or []:
            if taint.get("effect") not in ("NoSchedule", "NoExecute"):
                continue
            if str(taint.get("key", "")).startswith(_DS_TOLERATED):
                continue
            if not tolerates(tolerations, taint):
                return f"it does not tolerate the node's taint {taint_str(taint)}"
        return None


def pinned_node(pod: Obj) -> str | None:
    """The node a DaemonSet pod is meant for: its nodeName, or (still Pending) the node its
    `matchFields metadata.name` affinity pins it to."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    aff = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in aff.get("nodeSelectorTerms") or []:
        for f in term.get("matchFields") or []:
            if f.get("key") == "metadata.name" and f.get("values"):
                return str(f["values"][0])
    return None
