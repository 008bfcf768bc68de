"""Preflight: the cluster-wide baseline a platform team records before (or after) installing
the GPU Operator.

It is the node-admission checklist at cluster scale: which nodes are GPU nodes and what keeps
CPU work off them (taints, node-pool labels), which container runtimes they run, how drivers
get there, whether the operator's namespace and ClusterPolicy exist. The permissions the bot
holds are checked by the live adapter (`kube.access`) and attached here, since a snapshot
cannot answer that question.
"""

from __future__ import annotations

from collections import Counter

from pydantic import Field

from triage.cluster.objects import Obj, labels, name_of
from triage.cluster.selectors import taint_str
from triage.cluster.source import ClusterSource, ReadFailedError
from triage.config import EngineConfig
from triage.layers.stacks.state import is_gpu_node
from triage.model import Frozen
from triage.playbooks import Playbook, load_playbook
from triage.vendors import NVIDIA
from triage.vendors.nvidia import COUNT, OPERATOR_NAMESPACES, PRESENT, PRODUCT
from triage.verify.checks import Cluster, driver_strategy, separation


class GpuNode(Frozen):
    name: str
    product: str | None = None
    count: str | None = None
    runtime: str | None = None
    driver_strategy: str
    taints: list[str] = Field(default_factory=list)
    separated_by: list[str] = Field(default_factory=list)


class OperatorState(Frozen):
    namespace: str | None = Field(description="where the GPU Operator runs; None if not found")
    found_by: str | None = Field(default=None, description="what told us where it runs")
    namespace_exists: bool | None = Field(description="None when namespaces cannot be read")
    installed: bool = Field(description="operator pods or a ClusterPolicy were found")
    cluster_policy_state: str | None = None
    runtime_class: str = NVIDIA.runtime_class
    runtime_class_exists: bool | None = None


class Preflight(Frozen):
    """The baseline. `problems` fail the preflight; `warnings` deserve a look."""

    cluster: str
    gpu_nodes: list[GpuNode]
    cpu_nodes: int
    runtime_versions: dict[str, int] = Field(description="containerRuntimeVersion -> GPU nodes")
    operator: OperatorState
    gpu_stacks: list[str] = Field(
        default_factory=list, description="where each GPU stack's components were found"
    )
    missing_permissions: list[str] | None = Field(
        default=None, description="None when not checked (snapshots cannot tell)"
    )
    problems: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.problems

    def with_permissions(self, missing: list[str]) -> Preflight:
        problems = [p for p in self.problems if not p.startswith("missing permission")]
        problems += [f"missing permission: {m}" for m in missing]
        return self.model_copy(update={"missing_permissions": missing, "problems": problems})


def preflight(
    source: ClusterSource,
    *,
    config: EngineConfig | None = None,
    playbook: Playbook | None = None,
) -> Preflight:
    """Read nodes, the operator namespace, ClusterPolicy and RuntimeClasses; judge the baseline."""
    config = config or EngineConfig()
    playbook = playbook or load_playbook()
    nodes = source.objects("Node")
    cluster = Cluster(source, config=config, playbook=playbook)
    gpu = [
        _gpu_node(node, cluster, playbook)
        for node in sorted((n for n in nodes if is_gpu_node(n)), key=name_of)
    ]
    runtimes = Counter(g.runtime or "unknown" for g in gpu)
    op = _operator_state(source, cluster)
    problems: list[str] = []
    warnings = [f"not readable: {u}" for u in cluster.unreadable]
    if not gpu:
        problems.append(f"no GPU nodes found (no {PRESENT} or PCI vendor 10de label)")
    warnings += _node_warnings(gpu, runtimes)
    if op.installed and op.runtime_class_exists is False:
        problems.append(
            f"RuntimeClass {op.runtime_class} does not exist although the operator is installed"
        )
    state = op.cluster_policy_state
    if op.installed and state is not None and state.lower() != "ready":
        # A failing state is never shown beside an OK: the operator says its operands fail.
        problems.append(
            f"ClusterPolicy state is {state}: some GPU Operator operands are not ready "
            "(gpu-triage verify-nodes names the nodes and components)"
        )
    for ns in _leftover_namespaces(source, op):
        warnings.append(
            f"namespace {ns} exists but no GPU Operator pods or ClusterPolicy were found"
        )
    stacks = cluster.view.describe()
    if gpu and not stacks:
        warnings.append(
            f"no GPU component was found (no GPU Operator, GKE, {NVIDIA.name} device plugin or DRA "
            "driver DaemonSet): drivers and device plugins must come from the hosts"
        )
    return Preflight(
        cluster=source.cluster_name,
        gpu_nodes=gpu,
        cpu_nodes=len(nodes) - len(gpu),
        runtime_versions=dict(sorted(runtimes.items())),
        operator=op,
        gpu_stacks=stacks,
        problems=problems,
        warnings=warnings,
    )


def _gpu_node(node: Obj, cluster: Cluster, playbook: Playbook) -> GpuNode:
    lab = labels(node)
    info = (node.get("status") or {}).get("nodeInfo") or {}
    return GpuNode(
        name=name_of(node),
        product=lab.get(PRODUCT),
        count=lab.get(COUNT),
        runtime=info.get("containerRuntimeVersion"),
        driver_strategy=driver_strategy(node, cluster.view),
        taints=[taint_str(t) for t in (node.get("spec") or {}).get("taints") or []],
        separated_by=separation(node, pool_labels=playbook.node_pools.labels),
    )


def _node_warnings(gpu: list[GpuNode], runtimes: Counter[str]) -> list[str]:
    """GPU nodes open to CPU work, and GPU nodes that differ in runtime or driver strategy."""
    warnings: list[str] = []
    loose = [g.name for g in gpu if not g.separated_by]
    if loose:
        warnings.append(
            f"{len(loose)} GPU node(s) have no taint or node-pool label keeping CPU work off: "
            + ", ".join(loose[:10])
            + (" …" if len(loose) > 10 else "")
        )
    if len(runtimes) > 1:
        warnings.append(
            "GPU nodes run different container runtime versions: "
            + ", ".join(f"{v} ({n})" for v, n in sorted(runtimes.items()))
        )
    strategies = Counter(g.driver_strategy.split(" ")[0] for g in gpu)
    if len(strategies) > 1:
        warnings.append(
            "mixed driver strategy: "
            + ", ".join(f"{s} on {n} node(s)" for s, n in sorted(strategies.items()))
        )
    return warnings


def _leftover_namespaces(source: ClusterSource, op: OperatorState) -> list[str]:
    """The operator's usual namespaces that exist while no operator runs (a half-done
    install or uninstall)."""
    if op.installed:
        return []
    out = []
    for ns in dict.fromkeys([*([op.namespace] if op.namespace else []), *OPERATOR_NAMESPACES]):
        try:
            if source.get("Namespace", ns) is not None:
                out.append(ns)
        except ReadFailedError:
            return []
    return out


def _operator_state(source: ClusterSource, cluster: Cluster) -> OperatorState:
    ns = cluster.view.namespace
    try:
        exists: bool | None = ns is not None and source.get("Namespace", ns) is not None
    except ReadFailedError:
        exists = None
    rcs = cluster.runtime_classes
    name = cluster.runtime_class_name
    return OperatorState(
        namespace=ns,
        found_by=cluster.view.operator.how if cluster.view.operator else None,
        namespace_exists=exists,
        installed=cluster.view.installed,
        cluster_policy_state=cluster.view.policy_state,
        runtime_class=name,
        runtime_class_exists=None if rcs is None else any(name_of(r) == name for r in rcs),
    )
