"""GPU nodes the stack's DaemonSets do not reach (issue 34, item 3): why a DaemonSet puts no pod
on a node (the CPU architecture or OS it excludes, the taint it does not tolerate, the selector
or affinity expression the node fails), the node-feature-discovery worker recognised, and the
driver judged missing (not pre-installed) only where nothing says the host installs it."""

from __future__ import annotations

from typing import Any

import pytest

from triage.cluster.objects import Obj
from triage.layers.stacks.components import Component, skip_reasons
from triage.layers.stacks.plan import HOST_DRIVER
from triage.layers.stacks.view import StackView

GPU_TOL = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def node(labels: dict[str, str] | None = None, taints: list[Obj] | None = None,
         provider: str = "aws:///us-east-1a/i-0123456789abcdef0") -> Obj:  # fmt: skip
    base = {"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": "g6.12xlarge"}  # fmt: skip
    return {
        "kind": "Node",
        "metadata": {"name": "gpu-l4-01", "labels": {**base, **(labels or {})}},
        "spec": {"providerID": provider, "taints": taints or []},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def placement(selector: dict[str, str] | None = None, terms: list[Obj] | None = None,
              tolerations: list[Obj] | None = None) -> dict[str, Any]:  # fmt: skip
    return {"nodeSelector": selector or {}, "terms": terms,
            "tolerations": GPU_TOL if tolerations is None else tolerations}  # fmt: skip


def arch_term(*archs: str) -> list[Obj]:
    expr = {"key": "kubernetes.io/arch", "operator": "In", "values": list(archs)}
    return [{"matchExpressions": [expr]}]


def test_a_node_the_daemonset_serves_has_no_reason() -> None:
    n = node(taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}])
    assert skip_reasons(placement(terms=arch_term("amd64", "arm64")), n) == []


def test_the_untolerated_taint_is_named_with_its_key_value_and_effect() -> None:
    n = node(taints=[{"key": "dedicated", "value": "inference", "effect": "NoSchedule"}])
    assert skip_reasons(placement(), n) == [
        "it does not tolerate the node's taint dedicated=inference:NoSchedule"
    ]


@pytest.mark.parametrize(
    "taint",
    [
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},  # the DS tolerates
        {"key": "dedicated", "value": "batch", "effect": "PreferNoSchedule"},  # never blocks
    ],
)
def test_taints_that_never_keep_a_daemonset_pod_away_are_ignored(taint: Obj) -> None:
    assert skip_reasons(placement(), node(taints=[taint])) == []


def test_an_architecture_the_affinity_excludes_is_named_as_such() -> None:
    n = node({"kubernetes.io/arch": "arm64"})
    assert skip_reasons(placement(terms=arch_term("amd64")), n) == [
        "it excludes the node's CPU architecture: its required node affinity wants "
        "kubernetes.io/arch In (amd64) (the node has kubernetes.io/arch=arm64)"
    ]


def test_an_os_the_node_selector_excludes_is_named_as_such() -> None:
    n = node({"kubernetes.io/os": "windows"})
    assert skip_reasons(placement({"kubernetes.io/os": "linux"}), n) == [
        "it excludes the node's operating system: its nodeSelector wants kubernetes.io/os=linux "
        "(the node has kubernetes.io/os=windows)"
    ]


def test_a_selector_and_an_affinity_expression_name_what_the_node_lacks() -> None:
    sel = placement({"nvidia.com/gpu.deploy.driver": "true"})
    assert skip_reasons(sel, node()) == [
        "its nodeSelector wants nvidia.com/gpu.deploy.driver=true (the node lacks the label)"
    ]
    expr = {"key": "feature.node.kubernetes.io/pci-10de.present", "operator": "In",
            "values": ["true"]}  # fmt: skip
    aff = placement(terms=[{"matchExpressions": [expr]}])
    assert skip_reasons(aff, node()) == [
        "its required node affinity wants feature.node.kubernetes.io/pci-10de.present In (true) "
        "(the node lacks the label)"
    ]


