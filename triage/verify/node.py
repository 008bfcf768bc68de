"""Node verification: is this GPU node correctly understood by Kubernetes?

Triage answers "why is this pod stuck?"; verification answers the platform's question before
anyone's pod is stuck, with the design brief's fixed template (checks in `checks`).
A failing node routes to the owner of its lowest failing layer, exactly as a stuck pod on it
would, including node-pool overrides from the playbook.
"""

from __future__ import annotations

from collections.abc import Mapping

from triage.cluster.objects import Obj, labels, name_of
from triage.cluster.selectors import label_selector_matches
from triage.cluster.source import ClusterSource, NotFoundError
from triage.config import EngineConfig
from triage.layers.node import assess_node
from triage.layers.node_fault import NodeFault, node_fault
from triage.layers.stacks.state import is_gpu_node
from triage.model import Layer
from triage.names import validate_name
from triage.playbooks import Playbook, load_playbook
from triage.verify.checks import (
    Check,
    CheckStatus,
    Cluster,
    NodeVerification,
    driver_strategy,
    node_checks,
)

__all__ = [
    "Check",
    "CheckStatus",
    "Cluster",
    "NodeVerification",
    "conclude",
    "probe_check",
    "verify_loaded",
    "verify_node",
    "verify_nodes",
    "with_check",
]


def verify_loaded(node: Obj, cluster: Cluster) -> NodeVerification:
    """Run the template on a node object already read (used for one node and for many). A
    node that carries no accelerator is said to be one, not failed on every GPU check."""
    if not is_gpu_node(node):
        return conclude(
            node=node,
            checks=[_not_a_gpu_node(node)],
            cluster=cluster.source.cluster_name,
            strategy="-",
            playbook=cluster.playbook,
        )
    checks = node_checks(node, cluster)
    return conclude(
        node=node,
        checks=checks,
        cluster=cluster.source.cluster_name,
        strategy=driver_strategy(node, cluster.view),
        playbook=cluster.playbook,
        fault=_fault(node_fault(assess_node(node, cluster.view))),
    )


def _not_a_gpu_node(node: Obj) -> Check:
    return Check(
        name="gpu-node",
        status=CheckStatus.FAIL,
        summary=f"{name_of(node)} is not a GPU node: no accelerator in its capacity or labels "
        "(no nvidia.com/gpu, amd.com/gpu, … and no nvidia.com/gpu.present): nothing to verify",
    )


def _fault(fault: NodeFault | None) -> tuple[Layer, str] | None:
    return None if fault is None else (fault.layer, fault.verdict.code)


def conclude(
    *,
    node: Obj,
    checks: list[Check],
    cluster: str,
    strategy: str,
    playbook: Playbook,
    fault: tuple[Layer, str] | None = None,
) -> NodeVerification:
    """Pass/fail from the checks. The layer and owner are the node's fault as every command
    names it (`node_fault`: what `why-pending` says of this node), routed as the engine routes
    it (the node's pool, the fault's signal); only a node with no such fault is routed by
    its first failing check (lowest layer): a missing RuntimeClass, a failed test pod."""
    failed = sorted(
        (c for c in checks if c.status == CheckStatus.FAIL and c.layer is not None),
        key=lambda c: c.layer.rank if c.layer else 99,
    )
    passed = not any(c.status == CheckStatus.FAIL for c in checks)
    codes: list[str] = []
    if fault is not None and not passed:
        layer: Layer | None = fault[0]
        codes = [fault[1]] if fault[1] else []
    else:
        layer = failed[0].layer if failed else None
    owner = (
        playbook.route(layer, node_labels=[labels(node)], codes=codes)
        if layer is not None
        else None
    )
    return NodeVerification(
        node=name_of(node),
        cluster=cluster,
        passed=passed,
        driver_strategy=strategy,
        failing_layer=layer,
        owner=owner,
        checks=checks,
        reason=codes[0] if codes else None,
    )


def with_check(
    result: NodeVerification, check: Check, *, node: Obj, playbook: Playbook
) -> NodeVerification:
    """The result with one more check (the optional test pod), re-concluded."""
    return conclude(
        node=node,
        checks=[*result.checks, check],
        cluster=result.cluster,
        strategy=result.driver_strategy,
        playbook=playbook,
        fault=(result.failing_layer, result.reason)
        if result.failing_layer is not None and result.reason
        else None,
    )


def verify_node(
    source: ClusterSource,
    name: str,
    *,
    config: EngineConfig | None = None,
    playbook: Playbook | None = None,
) -> NodeVerification:
    """Verify one node. Raises InvalidNameError for a bad name, NotFoundError if it is unknown."""
    validate_name(name, what="node name")
    node = source.get("Node", name)
    if node is None:
        raise NotFoundError(f"node {name} not found in cluster {source.cluster_name}")
    cluster = Cluster(source, config=config or EngineConfig(), playbook=playbook or load_playbook())
    return verify_loaded(node, cluster)


def matches(node: Obj, selector: Mapping[str, str] | Obj) -> bool:
    """`selector` is a LabelSelector (`triage.label_query`), or labels to equal."""
    if "matchLabels" in selector or "matchExpressions" in selector or not selector:
        return label_selector_matches(dict(selector), labels(node))
    lab = labels(node)
    return all(lab.get(k) == v for k, v in selector.items())


def verify_nodes(
    source: ClusterSource,
    *,
    selector: Mapping[str, str] | Obj | None = None,
    config: EngineConfig | None = None,
    playbook: Playbook | None = None,
) -> list[NodeVerification]:
    """Verify every node matching `selector` (a LabelSelector, or labels to equal); default:
    every GPU node."""
    nodes = source.objects("Node")
    chosen = (
        [n for n in nodes if matches(n, selector)]
        if selector
        else [n for n in nodes if is_gpu_node(n)]
    )
    if not chosen:
        return []
    cluster = Cluster(source, config=config or EngineConfig(), playbook=playbook or load_playbook())
    return [verify_loaded(n, cluster) for n in sorted(chosen, key=name_of)]


TEST_POD_OUTCOMES = ("succeeded", "failed", "unschedulable", "timeout")


def probe_check(*, outcome: str, summary: str, evidence: list[str]) -> Check:
    """The optional test pod's result as a check.

    A pod that never got bound means the node could not offer one GPU (device plugin, or the
    node is full: the scheduler's message in the evidence says which); a bound pod whose
    container failed points at the driver / container runtime; a timeout after binding (slow
    image pull) proves nothing either way, so it only warns.
    """
    if outcome not in TEST_POD_OUTCOMES:
        raise ValueError(f"unknown test pod outcome {outcome!r}")
    status, layer = {
        "succeeded": (CheckStatus.PASS, None),
        "failed": (CheckStatus.FAIL, Layer.DRIVER),
        "unschedulable": (CheckStatus.FAIL, Layer.DEVICE_PLUGIN),
        "timeout": (CheckStatus.WARN, Layer.DRIVER),
    }[outcome]
    return Check(name="test-pod", status=status, summary=summary, evidence=evidence, layer=layer)
