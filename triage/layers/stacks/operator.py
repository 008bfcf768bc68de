"""Where the GPU Operator runs, in any namespace: the configured override, the ClusterPolicy's
status, the DaemonSets it owns, or its operand pods."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from triage.cluster.objects import Obj, labels, name_of, ns_of
from triage.layers.stacks.components import Component, pod_component
from triage.vendors.nvidia import OPERATOR


@dataclass(frozen=True, slots=True)
class OperatorLocation:
    """Where the GPU Operator runs, and what told us."""

    namespace: str
    how: str


def active_policy(policies: list[Obj]) -> Obj | None:
    """The ClusterPolicy the operator acts on (it marks duplicates `ignored`)."""
    live = [p for p in policies if ((p.get("status") or {}).get("state")) != "ignored"]
    chosen = live or policies
    return chosen[0] if chosen else None


def locate_operator(
    *,
    override: str | None,
    policies: list[Obj],
    components: list[Component],
    pods: Iterable[Obj] = (),
) -> OperatorLocation | None:
    """Where the GPU Operator runs: the configured namespace, else the ClusterPolicy's
    `status.namespace`, else the namespace of the DaemonSets it owns, else of its operands."""
    if override:
        return OperatorLocation(override, "the operator_namespace override (--operator-namespace)")
    policy = active_policy(policies)
    status_ns = ((policy or {}).get("status") or {}).get("namespace")
    if policy is not None and status_ns:
        return OperatorLocation(str(status_ns), f"ClusterPolicy {name_of(policy)} status.namespace")
    owned = [c for c in components if c.stack == OPERATOR and c.how.startswith("owned by")]
    if owned:
        return OperatorLocation(owned[0].namespace, f"DaemonSets {owned[0].how}")
    operands = [c for c in components if c.stack == OPERATOR]
    if operands:
        return OperatorLocation(
            operands[0].namespace, f"operand DaemonSet {operands[0].name} (app={operands[0].name})"
        )
    for pod in pods:
        found = pod_component(pod)
        if found is not None and found[0] == OPERATOR:
            app = labels(pod).get("app") or name_of(pod)
            return OperatorLocation(ns_of(pod), f"operand pods (app={app})")
    if policy is not None:
        return OperatorLocation(
            "gpu-operator", f"ClusterPolicy {name_of(policy)} (no namespace in its status)"
        )
    return None


def component_namespaces(
    components: list[Component], operator: OperatorLocation | None
) -> list[str]:
    """The namespaces whose pods the view needs."""
    out = {c.namespace for c in components}
    if operator is not None:
        out.add(operator.namespace)
    return sorted(out)
