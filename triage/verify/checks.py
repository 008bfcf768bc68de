"""The individual checks of node verification (see `node`), one function per check.

Node verification: the design brief's post-deployment template, run against one GPU node.

Triage answers "why is this pod stuck?"; verification answers "is this node correctly
understood by Kubernetes?" before anyone's pod is stuck: expected labels, GPUs in Capacity and
Allocatable, every GPU Operator operand Running and Ready on the node, node Ready, the taints
that keep CPU work off it, the container runtime and the `nvidia` RuntimeClass. Each check
carries its layer, so a failing node routes to the same owner a stuck pod on it would.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from triage.cluster.objects import Obj, condition_true, labels, name_of, ns_of
from triage.cluster.quantities import GPU, MIG_PREFIX
from triage.cluster.selectors import taint_str
from triage.cluster.source import ClusterSource, ReadFailedError
from triage.config import EngineConfig
from triage.layers.node import NodeHealth, assess_node
from triage.layers.plugin_health import sharing_note
from triage.layers.stacks.plan import NodePlan
from triage.layers.stacks.state import component_state, failing_validation, node_ready
from triage.layers.stacks.view import StackView, load_view
from triage.model import Frozen, Layer, OwnerRoute
from triage.playbooks import Playbook
from triage.vendors import NVIDIA
from triage.vendors.nvidia import COUNT, OPERATOR, PRESENT, PRODUCT, ROLE_TITLES


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
    reason: str | None = Field(
        default=None,
        description="the node's fault as a signal code, as why-pending names it for this node "
        "(None when only a check without one failed)",
    )

    def check(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)


EXPECTED_LABELS = (PRESENT, PRODUCT, COUNT)
# GPU component role -> the layer a failure of it routes to.
OPERANDS: dict[str, Layer] = {
    "driver": Layer.DRIVER,
    "toolkit": Layer.DRIVER,
    "validator": Layer.DRIVER,
    "device-plugin": Layer.DEVICE_PLUGIN,
    "gfd": Layer.DEVICE_PLUGIN,
    "dcgm-exporter": Layer.DEVICE_PLUGIN,
    "dra-plugin": Layer.DEVICE_PLUGIN,
}
CLOUD_GPU_LABELS = (
    "cloud.google.com/gke-accelerator",
    "kubernetes.azure.com/accelerator",
    "karpenter.k8s.aws/instance-gpu-name",
    "eks.amazonaws.com/instance-gpu-name",
    "k8s.amazonaws.com/accelerator",
)
SUPPORTED_RUNTIMES = ("containerd://", "cri-o://", "docker://")
SYSTEM_TAINT_PREFIX = "node.kubernetes.io/"


class Cluster:
    """What every node's verification shares, read once: the GPU stacks and RuntimeClasses."""

    def __init__(self, source: ClusterSource, *, config: EngineConfig, playbook: Playbook) -> None:
        self.source, self.config, self.playbook = source, config, playbook
        self.unreadable: list[str] = []
        self.view: StackView = load_view(self._read, override=config.operator_namespace)
        self.runtime_classes = self._read("RuntimeClass", None)

    def _read(self, kind: str, namespace: str | None) -> list[Obj] | None:
        try:
            return self.source.objects(kind, namespace=namespace)
        except ReadFailedError as e:
            self.unreadable.append(str(e))
            return None

    @property
    def runtime_class_name(self) -> str:
        return self.view.runtime_class


def driver_strategy(node: Obj, view: StackView) -> str:
    """How the node gets its driver: the node-admission checklist's first entry."""
    plan = view.plan(node)
    exp = plan.role("driver")
    if exp.host:
        return exp.host
    if exp.disabled:
        return f"none: switched off ({exp.disabled})"
    if exp.serving and exp.serving[0].stack != OPERATOR:
        return f"GKE-managed (DaemonSet {exp.serving[0].ref})"
    unreached = [(c, why) for c, why in exp.skipping if c.stack == OPERATOR]
    if unreached and not exp.serving:
        comp, why = unreached[0]
        return f"none: the GPU Operator's DaemonSet {comp.ref} does not reach the node ({why})"
    if OPERATOR in plan.stacks:
        return "operator-managed"
    return "pre-installed (no driver DaemonSet serves this node)"


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
            summary=f"runtime {version} is not one the {NVIDIA.name} container toolkit configures",
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


