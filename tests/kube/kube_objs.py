"""Small builders of raw Kubernetes objects for the kube adapter tests."""

from __future__ import annotations

from typing import Any


def pod(
    name: str,
    *,
    ns: str = "team-a",
    node: str | None = None,
    gpu: int = 0,
    cpu: str = "1",
    phase: str = "Running",
) -> dict[str, Any]:
    res: dict[str, Any] = {"requests": {"cpu": cpu, "memory": "1Gi"}}
    if gpu:
        res["limits"] = {"nvidia.com/gpu": str(gpu)}
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "x", "resources": res}]}
    if node:
        spec["nodeName"] = node
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": ns, "uid": f"uid-{ns}-{name}"},
        "spec": spec,
        "status": {"phase": phase},
    }


def node(name: str, *, gpus: int = 8) -> dict[str, Any]:
    cap = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(gpus)}
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true"}},
        "spec": {},
        "status": {"capacity": cap, "allocatable": dict(cap)},
    }


def event(name: str, *, ns: str, kind: str, obj: str, reason: str) -> dict[str, Any]:
    return {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": ns},
        "involvedObject": {"kind": kind, "name": obj, "namespace": ns},
        "reason": reason,
        "message": f"{reason} on {obj}",
        "type": "Warning",
    }
