"""The individual checks of node verification (see `triage.verify`), one function per check.

Node verification: the design brief's post-deployment template, run against one GPU node.

Triage answers "why is this pod stuck?"; verification answers "is this node correctly
understood by Kubernetes?" before anyone's pod is stuck: expected labels, GPUs in Capacity and
Allocatable, every GPU Operator operand Running and Ready on the node, node Ready, the taints
that keep CPU work off it, the container runtime and the `nvidia` RuntimeClass. Each check
carries its layer, so a failing node routes to the same owner a stuck pod on it would.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from triage.config import EngineConfig
from triage.kubeobj import GPU, MIG_PREFIX, condition_true, labels, name_of, taint_str
from triage.model import Frozen, Layer, OwnerRoute
from triage.nodehealth import NodeHealth, assess_node, sharing_note
from triage.operator import (
    PREINSTALLED,
    OperatorView,
    component_state,
    failing_validation,
    node_ready,
)
from triage.playbooks import Playbook
from triage.source import ClusterSource, ForbiddenError, Obj


class CheckStatus(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"  # worth a look, does not fail the node
    SKIP = "skip"  # does not apply to this node (e.g. driver pod on a pre-installed driver)


class Check(Frozen):
    name: str
    status: CheckStatus
    summary: str
    evidence: list[str] = Field(default_factory=list)
    layer: Layer | None = Field(default=None, description="layer a failure routes to")


class NodeVerification(Frozen):
    """The verification template's result for one node. `passed` is False iff a check failed."""

    node: str
    cluster: str = "default"
    passed: bool
    driver_strategy: str
    failing_layer: Layer | None = None
    owner: OwnerRoute | None = None
    checks: list[Check]

    def check(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)


EXPECTED_LABELS = ("nvidia.com/gpu.present", "nvidia.com/gpu.product", "nvidia.com/gpu.count")
# operand component → (node label key suffix for nvidia.com/gpu.deploy.*, ClusterPolicy key, layer)
OPERANDS: dict[str, tuple[str, str, Layer]] = {
    "driver": ("driver", "driver", Layer.DRIVER),
    "toolkit": ("container-toolkit", "toolkit", Layer.DRIVER),
    "validator": ("operator-validator", "validator", Layer.DRIVER),
    "device-plugin": ("device-plugin", "devicePlugin", Layer.DEVICE_PLUGIN),
    "gfd": ("gpu-feature-discovery", "gfd", Layer.DEVICE_PLUGIN),
    "dcgm-exporter": ("dcgm-exporter", "dcgmExporter", Layer.DEVICE_PLUGIN),
}
SUPPORTED_RUNTIMES = ("containerd://", "cri-o://", "docker://")
SYSTEM_TAINT_PREFIX = "node.kubernetes.io/"


class Cluster:
    """What every node's verification shares, read once: operator pods, policy, RuntimeClasses."""

    def __init__(self, source: ClusterSource, *, config: EngineConfig, playbook: Playbook) -> None:
        self.source, self.config, self.playbook = source, config, playbook
        ns = config.operator_namespace
        self.unreadable: list[str] = []
        pods = self._read("Pod", ns)
        self.policies = self._read("ClusterPolicy", None)
        self.view = OperatorView.build(namespace=ns, pods=pods or [], policies=self.policies or [])
        self.runtime_classes = self._read("RuntimeClass", None)

    def _read(self, kind: str, namespace: str | None) -> list[Obj] | None:
        try:
            return self.source.objects(kind, namespace=namespace)
        except ForbiddenError as e:
            self.unreadable.append(str(e))
            return None

    @property
    def policy_spec(self) -> dict[str, Any]:
        return ((self.policies or [{}])[0].get("spec")) or {}

    @property
    def runtime_class_name(self) -> str:
        return str((self.policy_spec.get("operator") or {}).get("runtimeClass") or "nvidia")


def driver_strategy(node: Obj, view: OperatorView) -> str:
    """How the node gets its driver: the node-admission checklist's first entry."""
    if not view.installed:
        return "pre-installed (no GPU Operator found)"
    if not view.driver_enabled:
        return "pre-installed (ClusterPolicy driver.enabled=false)"
    value = labels(node).get("nvidia.com/gpu.deploy.driver")
    if value in PREINSTALLED:
        return f"pre-installed (nvidia.com/gpu.deploy.driver={value})"
    return "operator-managed"


def _ready(node: Obj) -> Check:
    ok, why = node_ready(node)
    if ok:
        return Check(name="node-ready", status=CheckStatus.PASS, summary="node is Ready")
    return Check(
        name="node-ready",
        status=CheckStatus.FAIL,
        summary=f"node is not Ready: {why}",
        evidence=[f"node {name_of(node)}: {why}"],
        layer=Layer.DRIVER,
    )