def _operand(
    node: Obj, component: str, cluster: Cluster, plan: NodePlan, health: NodeHealth
) -> Check:
    """One GPU component on the node, judged by the node's own stack."""
    name = name_of(node)
    layer = OPERANDS[component]
    check = f"{component}-pod"
    view = cluster.view
    exp = plan.role(component)
    title = ROLE_TITLES[component]
    if exp.disabled:
        return Check(name=check, status=CheckStatus.SKIP, summary=f"switched off ({exp.disabled})")
    if exp.host:
        return Check(name=check, status=CheckStatus.SKIP, summary=f"{title} {exp.host}")
    state = component_state(view, name, component)
    pods = view.pods(name, component)
    refs = [f"pod {ns_of(p)}/{name_of(p)}" for p in pods]
    if state is None:
        if exp.paused:
            return Check(
                name=check, status=CheckStatus.WARN, summary=f"paused ({exp.paused})", layer=layer
            )
        if not exp.expected:
            if cluster.unreadable and any(
                "pods" in u or "daemonsets" in u for u in cluster.unreadable
            ):
                return Check(
                    name=check,
                    status=CheckStatus.WARN,
                    summary="cannot read the GPU components' pods",
                    evidence=cluster.unreadable,
                )
            why = "; ".join(f"DaemonSet {c.ref} skips it: {w}" for c, w in exp.skipping[:2])
            if (
                component == "driver"
                and not exp.serving
                and any(c.stack == OPERATOR for c, _ in exp.skipping)
            ):  # the operator manages drivers here but does not reach this node
                return Check(
                    name=check,
                    status=CheckStatus.FAIL,
                    summary="the GPU Operator's driver DaemonSet does not reach the node",
                    evidence=[why],
                    layer=layer,
                )
            return Check(
                name=check,
                status=CheckStatus.SKIP,
                summary=f"not part of this node's GPU stack ({plan.describe()})",
                evidence=[why] if why else [],
            )
        where = f"DaemonSet {exp.serving[0].ref}" if exp.serving else "the GPU Operator"
        return Check(
            name=check,
            status=CheckStatus.FAIL,
            summary=f"no {component} pod runs on the node",
            evidence=[
                f"{where} should run a {title} pod on {name}, and none has spec.nodeName={name}"
            ],
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


def _labels(node: Obj, health: NodeHealth, plan: NodePlan) -> Check:
    lab = labels(node)
    evidence = [f"{k}={lab[k]}" for k in EXPECTED_LABELS if k in lab]
    if not plan.role("gfd").expected and OPERATOR not in plan.stacks:
        # No GPU feature discovery in this node's stack: the cloud's own labels name the GPU.
        cloud = [f"{k}={lab[k]}" for k in CLOUD_GPU_LABELS if k in lab]
        if cloud or evidence:
            return Check(
                name="labels",
                status=CheckStatus.PASS,
                summary="GPU labels present: " + ", ".join(cloud or evidence),
                evidence=evidence + cloud,
            )
        return Check(
            name="labels",
            status=CheckStatus.WARN,
            summary="no GPU feature labels: GPU feature discovery does not run on this node, so "
            f"pods cannot select it by {PRODUCT}",
            layer=Layer.DEVICE_PLUGIN,
        )
    missing = [k for k in EXPECTED_LABELS if not lab.get(k)]
    if lab.get(PRESENT) not in (None, "true"):
        missing.insert(0, f"{PRESENT}=true")
    if missing:
        why = f" ({health.gfd_down})" if health.gfd_down else " (GPU feature discovery)"
        return Check(
            name="labels",
            status=CheckStatus.FAIL,
            summary=f"missing GPU labels: {', '.join(missing)}{why}",
            evidence=evidence,
            layer=Layer.DEVICE_PLUGIN,
        )
    count = lab[COUNT]
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
            summary=f"label {COUNT}={count} but Capacity has {capacity} {GPU}",
            evidence=evidence,
            layer=Layer.DEVICE_PLUGIN,
        )
    return Check(
        name="labels", status=CheckStatus.PASS, summary="GPU labels present", evidence=evidence
    )


def _upgrade(health: NodeHealth) -> list[Check]:
    """The node in its operator's driver upgrade: held on purpose (warn), or failed (fail)."""
    code = health.driver.code
    if code not in ("driver.upgrade-in-progress", "driver.upgrade-failed"):
        return []
    failed = code == "driver.upgrade-failed"
    return [Check(name="driver-upgrade", status=CheckStatus.FAIL if failed else CheckStatus.WARN,
                  summary=health.driver.text, evidence=list(health.driver.detail),
                  layer=Layer.DRIVER)]  # fmt: skip


def _resources(node: Obj, health: NodeHealth) -> Check:
    if health.plugin.code == "device-plugin.not-registered":
        return Check(name="gpu-resources", status=CheckStatus.FAIL, summary=health.plugin.text,
                     layer=Layer.DEVICE_PLUGIN)  # fmt: skip
    if health.dra_only and not health.capacity:
        return Check(
            name="gpu-resources",
            status=CheckStatus.PASS,
            summary="GPUs offered through DRA ResourceSlices (no device plugin by design)",
        )
    gpu = {k: v for k, v in health.capacity.items() if k == GPU or k.startswith(MIG_PREFIX)}
    alloc = {k: v for k, v in health.allocatable.items() if k == GPU or k.startswith(MIG_PREFIX)}
    names = sorted(set(gpu) | set(alloc))
    evidence = [f"{r}: capacity {gpu.get(r, 0)}, allocatable {alloc.get(r, 0)}" for r in names]
    if not any(v > 0 for v in gpu.values()):
        return Check(
            name="gpu-resources",
            status=CheckStatus.FAIL,
            summary=f"no {GPU} (or MIG) resource in Capacity",
            evidence=evidence
            or [f"node {name_of(node)} Capacity lists no {NVIDIA.resource_prefix}* resource"],
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
    plan = cluster.view.plan(node)
    plugins = ["device-plugin", "gfd", "dcgm-exporter"]
    if plan.role("dra-plugin").expected:
        plugins.insert(1, "dra-plugin")
    return [
        _ready(node),
        _runtime(node),
        _runtime_class(cluster),
        *(_operand(node, c, cluster, plan, health) for c in ("driver", "toolkit", "validator")),
        *_upgrade(health),
        _labels(node, health, plan),
        _resources(node, health),
        *(_operand(node, c, cluster, plan, health) for c in plugins),
        _taints(node, cluster.playbook),
    ]
