"""Which GPU stack serves each node, and what each of its roles should look like there.

`StackView` is read once per change of the GPU components (DaemonSets, ClusterPolicy, their
pods) and says, per node, which stacks serve it (`NodePlan`): which DaemonSets target it for
each role (driver, toolkit, device plugin, feature discovery, validator, MIG manager, DRA kubelet
plugin), which roles a label or the ClusterPolicy switches off there, and which the host itself
provides (a driver in the node image, a device plugin run by the host). The node checks then
judge each role by that plan: a node whose stack has no driver pod is never asked for one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from triage.cluster.memo import IdentityMemo
from triage.cluster.objects import Obj, labels, name_of, ns_of, owner
from triage.layers.stacks.components import (
    DEPLOY_KEY,
    OPERATOR,
    STACK_TITLES,
    Component,
    pinned_node,
    pod_component,
)

# Reads every object of a kind (in a namespace, or cluster-wide for None); None when the
# credentials may not list it.
Reader = Callable[[str, "str | None"], "list[Obj] | None"]


@dataclass(frozen=True, slots=True)
class OperatorLocation:
    """Where the GPU Operator runs, and what told us."""

    namespace: str
    how: str


@dataclass(slots=True)
class Expectation:
    """What one role looks like on one node."""

    role: str
    serving: list[Component] = field(default_factory=list)  # DaemonSets that target the node
    skipping: list[tuple[Component, str]] = field(default_factory=list)  # ... that skip it, why
    disabled: str | None = None  # the label or policy that switches the role off here
    paused: str | None = None  # the label that pauses it (driver upgrade, MIG change)
    host: str | None = None  # provided outside Kubernetes (node image, host service)
    expected: bool = False  # a pod of this role should run on the node


@dataclass(slots=True)
class NodePlan:
    """The GPU stack one node runs: which stacks serve it and what each role expects."""

    stacks: tuple[str, ...]
    platform: str | None
    roles: dict[str, Expectation]
    inferred: bool = False  # no DaemonSet templates to go by: judged from labels and pods

    def role(self, name: str) -> Expectation:
        return self.roles.get(name) or Expectation(name)

    @property
    def dra_only(self) -> bool:
        """GPUs reach pods only through DRA here: a DRA kubelet plugin and no device plugin."""
        plugin = self.role("device-plugin")
        return self.role("dra-plugin").expected and not plugin.expected and not plugin.host

    def describe(self) -> str:
        parts = [STACK_TITLES[s] for s in self.stacks]
        driver = self.role("driver")
        if driver.host:
            parts.append(f"driver {driver.host}")
        elif driver.disabled:
            parts.append(f"driver switched off ({driver.disabled})")
        plugin = self.role("device-plugin")
        if plugin.host:
            parts.append(f"device plugin {plugin.host}")
        text = ", ".join(parts) or "no GPU components found"
        return text + (f" ({self.platform})" if self.platform else "")


def platform_of(node: Obj) -> str | None:
    lab = labels(node)
    provider = str((node.get("spec") or {}).get("providerID") or "")
    if "cloud.google.com/gke-nodepool" in lab or "cloud.google.com/gke-accelerator" in lab:
        return "GKE"
    if lab.get("eks.amazonaws.com/compute-type") == "auto":
        return "EKS Auto Mode"
    if any(k.startswith(("eks.amazonaws.com/", "karpenter.k8s.aws/")) for k in lab):
        return "EKS"
    if any(k.startswith("kubernetes.azure.com/") for k in lab) or provider.startswith("azure://"):
        return "AKS"
    if "node.openshift.io/os_id" in lab:
        return "OpenShift"
    if provider.startswith("aws://"):
        return "AWS"
    return None


def _host_plugin(node: Obj, platform: str | None) -> str | None:
    """Where the device plugin runs on the host itself, with no pod."""
    if platform == "EKS Auto Mode":
        return "runs on the host (EKS Auto Mode)"
    os_image = str(((node.get("status") or {}).get("nodeInfo") or {}).get("osImage") or "")
    if "bottlerocket" in os_image.lower():
        return "runs on the host (Bottlerocket's nvidia-k8s-device-plugin service)"
    return None


# How the driver reaches a node whose stack runs no driver pod, by platform.
_HOST_DRIVER = {
    "EKS": "pre-installed (EKS accelerated AMI)",
    "EKS Auto Mode": "pre-installed (managed by EKS Auto Mode)",
    "AWS": "pre-installed (node image)",
    "AKS": "pre-installed (installed by AKS with the node image)",
}
# The GPU Operator's operands for container workloads (the mig-manager only on MIG nodes).
_OPERANDS = ("driver", "toolkit", "device-plugin", "validator", "gfd", "dcgm-exporter")
# ClusterPolicy spec keys of the roles it can switch off cluster-wide.
_POLICY_KEY = {
    "driver": "driver",
    "toolkit": "toolkit",
    "device-plugin": "devicePlugin",
    "gfd": "gfd",
    "dcgm-exporter": "dcgmExporter",
    "mig-manager": "migManager",
}


class StackView:
    """The cluster's GPU components, their pods indexed by node, and where the operator runs.

    Node health depends on this view only through `flags` (what every node's plan reads) and
    `node_pods` (one node's pods), so a pod change elsewhere leaves a node's health standing.
    """

    def __init__(
        self,
        *,
        components: list[Component],
        pods: Iterable[Obj],
        policies: list[Obj],
        operator: OperatorLocation | None,
        daemonsets_known: bool,
    ) -> None:
        self.components = [c for c in components if c.role != "other"]
        self.operator = operator
        self.namespace = operator.namespace if operator else None
        self.inferred = not daemonsets_known or any(c.parsed is None for c in self.components)
        policy = _active_policy(policies)
        spec = (policy or {}).get("spec") or {}
        self.policy_name = name_of(policy) if policy else None
        self.policy_state = ((policy or {}).get("status") or {}).get("state")
        self.policy_off = {
            role: f"ClusterPolicy {self.policy_name} {key}.enabled=false"
            for role, key in _POLICY_KEY.items()
            if (spec.get(key) or {}).get("enabled", True) is False
        }
        self.runtime_class = str((spec.get("operator") or {}).get("runtimeClass") or "nvidia")
        self.pods_by_node: dict[str, dict[str, list[Obj]]] = {}
        self.stacks_seen: dict[str, set[str]] = {}  # stack -> namespaces its pods run in
        by_ds = {(c.namespace, c.name): c for c in components}
        for pod in pods:
            found = _pod_role(pod, by_ds)
            if found is None:
                continue
            stack, role = found
            self.stacks_seen.setdefault(stack, set()).add(ns_of(pod))
            node = pinned_node(pod)
            if node and role != "other":
                self.pods_by_node.setdefault(node, {}).setdefault(role, []).append(pod)
        for c in self.components:
            self.stacks_seen.setdefault(c.stack, set()).add(c.namespace)
        self.flags = (
            self.namespace,
            tuple(self.components),
            tuple(sorted(self.policy_off.items())),
            self.inferred,
        )

    def playbook_values(self) -> dict[str, str]:
        """Placeholders the playbook may use when the GPU Operator runs here."""
        if self.operator is None:
            return {}
        out = {"operator_namespace": self.operator.namespace, "runtime_class": self.runtime_class}
        if self.policy_name:
            out["cluster_policy"] = self.policy_name
        return out

    @property
    def installed(self) -> bool:
        """The GPU Operator runs in this cluster."""
        return self.operator is not None

    def node_pods(self, node: str) -> tuple[Obj, ...]:
        """All GPU component pods on the node, in a stable order (for change detection)."""
        roles = self.pods_by_node.get(node, {})
        return tuple(p for role in sorted(roles) for p in roles[role])

    def pods(self, node: str, role: str) -> list[Obj]:
        return self.pods_by_node.get(node, {}).get(role, [])

    def plan(self, node: Obj) -> NodePlan:
        """Which stacks serve `node` and what each role expects there."""
        name = name_of(node)
        lab = labels(node)
        platform = platform_of(node)
        roles: dict[str, Expectation] = {}
        stacks: list[str] = []
        for comp in self.components:
            exp = roles.setdefault(comp.role, Expectation(comp.role))
            why = comp.skips(node)
            if why is None:
                exp.serving.append(comp)
                if comp.stack not in stacks:
                    stacks.append(comp.stack)
            else:
                exp.skipping.append((comp, why))
        for role_pods in self.pods_by_node.get(name, {}).values():
            for p in role_pods:
                found = pod_component(p)
                if found and found[0] not in stacks:
                    stacks.append(found[0])
        labelled = any(k.startswith("nvidia.com/gpu.deploy.") for k in lab)
        if self.installed and OPERATOR not in stacks and labelled:
            stacks.append(OPERATOR)
        if OPERATOR in stacks:
            self._operator_roles(lab, roles)
        elif platform == "GKE":
            driver = roles.setdefault("driver", Expectation("driver"))
            version = lab.get("cloud.google.com/gke-gpu-driver-version")
            if version and not driver.serving:
                driver.host = f"GKE-managed (cloud.google.com/gke-gpu-driver-version={version})"
            if lab.get("gke-no-default-nvidia-gpu-device-plugin") == "true":
                plugin = roles.setdefault("device-plugin", Expectation("device-plugin"))
                plugin.disabled = "gke-no-default-nvidia-gpu-device-plugin=true"
        else:
            driver = roles.setdefault("driver", Expectation("driver"))
            if not driver.serving:
                default = "pre-installed (no driver DaemonSet serves this node)"
                if not self.installed:
                    default = "pre-installed (no GPU Operator found)"
                driver.host = _HOST_DRIVER.get(platform or "", default)
        host = _host_plugin(node, platform)
        if host:
            roles.setdefault("device-plugin", Expectation("device-plugin")).host = host
        for exp in roles.values():
            exp.expected = bool(exp.serving) and not exp.disabled and not exp.paused
        for role in self.pods_by_node.get(name, {}):
            roles.setdefault(role, Expectation(role)).expected = True  # its pods are there
        if self.inferred and OPERATOR in stacks:
            # No DaemonSet templates to go by: the operator runs every operand it has not
            # been told to skip on the nodes it labels (or that run its pods).
            mig = lab.get("nvidia.com/mig.capable") == "true"
            for role in (*_OPERANDS, "mig-manager") if mig else _OPERANDS:
                exp = roles.setdefault(role, Expectation(role))
                if not (exp.disabled or exp.paused or exp.host) and role not in self.policy_off:
                    exp.expected = True
        return NodePlan(tuple(stacks), platform, roles, inferred=self.inferred)

    def _operator_roles(self, lab: dict[str, str], roles: dict[str, Expectation]) -> None:
        """The GPU Operator's switches: per-node `nvidia.com/gpu.deploy.*` labels and the
        ClusterPolicy's `enabled` flags."""
        everything_off = lab.get("nvidia.com/gpu.deploy.operands") == "false"
        for role, key in DEPLOY_KEY.items():
            exp = roles.setdefault(role, Expectation(role))
            label = f"nvidia.com/gpu.deploy.{key}"
            value = lab.get(label)
            if everything_off:
                exp.disabled = "nvidia.com/gpu.deploy.operands=false"
            elif value == "false":
                exp.disabled = f"{label}=false"
            elif value and value.startswith("paused-for-"):
                exp.paused = f"{label}={value}"
            elif role in self.policy_off and not exp.serving:
                exp.disabled = self.policy_off[role]
        driver = roles["driver"]
        value = lab.get("nvidia.com/gpu.deploy.driver")
        if value == "pre-installed":
            driver.host = "pre-installed (nvidia.com/gpu.deploy.driver=pre-installed)"
            driver.disabled = None
        elif "driver" in self.policy_off and not driver.serving:
            driver.host = f"pre-installed ({self.policy_off['driver']})"
            driver.disabled = None

    def describe(self) -> list[str]:
        """Where the GPU components were found, one line per stack (for reports, preflight)."""
        out = []
        if self.operator is not None:
            out.append(f"{STACK_TITLES[OPERATOR]} in namespace {self.operator.namespace} "
                       f"(found by {self.operator.how})")  # fmt: skip
        for stack, title in STACK_TITLES.items():
            if stack == OPERATOR or stack not in self.stacks_seen:
                continue
            names = sorted(c.ref for c in self.components if c.stack == stack)
            where = ", ".join(names) or "pods in " + ", ".join(sorted(self.stacks_seen[stack]))
            out.append(f"{title}: {where}")
        return out


def _active_policy(policies: list[Obj]) -> Obj | None:
    """The ClusterPolicy the operator acts on (it marks duplicates `ignored`)."""
    live = [p for p in policies if ((p.get("status") or {}).get("state")) != "ignored"]
    chosen = live or policies
    return chosen[0] if chosen else None


def _pod_role(pod: Obj, by_ds: dict[tuple[str, str], Component]) -> tuple[str, str] | None:
    ref = owner(pod)
    if ref is not None and ref[0] == "DaemonSet":
        comp = by_ds.get((ns_of(pod), ref[1]))
        if comp is not None:
            return comp.stack, comp.role
    return pod_component(pod)


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
    policy = _active_policy(policies)
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


def load_view(
    read: Reader, *, override: str | None = None, memo: IdentityMemo | None = None
) -> StackView:
    """The stack view of a cluster, remembered while its inputs are the same objects.

    With DaemonSets to read, only the pods of the namespaces that hold GPU components are
    read; without any (a snapshot of pods alone, or no permission), every pod is, and the
    pods' own labels say which are GPU components.
    """
    memo = IdentityMemo() if memo is None else memo  # an empty memo is falsy (__len__)
    daemonsets = read("DaemonSet", None) or []
    policies = read("ClusterPolicy", None) or []
    components: list[Component] = memo.get(
        ("gpu-components",), tuple(daemonsets), lambda: _components(daemonsets)
    )
    if daemonsets:
        located = locate_operator(override=override, policies=policies, components=components)
        pods = [
            p for ns in component_namespaces(components, located) for p in read("Pod", ns) or []
        ]
    else:
        pods = read("Pod", None) or []
        located = locate_operator(
            override=override, policies=policies, components=components, pods=pods
        )
    return memo.get(
        ("stack-view", override),
        (*daemonsets, *policies, *pods),
        lambda: StackView(
            components=components,
            pods=pods,
            policies=policies,
            operator=located,
            daemonsets_known=bool(daemonsets),
        ),
    )


def _components(daemonsets: list[Obj]) -> list[Component]:
    return [c for ds in daemonsets if (c := Component.of_daemonset(ds)) is not None]
