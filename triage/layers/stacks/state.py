"""GPU node basics and the state of a GPU component's pods on one node.

Is the node a GPU node (a vendor's, NFD's or a cloud's labels, or GPUs in capacity), is it Ready,
what does it advertise, and how are the driver, toolkit, device plugin or validator pods on it
doing, whichever stack runs them (see `view`). Judged from object state, never from
events alone, so the answer survives event expiry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from triage.cluster.objects import Obj, condition, name_of, ns_of, pod_problem
from triage.cluster.quantities import resources
from triage.vendors import is_accelerator, node_vendor

PREINSTALLED = ("false", "pre-installed")


def is_gpu_node(node: Obj) -> bool:
    """Whether the node carries a known vendor's accelerators (`triage.vendors.vendors_on`)."""
    return node_vendor(node) is not None


def node_ready(node: Obj) -> tuple[bool, str]:
    c = condition(node, "Ready")
    if c is None:
        return False, "no Ready condition reported"
    if c.get("status") == "True":
        return True, "Ready"
    why = c.get("reason") or c.get("status")
    msg = c.get("message")
    return False, f"Ready={c.get('status')} ({why}{': ' + msg if msg else ''})"


class PodsOnNodes(Protocol):
    def pods(self, node: str, role: str) -> list[Obj]: ...


@dataclass
class ComponentState:
    component: str
    ok: bool
    text: str  # tenant-safe one-liner
    detail: list[str] = field(default_factory=list)  # operator-only: pod names, messages
    pod: str = ""  # "namespace/name" of the pod the text is about


def _last_termination(pod: Obj) -> str | None:
    for cs in (pod.get("status") or {}).get("initContainerStatuses", []) + (
        (pod.get("status") or {}).get("containerStatuses") or []
    ):
        term = (cs.get("lastState") or {}).get("terminated") or (cs.get("state") or {}).get(
            "terminated"
        )
        if term and term.get("exitCode", 0) != 0:
            msg = " ".join(str(term.get("message") or "").split())
            if len(msg) > 300:  # the error is at the end of an installer's log
                msg = "…" + msg[-300:]
            return f"{cs.get('name')} last exited {term.get('exitCode')}" + (
                f": {msg}" if msg else ""
            )
    return None


def component_state(view: PodsOnNodes, node: str, component: str) -> ComponentState | None:
    """State of one GPU component on a node; None if no pod of it is meant for the node."""
    pods = view.pods(node, component)
    if not pods:
        return None
    problems: list[tuple[str, str]] = []
    detail = []
    for pod in pods:
        problem = pod_problem(pod)
        ref = f"{ns_of(pod)}/{name_of(pod)}"
        if problem:
            problems.append((pod_problem(pod, messages=False) or problem, ref))
            detail.append(f"pod {ref} on {node}: {problem}")
            last = _last_termination(pod)
            if last:
                detail.append(f"pod {ref}: {last}")
    if problems:
        text, ref = problems[0]
        return ComponentState(component, False, f"{component} pod {text}", detail, ref)
    ref = f"{ns_of(pods[0])}/{name_of(pods[0])}"
    return ComponentState(component, True, f"{component} pod running", [], ref)


def gpu_resources(node: Obj, *, key: str = "allocatable") -> dict[str, int]:
    raw = (node.get("status") or {}).get(key) or {}
    return {k: v for k, v in resources(raw).items() if is_accelerator(k)}


def failing_validation(view: PodsOnNodes, node: str) -> str | None:
    """Name of the validator init container that is stuck or failing on the node, if any."""
    for pod in view.pods(node, "validator"):
        for cs in (pod.get("status") or {}).get("initContainerStatuses") or []:
            state = cs.get("state") or {}
            if state.get("running") or (state.get("terminated") or {}).get("exitCode") == 0:
                if not cs.get("ready") and state.get("running"):
                    return str(cs.get("name"))
                continue
            return str(cs.get("name"))
    return None