def _runtime(node: Obj) -> Check:
    info = (node.get("status") or {}).get("nodeInfo") or {}
    version = str(info.get("containerRuntimeVersion") or "")
    evidence = [
        f"{k}: {info[k]}"
        for k in ("containerRuntimeVersion", "kubeletVersion", "kernelVersion", "osImage")
        if info.get(k)
    ]
    if not version:
        return Check(
            name="container-runtime",
            status=CheckStatus.WARN,
            summary="node reports no container runtime version",
            layer=Layer.DRIVER,
        )
    if not version.startswith(SUPPORTED_RUNTIMES):
        return Check(
            name="container-runtime",
            status=CheckStatus.WARN,
            summary=f"runtime {version} is not one the NVIDIA container toolkit configures",
            evidence=evidence,
            layer=Layer.DRIVER,
        )
    return Check(
        name="container-runtime", status=CheckStatus.PASS, summary=version, evidence=evidence
    )


def _runtime_class(cluster: Cluster) -> Check:
    name = cluster.runtime_class_name
    if cluster.runtime_classes is None:
        return Check(
            name="runtimeclass",
            status=CheckStatus.WARN,
            summary=f"cannot read RuntimeClasses to confirm {name!r} exists",
            evidence=[u for u in cluster.unreadable if "runtimeclasses" in u],
            layer=Layer.DRIVER,
        )
    found = next((rc for rc in cluster.runtime_classes if name_of(rc) == name), None)
    if found is not None:
        return Check(
            name="runtimeclass",
            status=CheckStatus.PASS,
            summary=f"RuntimeClass {name} exists (handler {found.get('handler', '?')})",
        )
    # Without the operator, a host whose default runtime is nvidia needs no RuntimeClass.
    return Check(
        name="runtimeclass",
        status=CheckStatus.FAIL if cluster.view.installed else CheckStatus.WARN,
        summary=f"RuntimeClass {name} does not exist",
        evidence=[
            f"RuntimeClasses present: {', '.join(sorted(name_of(rc) for rc in cluster.runtime_classes)) or 'none'}"
        ],
        layer=Layer.DRIVER,
    )


