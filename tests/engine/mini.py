"""A compact cluster builder for rule-focused engine tests.

The realistic `kubectl -o yaml` fixtures live in tests/fixtures; these small clusters isolate
one rule at a time (which node a failure sits on, whether events exist) in a few lines.
"""

from __future__ import annotations

from typing import Any

from triage import MemorySource

Obj = dict[str, Any]
A100 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"
OPNS = "gpu-operator"


def node(
    name: str,
    *,
    product: str | None = A100,
    gpus: int = 8,
    allocatable: int | None = None,
    ready: bool = True,
    cordoned: bool = False,
    taints: list[Obj] | None = None,
    extra_labels: dict[str, str] | None = None,
    extra_resources: dict[str, str] | None = None,
) -> Obj:
    labels = {"kubernetes.io/hostname": name}
    capacity: dict[str, str] = {"cpu": "96", "memory": "1000Gi", "pods": "110"}
    alloc = dict(capacity)
    if product:
        labels |= {
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": product,
            "nvidia.com/gpu.count": str(gpus),
            "feature.node.kubernetes.io/pci-10de.present": "true",
        }
        if gpus:
            capacity["nvidia.com/gpu"] = str(gpus)
            alloc["nvidia.com/gpu"] = str(gpus if allocatable is None else allocatable)
    for k, v in (extra_resources or {}).items():
        capacity[k] = alloc[k] = v
    labels |= extra_labels or {}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"unschedulable": cordoned, "taints": list(taints or [])}
        | (
            {}
            if not cordoned
            else {
                "taints": [
                    *(taints or []),
                    {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
                ]
            }
        ),
        "status": {
            "capacity": capacity,
            "allocatable": alloc,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "Unknown",
                    "reason": "KubeletReady" if ready else "NodeStatusUnknown",
                }
            ],
        },
    }


def without_gpus(n: Obj) -> Obj:
    """The node advertising no nvidia.com/gpu (its driver or plugin is down), labels kept."""
    for key in ("capacity", "allocatable"):
        n["status"][key].pop("nvidia.com/gpu", None)
    return n


def pod(
    name: str,
    *,
    ns: str = "team-a",
    gpus: int = 1,
    resource: str = "nvidia.com/gpu",
    node_name: str | None = None,
    phase: str = "Pending",
    selector: dict[str, str] | None = None,
    tolerations: list[Obj] | None = None,
    cpu: str = "4",
    extra_spec: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    owner: tuple[str, str] | None = None,
    status: dict[str, Any] | None = None,
) -> Obj:
    limits = {resource: str(gpus)} if gpus else {}
    spec: Obj = {
        "containers": [
            {
                "name": "main",
                "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                "resources": {
                    "limits": limits,
                    "requests": {"cpu": cpu, "memory": "16Gi"} | limits,
                },
            }
        ],
        "nodeSelector": selector if selector is not None else {"nvidia.com/gpu.product": A100},
        "tolerations": tolerations or [],
    } | (extra_spec or {})
    if node_name:
        spec["nodeName"] = node_name
    meta: Obj = {
        "name": name,
        "namespace": ns,
        "labels": labels or {},
        "annotations": annotations or {},
        "creationTimestamp": "2026-12-02T13:00:00Z",
    }
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "controller": True}]
    st: Obj = {"phase": phase}
    if phase == "Running":
        st["conditions"] = [{"type": "Ready", "status": "True"}]
        st["containerStatuses"] = [{"name": "main", "ready": True, "state": {"running": {}}}]
    st |= status or {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": st}


def operator_pod(node_name: str, app: str, *, state: str = "ok", name: str | None = None) -> Obj:
    """One GPU Operator pod on a node: running, crash-looping ("crash") or not ready."""
    p = pod(
        name or f"{app}-{node_name}",
        ns=OPNS,
        gpus=0,
        node_name=node_name,
        phase="Running",
        selector={},
        labels={"app": app},
    )
    if state in ("crash", "notready"):
        p["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    if state == "crash":
        p["status"]["containerStatuses"] = [
            {
                "name": app,
                "ready": False,
                "restartCount": 12,
                "state": {
                    "waiting": {
                        "reason": "CrashLoopBackOff",
                        "message": "back-off 5m0s restarting failed container",
                    }
                },
                "lastState": {
                    "terminated": {
                        "exitCode": 1,
                        "message": "Could not resolve Linux kernel version",
                    }
                },
            }
        ]
    return p


def operator_pods(
    node_name: str, *, driver: str = "ok", plugin: str = "ok", toolkit: str = "ok"
) -> list[Obj]:
    return [
        operator_pod(node_name, "nvidia-driver-daemonset", state=driver),
        operator_pod(node_name, "nvidia-container-toolkit-daemonset", state=toolkit),
        operator_pod(node_name, "nvidia-device-plugin-daemonset", state=plugin),
    ]


def namespace(name: str, *, team: str | None = None) -> Obj:
    labels = {"gpu-triage.io/team": team} if team else {}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def event(
    *, kind: str, name: str, reason: str, message: str, ns: str = "team-a", count: int = 1
) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{reason.lower()}", "namespace": ns},
        "involvedObject": {"kind": kind, "name": name, "namespace": ns},
        "reason": reason,
        "message": message,
        "type": "Warning",
        "count": count,
        "lastTimestamp": "2026-12-02T13:55:00Z",
    }


def cluster(*objs: Obj | list[Obj]) -> MemorySource:
    flat: list[Obj] = []
    for o in objs:
        flat.extend(o if isinstance(o, list) else [o])
    if not any(o["kind"] == "Namespace" for o in flat):
        flat += [namespace("team-a"), namespace(OPNS), namespace("team-b")]
    return MemorySource(flat, cluster_name="mini")