def test_the_most_fundamental_reason_comes_first() -> None:
    """Arch before taint before the label the operator would have written had it reached the
    node: the missing deploy label is a consequence, not the cause."""
    n = node({"kubernetes.io/arch": "arm64"},
             taints=[{"key": "dedicated", "value": "inference", "effect": "NoExecute"}])  # fmt: skip
    reasons = skip_reasons(
        placement({"nvidia.com/gpu.deploy.driver": "true"}, arch_term("amd64")), n
    )
    assert [r.split(":")[0] for r in reasons] == [
        "it excludes the node's CPU architecture",
        "it does not tolerate the node's taint dedicated=inference",
        "its nodeSelector wants nvidia.com/gpu.deploy.driver=true (the node lacks the label)",
    ]


def daemonset(name: str, labels: dict[str, str], tpl: Obj, owner: str | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": "gpu-operator", "labels": labels}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "cluster-policy"}]
    return {"kind": "DaemonSet", "metadata": meta,
            "spec": {"template": {"metadata": {"labels": labels}, "spec": tpl}}}  # fmt: skip


NFD_IMAGE = {"containers": [{"name": "worker", "image": "registry.k8s.io/nfd/node-feature-discovery:v0.16.6"}]}  # fmt: skip


@pytest.mark.parametrize(
    ("name", "labels", "found"),
    [
        ("gpu-operator-node-feature-discovery-worker",
         {"app.kubernetes.io/name": "node-feature-discovery", "role": "worker"}, True),
        ("nfd-worker", {"app": "nfd-worker"}, True),
        ("gpu-operator-node-feature-discovery-master",
         {"app.kubernetes.io/name": "node-feature-discovery", "role": "master"}, False),
        ("fluent-bit", {"app": "fluent-bit"}, False),
    ],
)  # fmt: skip
def test_the_nfd_worker_is_recognised(name: str, labels: dict[str, str], found: bool) -> None:
    tpl = NFD_IMAGE if found or "node-feature" in name else {"containers": []}
    assert (Component.nfd_worker(daemonset(name, labels, tpl)) is not None) is found


def view_with_driver(tpl: Obj, *, nfd: Obj | None = None) -> StackView:
    app = {"app": "nvidia-driver-daemonset"}
    driver = Component.of_daemonset(daemonset(app["app"], app, tpl, owner="ClusterPolicy"))
    assert driver is not None
    workers = [w for w in [Component.nfd_worker(nfd)] if w] if nfd else []
    return StackView(components=[driver], pods=[], policies=[], operator=None,
                     daemonsets_known=True, nfd_workers=workers)  # fmt: skip


DRIVER_TPL = {"nodeSelector": {"nvidia.com/gpu.deploy.driver": "true"}, "tolerations": GPU_TOL,
              "containers": [{"name": "nvidia-driver-ctr", "image": "nvcr.io/nvidia/driver:550"}]}  # fmt: skip
TAINT = [{"key": "dedicated", "value": "inference", "effect": "NoSchedule"}]
ACCEL = {"k8s.amazonaws.com/accelerator": "nvidia-l4"}


def test_an_ec2_node_the_operator_does_not_reach_has_no_guessed_host_driver() -> None:
    nfd = daemonset("nfd-worker", {"app": "nfd-worker"}, {**NFD_IMAGE, "tolerations": GPU_TOL})
    plan = view_with_driver(DRIVER_TPL, nfd=nfd).plan(node(ACCEL, TAINT))
    driver = plan.role("driver")
    assert driver.host is None and not driver.serving
    assert driver.skipping[0][0].name == "nvidia-driver-daemonset"
    assert "dedicated=inference:NoSchedule" in driver.skipping[0][1]
    assert [(w.name, why) for w, why in plan.nfd_skipping] == [
        ("nfd-worker", "it does not tolerate the node's taint dedicated=inference:NoSchedule")
    ]


@pytest.mark.parametrize(
    ("labels", "provider", "host"),
    [
        ({"eks.amazonaws.com/nodegroup": "gpu-l4"}, "aws:///us-east-1a/i-0a", HOST_DRIVER["EKS"]),
        ({"kubernetes.azure.com/accelerator": "nvidia"}, "azure:///subscriptions/x",
         HOST_DRIVER["AKS"]),
    ],
)  # fmt: skip
def test_a_managed_node_image_driver_is_still_host_installed(
    labels: dict[str, str], provider: str, host: str
) -> None:
    plan = view_with_driver(DRIVER_TPL).plan(node({**ACCEL, **labels}, TAINT, provider))
    assert plan.role("driver").host == host
    assert plan.nfd_skipping == []  # no NFD worker in this cluster: nothing to name
