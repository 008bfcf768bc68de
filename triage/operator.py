"""What the GPU Operator says about each node: is it a GPU node, is its driver up, is the
device plugin advertising GPUs.

Node health is judged from object state (node labels, capacity, conditions and the operator's
per-node pods), never from events alone, so the answer survives event expiry.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from triage.kubeobj import (
    GPU,
    MIG_PREFIX,
    condition,
    labels,
    name_of,
    ns_of,
    pod_problem,
    resources,
)
from triage.source import Obj

# Component → values of the pod's `app` label (and name prefixes) the operator uses.
COMPONENTS: dict[str, tuple[str, ...]] = {
    "driver": ("nvidia-driver-daemonset", "nvidia-vgpu-manager-daemonset"),
    "toolkit": ("nvidia-container-toolkit-daemonset",),
    "device-plugin": ("nvidia-device-plugin-daemonset", "nvidia-device-plugin"),
    "validator": ("nvidia-operator-validator",),
    "gfd": ("gpu-feature-discovery",),
    "dcgm-exporter": ("nvidia-dcgm-exporter",),
    "mig-manager": ("nvidia-mig-manager",),
}
PREINSTALLED = ("false", "pre-installed")
GPU_NODE_LABELS = (
    ("nvidia.com/gpu.present", "true"),
    ("feature.node.kubernetes.io/pci-10de.present", "true"),
)


def component_of(pod: Obj) -> str | None:
    lab = labels(pod)
    app = lab.get("app") or lab.get("app.kubernetes.io/component") or ""
    name = name_of(pod)
    for comp, prefixes in COMPONENTS.items():
        if any(app == p or app.startswith(p) or name.startswith(p + "-") for p in prefixes):
            return comp
    return None


def is_gpu_node(node: Obj) -> bool:
    lab = labels(node)
    if any(lab.get(k) == v for k, v in GPU_NODE_LABELS):
        return True
    cap = (node.get("status") or {}).get("capacity") or {}
    return any(k == GPU or k.startswith(MIG_PREFIX) for k in cap)


def node_ready(node: Obj) -> tuple[bool, str]:
    c = condition(node, "Ready")
    if c is None:
        return False, "no Ready condition reported"
    if c.get("status") == "True":
        return True, "Ready"
    why = c.get("reason") or c.get("status")
    msg = c.get("message")
    return False, f"Ready={c.get('status')} ({why}{': ' + msg if msg else ''})"


@dataclass
class OperatorView:
    """The operator's pods indexed by node, plus cluster-wide driver strategy."""

    namespace: str
    pods_by_node: dict[str, dict[str, list[Obj]]] = field(default_factory=dict)
    installed: bool = False
    driver_enabled: bool = True
    plugin_enabled: bool = True
    policy_state: str | None = None

    @classmethod
    def build(cls, *, namespace: str, pods: Iterable[Obj], policies: list[Obj]) -> OperatorView:
        view = cls(namespace=namespace)
        for pod in pods:
            comp = component_of(pod)
            node = (pod.get("spec") or {}).get("nodeName")
            if comp is None:
                continue
            view.installed = True
            if node:
                view.pods_by_node.setdefault(node, {}).setdefault(comp, []).append(pod)
        if policies:
            view.installed = True
            spec = policies[0].get("spec") or {}
            view.driver_enabled = (spec.get("driver") or {}).get("enabled", True) is not False
            view.plugin_enabled = (spec.get("devicePlugin") or {}).get("enabled", True) is not False
            view.policy_state = (policies[0].get("status") or {}).get("state")
        return view

    @property
    def flags(self) -> tuple[str, bool, bool, bool]:
        """What, besides a node's own operator pods, its health depends on."""
        return (self.namespace, self.installed, self.driver_enabled, self.plugin_enabled)

    def node_pods(self, node: str) -> tuple[Obj, ...]:
        """All operator pods on the node, in a stable order (for change detection)."""
        return tuple(
            p
            for comp in sorted(self.pods_by_node.get(node, {}))
            for p in self.pods_by_node[node][comp]
        )

    def pods(self, node: str, component: str) -> list[Obj]:
        return self.pods_by_node.get(node, {}).get(component, [])

    def plugin_deployed(self, node: Obj) -> bool:
        """False where the device plugin is switched off (DRA nodes, or disabled by policy)."""
        if not self.plugin_enabled:
            return False
        return labels(node).get("nvidia.com/gpu.deploy.device-plugin", "true") != "false"

    def driver_managed(self, node: Obj) -> bool:
        """False where the driver is pre-installed on the host (so no driver pod is expected)."""
        if not self.installed or not self.driver_enabled:
            return False
        return labels(node).get("nvidia.com/gpu.deploy.driver", "true") not in PREINSTALLED


@dataclass
class ComponentState:
    component: str
    ok: bool
    text: str  # tenant-safe one-liner
    detail: list[str] = field(default_factory=list)  # operator-only: pod names, messages


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


def component_state(view: OperatorView, node: str, component: str) -> ComponentState | None:
    """State of one operator component on a node; None if no such pod runs there."""
    pods = view.pods(node, component)
    if not pods:
        return None
    problems = []
    detail = []
    for pod in pods:
        problem = pod_problem(pod)
        ref = f"{ns_of(pod)}/{name_of(pod)}"
        if problem:
            problems.append(pod_problem(pod, messages=False) or problem)
            detail.append(f"pod {ref} on {node}: {problem}")
            last = _last_termination(pod)
            if last:
                detail.append(f"pod {ref}: {last}")
    if problems:
        return ComponentState(component, False, f"{component} pod {problems[0]}", detail)
    return ComponentState(component, True, f"{component} pod running", [])


def gpu_resources(node: Obj, *, key: str = "allocatable") -> dict[str, int]:
    raw = (node.get("status") or {}).get(key) or {}
    return {k: v for k, v in resources(raw).items() if k.startswith("nvidia.com/")}


def failing_validation(view: OperatorView, node: str) -> str | None:
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
