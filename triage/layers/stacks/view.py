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
from itertools import chain

from triage.cluster.lazy import cached_property
from triage.cluster.memo import IdentityMemo
from triage.cluster.objects import Obj, labels, name_of, ns_of, owner
from triage.layers.stacks.components import Component, pinned_node, pod_component
from triage.layers.stacks.operator import (
    OperatorLocation,
    active_policy,
    component_namespaces,
    locate_operator,
)
from triage.layers.stacks.plan import HOST_DRIVER, Expectation, NodePlan, host_plugin, platform_of
from triage.vendors import STACK_TITLES, Vendor, vendors_on
from triage.vendors.nvidia import (
    DEPLOY,
    DEPLOY_KEY,
    GKE_NO_PLUGIN,
    MIG_CAPABLE,
    NVIDIA,
    OPERATOR,
)

# Reads every object of a kind (in a namespace, or cluster-wide for None); None when the
# credentials may not list it.
Reader = Callable[[str, "str | None"], "list[Obj] | None"]


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
        nfd_workers: Iterable[Component] = (),
    ) -> None:
        self.components = [c for c in components if c.role != "other"]
        self.nfd_workers = list(nfd_workers)
        self.operator = operator
        self.namespace = operator.namespace if operator else None
        self.inferred = not daemonsets_known or any(c.parsed is None for c in self.components)
        policy = active_policy(policies)
        spec = (policy or {}).get("spec") or {}
        self.policy_name = name_of(policy) if policy else None
        self.policy_state = ((policy or {}).get("status") or {}).get("state")
        self.policy_off = {
            role: f"ClusterPolicy {self.policy_name} {key}.enabled=false"
            for role, key in _POLICY_KEY.items()
            if (spec.get(key) or {}).get("enabled", True) is False
        }
        self.runtime_class = str(
            (spec.get("operator") or {}).get("runtimeClass") or NVIDIA.runtime_class
        )
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
            tuple(self.nfd_workers),
        )

    @cached_property
    def digest(self) -> tuple[object, ...]:
        """What a triage reads of the view besides one node's pods (the verdict's stack lines
        and playbook values, the flags every node's plan reads): equal digests, equal answers
        for any node whose own pods are unchanged."""
        return (
            self.flags,
            tuple(self.describe()),
            tuple(sorted(self.playbook_values().items())),
            self.policy_state,
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
        vendors = vendors_on(node)
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
        labelled = any(k.startswith(DEPLOY) for k in lab)
        if self.installed and OPERATOR not in stacks and labelled:
            stacks.append(OPERATOR)
        if OPERATOR in stacks:
            self._operator_roles(lab, roles)
        elif platform == "GKE":
            driver = roles.setdefault("driver", Expectation("driver"))
            version = lab.get("cloud.google.com/gke-gpu-driver-version")
            if version and not driver.serving:
                driver.host = f"GKE-managed (cloud.google.com/gke-gpu-driver-version={version})"
            if lab.get(GKE_NO_PLUGIN) == "true":
                plugin = roles.setdefault("device-plugin", Expectation("device-plugin"))
                plugin.disabled = "gke-no-default-nvidia-gpu-device-plugin=true"
        else:
            driver = roles.setdefault("driver", Expectation("driver"))
            if not driver.serving and not _unreached(driver, platform, vendors):
                default = "pre-installed (no driver DaemonSet serves this node)"
                if not self.installed:
                    default = "pre-installed (no GPU Operator found)"
                driver.host = HOST_DRIVER.get(platform or "", default)
        host = host_plugin(node, platform)
        if host:
            roles.setdefault("device-plugin", Expectation("device-plugin")).host = host
        for exp in roles.values():
            exp.expected = bool(exp.serving) and not exp.disabled and not exp.paused
        for role in self.pods_by_node.get(name, {}):
            roles.setdefault(role, Expectation(role)).expected = True  # its pods are there
        if self.inferred and OPERATOR in stacks:
            # No DaemonSet templates to go by: the operator runs every operand it has not
            # been told to skip on the nodes it labels (or that run its pods).
            mig = lab.get(MIG_CAPABLE) == "true"
            for role in (*_OPERANDS, "mig-manager") if mig else _OPERANDS:
                exp = roles.setdefault(role, Expectation(role))
                if not (exp.disabled or exp.paused or exp.host) and role not in self.policy_off:
                    exp.expected = True
        plan = NodePlan(tuple(stacks), platform, roles, inferred=self.inferred, vendors=vendors)
        if self.nfd_workers:
            skips = [(w, w.skips(node)) for w in self.nfd_workers]
            if all(why for _, why in skips):
                plan.nfd_skipping = [(w, str(why)) for w, why in skips]
        return plan

    def _operator_roles(self, lab: dict[str, str], roles: dict[str, Expectation]) -> None:
        """The GPU Operator's switches: per-node `nvidia.com/gpu.deploy.*` labels and the
        ClusterPolicy's `enabled` flags."""
        everything_off = lab.get(f"{DEPLOY}operands") == "false"
        for role, key in DEPLOY_KEY.items():
            exp = roles.setdefault(role, Expectation(role))
            label = f"{DEPLOY}{key}"
            value = lab.get(label)
            if everything_off:
                exp.disabled = f"{DEPLOY}operands=false"
            elif value == "false":
                exp.disabled = f"{label}=false"
            elif value and value.startswith("paused-for-"):
                exp.paused = f"{label}={value}"
            elif role in self.policy_off and not exp.serving:
                exp.disabled = self.policy_off[role]
        driver = roles["driver"]
        value = lab.get(f"{DEPLOY}driver")
        if value == "pre-installed":
            driver.host = f"pre-installed ({DEPLOY}driver=pre-installed)"
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


# Platforms whose GPU nodes get their driver from the node image only when nothing else says
# so: a plain EC2 instance (no EKS labels), an unknown platform, OpenShift.
_IMAGE_DRIVER_GUESSED = (None, "AWS", "OpenShift")


def _unreached(driver: Expectation, platform: str | None, vendors: tuple[Vendor, ...]) -> bool:
    """The GPU Operator's driver DaemonSet skips this NVIDIA node and nothing says the host
    installs its driver (an EKS, AKS or GKE label, a driver-version label): the driver is
    missing because the operator does not reach the node, not pre-installed."""
    if platform not in _IMAGE_DRIVER_GUESSED or not vendors or vendors[0] is not NVIDIA:
        return False
    return any(comp.stack == OPERATOR for comp, _ in driver.skipping)


def _pod_role(pod: Obj, by_ds: dict[tuple[str, str], Component]) -> tuple[str, str] | None:
    ref = owner(pod)
    if ref is not None and ref[0] == "DaemonSet":
        comp = by_ds.get((ns_of(pod), ref[1]))
        if comp is not None:
            return comp.stack, comp.role
    return pod_component(pod)


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
    components: list[Component] = memo.get_lists(
        ("gpu-components",), (daemonsets,), lambda: _components(daemonsets)
    )
    nfd: list[Component] = memo.get_lists(
        ("nfd-workers",), (daemonsets,), lambda: _nfd_workers(daemonsets)
    )
    if daemonsets:
        located = locate_operator(override=override, policies=policies, components=components)
        namespaces = component_namespaces(components, located)
        pod_lists = [read("Pod", ns) or [] for ns in namespaces]
    else:
        pod_lists = [read("Pod", None) or []]
        located = locate_operator(
            override=override, policies=policies, components=components, pods=pod_lists[0]
        )
    return memo.get_lists(
        ("stack-view", override),
        (daemonsets, policies, *pod_lists),
        lambda: StackView(
            components=components,
            pods=list(chain.from_iterable(pod_lists)),
            policies=policies,
            operator=located,
            daemonsets_known=bool(daemonsets),
            nfd_workers=nfd,
        ),
    )


def _components(daemonsets: list[Obj]) -> list[Component]:
    return [c for ds in daemonsets if (c := Component.of_daemonset(ds)) is not None]


def _nfd_workers(daemonsets: list[Obj]) -> list[Component]:
    return [c for ds in daemonsets if (c := Component.nfd_worker(ds)) is not None]
