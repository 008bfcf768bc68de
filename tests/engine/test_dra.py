"""GPUs claimed through Dynamic Resource Allocation: why a ResourceClaim stays unallocated."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import H100, cluster, node, operator_pods, pod, without_gpus
from triage import Layer, TriageReport, triage
from triage.layers.scheduling.dra_devices import Device, selector_matches

DRIVER = "gpu.nvidia.com"


def device_class(name: str = "gpu.nvidia.com") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
    }


def slice_(node_name: str, devices: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-{DRIVER}-x1"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": dev,
                    "attributes": {"productName": {"string": product}, "type": {"string": "gpu"}},
                    "capacity": {"memory": {"value": "80Gi" if "80" in product else "24Gi"}},
                }
                for dev, product in devices
            ],
        },
    }


def claim(
    name: str,
    *,
    selectors: list[str] | None = None,
    allocated: list[str] | None = None,
    node_name: str = "a1",
    reserved_for: str | None = None,
) -> dict[str, Any]:
    c: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.nvidia.com",
                            "count": 1,
                            "selectors": [{"cel": {"expression": s}} for s in selectors or []],
                        },
                    }
                ]
            }
        },
        "status": {},
    }
    if allocated:
        c["status"]["allocation"] = {
            "devices": {
                "results": [
                    {"request": "gpu", "driver": DRIVER, "pool": node_name, "device": d}
                    for d in allocated
                ]
            }
        }
    if reserved_for:
        c["status"]["reservedFor"] = [{"resource": "pods", "name": reserved_for, "uid": "u-other"}]
    return c


def dra_pod(claim_name: str = "my-gpu") -> dict[str, Any]:
    p = pod("train", gpus=0, selector={})
    p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim_name}]
    p["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return p


def plain_node(name: str) -> dict[str, Any]:
    # DRA nodes advertise no nvidia.com/gpu: the DRA driver replaces the device plugin
    return without_gpus(node(name))


def ops(name: str) -> list[dict[str, Any]]:
    return [p for p in operator_pods(name) if "device-plugin" not in p["metadata"]["name"]]


def run(*objs: Any) -> TriageReport:
    return triage(cluster(*objs), namespace="team-a", name="train")


def test_no_resource_slices_means_the_dra_kubelet_plugin_is_not_running() -> None:
    r = run(plain_node("a1"), ops("a1"), device_class(), claim("my-gpu"), dra_pod())
    assert r.failing_layer == Layer.DEVICE_PLUGIN
    f = r.finding(Layer.DEVICE_PLUGIN)
    assert "device-plugin.dra-no-slices" in f.codes
    assert DRIVER in " ".join(f.evidence)


def test_missing_device_class() -> None:
    r = run(
        plain_node("a1"),
        ops("a1"),
        slice_("a1", [("gpu-0", "NVIDIA A100 80GB")]),
        claim("my-gpu"),
        dra_pod(),
    )
    assert "device-plugin.dra-deviceclass-missing" in r.finding(Layer.DEVICE_PLUGIN).codes


def test_no_device_matches_the_claim_selectors() -> None:
    sel = ["device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"]
    r = run(
        plain_node("a1"),
        ops("a1"),
        device_class(),
        slice_("a1", [("gpu-0", "NVIDIA A100 80GB")]),
        claim("my-gpu", selectors=sel),
        dra_pod(),
    )
    assert r.failing_layer == Layer.SCHEDULING
    f = r.finding(Layer.SCHEDULING)
    assert "scheduling.dra-no-matching-device" in f.codes
    assert "my-gpu" in " ".join(f.evidence) and "gpu.nvidia.com" in " ".join(f.evidence)


def test_all_matching_devices_allocated_to_other_claims() -> None:
    other = claim("their-gpu", allocated=["gpu-0"], reserved_for="someone-else")
    r = run(
        plain_node("a1"),
        ops("a1"),
        device_class(),
        slice_("a1", [("gpu-0", "NVIDIA A100 80GB")]),
        other,
        claim("my-gpu"),
        dra_pod(),
    )
    assert r.failing_layer == Layer.SCHEDULING
    f = r.finding(Layer.SCHEDULING)
    assert "scheduling.dra-devices-allocated" in f.codes
    assert "their-gpu" in " ".join(f.evidence)


def test_free_matching_device_means_nothing_blocks() -> None:
    r = run(
        plain_node("a1"),
        ops("a1"),
        device_class(),
        slice_("a1", [("gpu-0", "NVIDIA A100 80GB"), ("gpu-1", "NVIDIA A100 80GB")]),
        claim("their-gpu", allocated=["gpu-0"]),
        claim("my-gpu"),
        dra_pod(),
    )
    assert r.failing_layer is None


def test_a_claim_reserved_by_another_pod_is_shared_not_a_blocker() -> None:
    # a ResourceClaim may be reserved for up to 256 consumers: another pod on its node may
    # use it too (the claim's node, not its other consumer, is the constraint)
    mine = claim("my-gpu", allocated=["gpu-0"], reserved_for="other-pod")
    r = run(
        plain_node("a1"),
        ops("a1"),
        device_class(),
        slice_("a1", [("gpu-0", "NVIDIA A100 80GB")]),
        mine,
        dra_pod(),
    )
    assert r.failing_layer is None, r.headline


def test_a_claim_whose_consumer_list_is_full_blocks() -> None:
    mine = claim("my-gpu", allocated=["gpu-0"])
    mine["status"]["reservedFor"] = [
        {"resource": "pods", "name": f"p{i}", "uid": f"u{i}"} for i in range(256)
    ]
    r = run(plain_node("a1"), ops("a1"), device_class(),
            slice_("a1", [("gpu-0", "NVIDIA A100 80GB")]), mine, dra_pod())  # fmt: skip
    assert r.failing_layer == Layer.SCHEDULING
    assert "shared by 256 pods" in r.finding(Layer.SCHEDULING).summary


def test_claim_from_template_not_created_yet() -> None:
    p = pod("train", gpus=0, selector={})
    p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    r = run(
        plain_node("a1"),
        ops("a1"),
        device_class(),
        slice_("a1", [("gpu-0", "NVIDIA A100 80GB")]),
        p,
    )
    assert r.failing_layer == Layer.SCHEDULING
    assert "ResourceClaimTemplate one-gpu" in r.finding(Layer.SCHEDULING).summary


def test_each_excluded_node_is_counted_once_under_one_reason() -> None:
    # a2 publishes no devices (and would mismatch the selector too); a1 publishes devices but
    # carries a taint the pod does not tolerate.
    tainted = plain_node("a1")
    tainted["metadata"]["labels"]["nvidia.com/gpu.product"] = H100
    tainted["spec"]["taints"] = [{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}]
    p = dra_pod()
    p["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": H100}
    r = run(
        plain_node("a2"),
        tainted,
        ops("a1"),
        ops("a2"),
        device_class(),
        slice_("a1", [("gpu-0", "NVIDIA H100 80GB HBM3")]),
        claim("my-gpu"),
        p,
    )
    assert r.failing_layer == Layer.SCHEDULING
    counts = next(e for e in r.finding(Layer.SCHEDULING).evidence if e.startswith("0/2 nodes"))
    assert counts == (
        "0/2 nodes can take the pod: 1 no DRA devices, 1 untolerated taint dedicated"
    ), counts


def test_driver_failure_outranks_dra_on_the_node() -> None:
    broken = [
        p
        for p in operator_pods("a1", driver="crash")
        if "device-plugin" not in p["metadata"]["name"]
    ]
    r = run(plain_node("a1"), broken, device_class(), claim("my-gpu"), dra_pod())
    assert r.failing_layer == Layer.DRIVER


def test_cel_subset() -> None:
    d = Device(
        driver=DRIVER,
        pool="p",
        name="gpu-0",
        node="a1",
        attributes={
            "productName": {"string": "NVIDIA A100 80GB"},
            "gpu.nvidia.com/index": {"int": 3},
        },
        capacity={"memory": {"value": "80Gi"}},
    )
    assert selector_matches("device.driver == 'gpu.nvidia.com'", d) is True
    assert (
        selector_matches('device.attributes["gpu.nvidia.com"].productName == "NVIDIA A100 80GB"', d)
        is True
    )
    assert selector_matches("device.attributes['gpu.nvidia.com'].index == 3", d) is True
    assert (
        selector_matches(
            "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0", d
        )
        is True
    )
    assert (
        selector_matches(
            "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('100Gi')) >= 0", d
        )
        is False
    )
    # an attribute the device does not have is a CEL runtime error: no match, as in the
    # scheduler; CEL beyond what is evaluated (arithmetic, macros) is None: "not evaluated"
    assert (
        selector_matches("device.attributes['gpu.nvidia.com'].architecture.startsWith('Hop')", d)
        is False
    )
    assert selector_matches("device.attributes['gpu.nvidia.com'].index + 1 == 4", d) is None


# --- any DRA driver, on nodes no vendor labels ----------------------------------------------

EXAMPLE = "gpu.example.com"


def bare_node(name: str, **labels: str) -> dict[str, Any]:
    """A node with no accelerator labels or resources at all: only the slices know its GPUs."""
    n = without_gpus(node(name, product=None))
    n["metadata"]["labels"] = {"kubernetes.io/hostname": name, **labels}
    return n


def example_class() -> dict[str, Any]:
    dc = device_class(EXAMPLE)
    dc["spec"]["selectors"] = [{"cel": {"expression": f'device.driver == "{EXAMPLE}"'}}]
    return dc


def example_slice(name: str, *, node_name: str | None = None, beta: bool = False,
                  selector: dict[str, Any] | None = None, models: tuple[str, ...] = ("LATEST-GPU-MODEL",)
                  ) -> dict[str, Any]:  # fmt: skip
    devices = []
    for i, model in enumerate(models):
        body = {"attributes": {"model": {"string": model}, "driverVersion": {"version": "1.0.0"}},
                "capacity": {"memory": {"value": "80Gi"}}}  # fmt: skip
        devices.append({"name": f"gpu-{i}", **({"basic": body} if beta else body)})
    spec: dict[str, Any] = {"driver": EXAMPLE, "pool": {"name": name, "generation": 1,
                            "resourceSliceCount": 1}, "devices": devices}  # fmt: skip
    if node_name:
        spec["nodeName"] = node_name
    elif selector:
        spec["nodeSelector"] = selector
    else:
        spec["allNodes"] = True
    return {
        "apiVersion": "resource.k8s.io/v1beta1" if beta else "resource.k8s.io/v1",
        "kind": "ResourceSlice", "metadata": {"name": f"{name}-{EXAMPLE}"}, "spec": spec,
    }  # fmt: skip


def example_claim(
    name: str, *, beta: bool = False, allocated_on: str | None = None
) -> dict[str, Any]:
    body = {"deviceClassName": EXAMPLE, "count": 1, "selectors": [{"cel": {"expression":
            f'device.attributes["{EXAMPLE}"].model == "LATEST-GPU-MODEL"'}}]}  # fmt: skip
    request = {"name": "gpu", **body} if beta else {"name": "gpu", "exactly": body}
    c: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1beta1" if beta else "resource.k8s.io/v1",
        "kind": "ResourceClaim", "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"devices": {"requests": [request]}}, "status": {},
    }  # fmt: skip
    if allocated_on:
        c["status"]["allocation"] = {
            "devices": {
                "results": [
                    {"request": "gpu", "driver": EXAMPLE, "pool": allocated_on, "device": "gpu-0"}
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [allocated_on]}
                        ]
                    }
                ]
            },
        }
    return c


@pytest.mark.parametrize("beta", [False, True], ids=["v1", "v1beta1"])
def test_a_free_device_of_any_driver_on_unlabelled_nodes_is_no_gpu_story(beta: bool) -> None:
    r = run(bare_node("n1"), bare_node("n2"), example_class(),
            example_slice("n1", node_name="n1", beta=beta), example_claim("my-gpu", beta=beta),
            dra_pod())  # fmt: skip
    assert r.failing_layer is None, r.headline
    assert "no GPU" not in r.headline and "NVIDIA" not in str(r.findings)


def test_devices_of_another_model_are_no_match_on_any_node() -> None:
    r = run(bare_node("n1"), example_class(),
            example_slice("n1", node_name="n1", models=("OLD-MODEL",)), example_claim("my-gpu"),
            dra_pod())  # fmt: skip
    assert r.failing_layer == Layer.SCHEDULING
    assert "scheduling.dra-no-matching-device" in r.finding(Layer.SCHEDULING).codes


def test_a_slice_for_the_nodes_a_selector_picks_serves_only_those() -> None:
    pool = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "pool", "operator": "In", "values": ["gpu"]}]}]}  # fmt: skip
    picked = run(bare_node("n1", pool="gpu"), bare_node("n2", pool="cpu"), example_class(),
                 example_slice("rack-1", selector=pool), example_claim("my-gpu"), dra_pod())  # fmt: skip
    assert picked.failing_layer is None, picked.headline
    p = dra_pod()
    p["spec"]["nodeSelector"] = {"pool": "cpu"}  # the pod may only use the node the slice skips
    elsewhere = run(bare_node("n1", pool="gpu"), bare_node("n2", pool="cpu"), example_class(),
                    example_slice("rack-1", selector=pool), example_claim("my-gpu"), p)  # fmt: skip
    assert elsewhere.failing_layer == Layer.SCHEDULING
    assert "n2" in " ".join(elsewhere.finding(Layer.SCHEDULING).evidence)


def test_an_allocated_claim_holds_the_pod_to_its_node_even_when_that_node_is_full() -> None:
    full = bare_node("n1")
    busy = pod("hog", gpus=0, cpu="96", node_name="n1", phase="Running", selector={})
    r = run(full, bare_node("n2"), busy, example_class(),
            example_slice("n1", node_name="n1"), example_slice("n2", node_name="n2"),
            example_claim("my-gpu", allocated_on="n1"), dra_pod())  # fmt: skip
    assert r.failing_layer == Layer.SCHEDULING
    f = r.finding(Layer.SCHEDULING)
    assert f.codes == ["scheduling.insufficient"] and f.summary.startswith("1 of 1 node(s)")
    assert "ResourceClaim my-gpu is already allocated" in f.evidence[0] and "(n1)" in f.evidence[0]
    assert any(e.startswith("node n1: 96/96 cpu allocated") for e in f.evidence)
    assert not any(e.startswith("node n2") for e in f.evidence)  # free, but not where its GPU is