def _pod_ready(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase == "Running" and condition_true(pod, "Ready") is True


def _operand(node: Obj, component: str, cluster: Cluster, health: NodeHealth) -> Check:
    name = name_of(node)
    deploy_key, policy_key, layer = OPERANDS[component]
    check = f"{component}-pod"
    view = cluster.view
    if not view.installed:
        if cluster.unreadable and any("pods" in u for u in cluster.unreadable):
            why, status = "cannot read the GPU Operator's pods", CheckStatus.WARN
        else:
            why, status = f"no GPU Operator in namespace {view.namespace}", CheckStatus.SKIP
        return Check(name=check, status=status, summary=why, evidence=cluster.unreadable)
    if component == "driver" and not view.driver_managed(node):
        return Check(name=check, status=CheckStatus.SKIP, summary=driver_strategy(node, view))
    deploy = labels(node).get(f"nvidia.com/gpu.deploy.{deploy_key}")
    if deploy == "false":
        return Check(
            name=check,
            status=CheckStatus.SKIP,
            summary=f"disabled on this node (nvidia.com/gpu.deploy.{deploy_key}=false)",
        )
    if (cluster.policy_spec.get(policy_key) or {}).get("enabled") is False:
        return Check(
            name=check,
            status=CheckStatus.SKIP,
            summary=f"disabled in ClusterPolicy ({policy_key}.enabled=false)",
        )
    state = component_state(view, name, component)
    pods = view.pods(name, component)
    refs = [f"pod {view.namespace}/{name_of(p)}" for p in pods]
    if state is None:
        return Check(
            name=check,
            status=CheckStatus.FAIL,
            summary=f"no {component} pod runs on the node",
            evidence=[f"no pod of {component} in {view.namespace} has spec.nodeName={name}"],
            layer=layer,
        )
    if state.ok and all(_pod_ready(p) for p in pods):
        return Check(name=check, status=CheckStatus.PASS, summary=state.text, evidence=refs)
    evidence = state.detail or [f"{r}: not Running and Ready" for r in refs]
    if component == "validator":
        stuck = failing_validation(view, name)
        if stuck:
            evidence.append(f"validator stuck at init container {stuck}")
    if component == "driver" and not health.driver.ok:
        evidence.extend(d for d in health.driver.detail if d not in evidence)
    text = state.text if not state.ok else f"{component} pod running but not Ready"
    return Check(name=check, status=CheckStatus.FAIL, summary=text, evidence=evidence, layer=layer)


def _labels(node: Obj, health: NodeHealth) -> Check:
    lab = labels(node)
    evidence = [f"{k}={lab[k]}" for k in EXPECTED_LABELS if k in lab]
    missing = [k for k in EXPECTED_LABELS if not lab.get(k)]
    if lab.get("nvidia.com/gpu.present") not in (None, "true"):
        missing.insert(0, "nvidia.com/gpu.present=true")
    if missing:
        return Check(
            name="labels",
            status=CheckStatus.FAIL,
            summary=f"missing GPU labels: {', '.join(missing)} (GPU feature discovery)",
            evidence=evidence,
            layer=Layer.DEVICE_PLUGIN,
        )
    count = lab["nvidia.com/gpu.count"]
    capacity = health.capacity.get(GPU)
    shared = sharing_note(node)
    if shared:
        evidence.append(shared)  # Capacity counts replicas: a count mismatch is expected
    if (
        not shared
        and capacity is not None
        and count.isdigit()
        and int(count) != capacity
        and not health.mig_resources
    ):
        return Check(
            name="labels",
            status=CheckStatus.WARN,
            summary=f"label nvidia.com/gpu.count={count} but Capacity has {capacity} {GPU}",
            evidence=evidence,
            layer=Layer.DEVICE_PLUGIN,
        )
    return Check(
        name="labels", status=CheckStatus.PASS, summary="GPU labels present", evidence=evidence
    )


def _resources(node: Obj, health: NodeHealth) -> Check:
    gpu = {k: v for k, v in health.capacity.items() if k == GPU or k.startswith(MIG_PREFIX)}
    alloc = {k: v for k, v in health.allocatable.items() if k == GPU or k.startswith(MIG_PREFIX)}
    names = sorted(set(gpu) | set(alloc))
    evidence = [f"{r}: capacity {gpu.get(r, 0)}, allocatable {alloc.get(r, 0)}" for r in names]
    if not any(v > 0 for v in gpu.values()):
        return Check(
            name="gpu-resources",
            status=CheckStatus.FAIL,
            summary=f"no {GPU} (or MIG) resource in Capacity",
            evidence=evidence or [f"node {name_of(node)} Capacity lists no nvidia.com/* resource"],
            layer=Layer.DEVICE_PLUGIN,
        )
    short = [r for r in names if alloc.get(r, 0) != gpu.get(r, 0)]
    if short:
        return Check(
            name="gpu-resources",
            status=CheckStatus.FAIL,
            summary=f"Allocatable differs from Capacity for {', '.join(short)} (unhealthy devices)",
            evidence=evidence + health.notes,
            layer=Layer.DEVICE_PLUGIN,
        )
    shown = ", ".join(f"{r}={gpu[r]}" for r in names if gpu.get(r))
    return Check(name="gpu-resources", status=CheckStatus.PASS, summary=shown, evidence=evidence)


def separation(node: Obj, *, pool_labels: list[str]) -> list[str]:
    """What keeps CPU workloads off a GPU node: its non-system taints and pool labels."""
    out = [
        f"taint {taint_str(t)}"
        for t in (node.get("spec") or {}).get("taints") or []
        if t.get("effect") in ("NoSchedule", "NoExecute")
        and not str(t.get("key", "")).startswith(SYSTEM_TAINT_PREFIX)
    ]
    lab = labels(node)
    out.extend(f"pool label {k}={lab[k]}" for k in pool_labels if lab.get(k))
    return out


def _taints(node: Obj, playbook: Playbook) -> Check:
    taints = [taint_str(t) for t in (node.get("spec") or {}).get("taints") or []]
    evidence = [f"taints: {', '.join(taints) or 'none'}"]
    if (node.get("spec") or {}).get("unschedulable"):
        evidence.append("node is cordoned (spec.unschedulable)")
    kept = separation(node, pool_labels=playbook.node_pools.labels)
    if kept:
        return Check(
            name="taints",
            status=CheckStatus.PASS,
            summary="separated from CPU nodes by " + "; ".join(kept),
            evidence=evidence,
        )
    return Check(
        name="taints",
        status=CheckStatus.WARN,
        summary="no taint or node-pool label keeps CPU workloads off this GPU node",
        evidence=evidence,
        layer=Layer.SCHEDULING,
    )


def node_checks(node: Obj, cluster: Cluster) -> list[Check]:
    """Every check of the template, lowest layer first (so the first failure routes)."""
    health = assess_node(node, cluster.view)
    return [
        _ready(node),
        _runtime(node),
        _runtime_class(cluster),
        *(_operand(node, c, cluster, health) for c in ("driver", "toolkit", "validator")),
        _labels(node, health),
        _resources(node, health),
        *(_operand(node, c, cluster, health) for c in ("device-plugin", "gfd", "dcgm-exporter")),
        _taints(node, cluster.playbook),
    ]
