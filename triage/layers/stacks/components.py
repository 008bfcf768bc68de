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
from triage.cluster.selectors import (
    match_expression,
    node_selector_term_matches,
    taint_str,
    tolerates,
)
from triage.vendors import component
from triage.vendors.nvidia import OPERATOR_OWNERS

# node-feature-discovery's worker: not a GPU component, but the GPU Operator labels (and so
# runs its operands on) only the nodes it has labelled.
NFD, NFD_WORKER = "node-feature-discovery", "nfd-worker"
# Taints a DaemonSet's pods tolerate without saying so (the DaemonSet controller adds them).
_DS_TOLERATED = "node.kubernetes.io/"


def pod_component(pod: Obj) -> tuple[str, str] | None:
    """(stack, role) of a pod judged by its own labels and name (no DaemonSet to go by)."""
    lab = labels(pod)
    name = name_of(pod)
    images = [c.get("image") or "" for c in (pod.get("spec") or {}).get("containers") or []]
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
        images = [c.get("image") or "" for c in tpl.get("containers") or []]
        tpl_meta = ((ds.get("spec") or {}).get("template") or {}).get("metadata") or {}
        lab = {**(tpl_meta.get("labels") or {}), **labels(ds)}
        found = component(name_of(ds), lab, owners, images)
        if found is None:
            return None
        how = f"owned by {owners[0]}" if owners and owners[0] in OPERATOR_OWNERS else "name"
        parsed = _placement(tpl)
        placement = _canon(parsed) if parsed is not None else None
        return cls(found[0], found[1], ns_of(ds), name_of(ds), how, placement, parsed)

    @classmethod
    def nfd_worker(cls, ds: Obj) -> Component | None:
        """node-feature-discovery's worker DaemonSet (its Helm chart, the GPU Operator's
        bundled copy, the kustomize deployment): it writes the `feature.node.kubernetes.io/*`
        labels (the PCI vendor label the GPU Operator labels its nodes by)."""
        tpl_all = (ds.get("spec") or {}).get("template") or {}
        tpl = tpl_all.get("spec") or {}
        lab = {**((tpl_all.get("metadata") or {}).get("labels") or {}), **labels(ds)}
        name = name_of(ds)
        images = " ".join(str(c.get("image", "")) for c in tpl.get("containers") or [])
        chart = lab.get("app.kubernetes.io/name") == "node-feature-discovery"
        worker = lab.get("role") == "worker" or name.endswith("worker")
        if not ((chart or "node-feature-discovery" in images or name.startswith("nfd-"))
                and worker):  # fmt: skip
            return None
        parsed = _placement(tpl)
        placement = _canon(parsed) if parsed is not None else None
        return cls(NFD, NFD_WORKER, ns_of(ds), name, "name", placement, parsed)

    def skips(self, node: Obj) -> str | None:
        """Why this DaemonSet puts no pod on `node` (None: it does; also None when unknown)."""
        if self.parsed is None:
            return None
        reasons = skip_reasons(self.parsed, node)
        return ", and ".join(reasons) if reasons else None


# Node labels that say what a node's images must be built for: a DaemonSet excluding them
# ships no image for that CPU architecture or OS (or was told not to run there).
_PLATFORM_KEYS = {
    "kubernetes.io/arch": "CPU architecture",
    "beta.kubernetes.io/arch": "CPU architecture",
    "kubernetes.io/os": "operating system",
    "beta.kubernetes.io/os": "operating system",
}


def _expr_str(expr: Obj) -> str:
    values = expr.get("values") or []
    shown = f" ({', '.join(map(str, values))})" if values else ""
    return f"{expr.get('key')} {expr.get('operator')}{shown}"


def skip_reasons(placement: dict[str, Any], node: Obj) -> list[str]:
    """Why a DaemonSet with this pod-template placement (`nodeSelector`, required affinity
    `terms`, `tolerations`) puts no pod on `node`, most fundamental first: the CPU architecture
    or OS it excludes, the taints it does not tolerate (key, value, effect), then the
    nodeSelector entries and affinity expressions the node's labels fail. Empty: it runs there.
    The taints the DaemonSet controller tolerates by itself are ignored."""
    node_labels = labels(node)
    platform: list[str] = []
    other: list[str] = []

    def has(key: str) -> str:
        value = node_labels.get(key)
        return f"the node has {key}={value}" if value is not None else "the node lacks the label"

    for k, v in (placement.get("nodeSelector") or {}).items():
        if node_labels.get(k) == v:
            continue
        if k in _PLATFORM_KEYS:
            platform.append(f"it excludes the node's {_PLATFORM_KEYS[k]}: its nodeSelector "
                            f"wants {k}={v} ({has(k)})")  # fmt: skip
        else:
            other.append(f"its nodeSelector wants {k}={v} ({has(k)})")
    terms = placement.get("terms")
    if terms and not any(node_selector_term_matches(t, node) for t in terms):
        failing = [
            e for t in terms for e in t.get("matchExpressions") or []
            if not match_expression(e, node_labels)
        ]  # fmt: skip
        keys = {str(e.get("key")) for e in failing}
        if failing and keys <= _PLATFORM_KEYS.keys():
            e = failing[0]
            key = str(e.get("key"))
            platform.append(f"it excludes the node's {_PLATFORM_KEYS[key]}: its required node "
                            f"affinity wants {_expr_str(e)} ({has(key)})")  # fmt: skip
        elif failing:
            e = next(x for x in failing if str(x.get("key")) not in _PLATFORM_KEYS)
            other.append(f"its required node affinity wants {_expr_str(e)} "
                         f"({has(str(e.get('key')))})")  # fmt: skip
        else:
            other.append("its required node affinity does not match the node")
    taints: list[str] = []
    tolerations = placement.get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if str(taint.get("key", "")).startswith(_DS_TOLERATED):
            continue
        if not tolerates(tolerations, taint):
            taints.append(f"it does not tolerate the node's taint {taint_str(taint)}")
    return platform + taints + other


def _placement(tpl: Obj) -> dict[str, Any] | None:
    """A pod template's placement: nodeSelector, required affinity terms, tolerations."""
    if not tpl:
        return None
    return {
        "nodeSelector": tpl.get("nodeSelector") or {},
        "terms": (
            ((tpl.get("affinity") or {}).get("nodeAffinity") or {}).get(
                "requiredDuringSchedulingIgnoredDuringExecution"
            )
            or {}
        ).get("nodeSelectorTerms"),
        "tolerations": tpl.get("tolerations") or [],
    }


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
