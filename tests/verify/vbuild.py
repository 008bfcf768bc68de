"""Small, realistic clusters for node verification: one healthy GPU node per call, then the
tests break exactly one thing. Builds on tests/builders.py (node and pod shapes)."""

from __future__ import annotations

from typing import Any

from tests.builders import OPNS, namespace, node, operator_pod
from triage import MemorySource

Obj = dict[str, Any]
OPERANDS = {
    "driver": "nvidia-driver-daemonset",
    "toolkit": "nvidia-container-toolkit-daemonset",
    "validator": "nvidia-operator-validator",
    "device-plugin": "nvidia-device-plugin-daemonset",
    "gfd": "gpu-feature-discovery",
    "dcgm-exporter": "nvidia-dcgm-exporter",
}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def gpu_node(name: str, *, runtime: str = "containerd://1.7.22", **kw: Any) -> Obj:
    kw.setdefault("taints", [GPU_TAINT])
    n = node(name, **kw)
    n["status"]["nodeInfo"] = {
        "containerRuntimeVersion": runtime,
        "kubeletVersion": "v1.31.4",
        "kernelVersion": "5.15.0-1071-aws",
        "osImage": "Ubuntu 22.04.5 LTS",
    }
    return n


def operand(node_name: str, component: str, *, state: str = "ok") -> Obj:
    app = OPERANDS[component]
    return operator_pod(node_name, app, state=state, name=f"{app}-{node_name[-5:]}")


def operands(
    node_name: str, *, skip: tuple[str, ...] = (), states: dict[str, str] | None = None
) -> list[Obj]:
    return [
        operand(node_name, c, state=(states or {}).get(c, "ok")) for c in OPERANDS if c not in skip
    ]


def cluster_policy(**spec: Any) -> Obj:
    base: Obj = {"operator": {"runtimeClass": "nvidia"}, "driver": {"enabled": True}}
    return {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": base | spec,
        "status": {"state": "ready"},
    }


def runtime_class(name: str = "nvidia") -> Obj:
    return {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": name},
        "handler": "nvidia",
    }


def healthy(name: str = "gpu-a100-01", **kw: Any) -> list[Obj]:
    return [gpu_node(name, **kw), *operands(name)]


def cpu_node(name: str = "cpu-01") -> Obj:
    n = node(name, product=None)
    n["status"]["nodeInfo"] = {"containerRuntimeVersion": "containerd://1.7.22"}
    return n


def build(*objs: Obj | list[Obj], policy: Obj | None = None, rc: bool = True) -> MemorySource:
    flat: list[Obj] = [namespace(OPNS), policy or cluster_policy()]
    if rc:
        flat.append(runtime_class())
    for o in objs:
        flat.extend(o if isinstance(o, list) else [o])
    return MemorySource(flat, cluster_name="vtest")
