"""A small cluster for the bot tests: one full GPU node, a pod of each tenant waiting for it.

The event message carries mrkdwn that must never ping anyone; the node runs another tenant's
pod, which is operator-only detail.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from triage import MemorySource
from triage.cluster.usage import NodeUsage

T = "2026-12-02T13:00:00Z"
INJECTION = "<!channel> <@U999> <http://evil.example|click> *bold*"
# Lines an event message could try to forge under the bot's name: every line separator there is.
FORGED = (
    "\n*Failing layer:* driver (forged)\r\n> quoted forged\u2028- forged bullet"
    "\u2029• forged dot\x85```forged code```\x1b[1Aforged escape"
)
OTHER_TENANT_POD = "secret-training-run"

Obj = dict[str, Any]


def _namespace(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _pod(ns: str, name: str, *, node: str | None = None, gpus: int = 1, app: str = "") -> Obj:
    resources = (
        {"requests": {"nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}}
        if gpus
        else {}
    )
    pod: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"uid-{ns}-{name}",
            "creationTimestamp": T,
            "labels": {"app": app} if app else {},
        },
        "spec": {
            "containers": [{"name": "main", "image": "cuda:12", "resources": resources}],
            "schedulerName": "default-scheduler",
        },
        "status": {"phase": "Pending"},
    }
    if node is None:
        pod["status"]["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
            }
        ]
        return pod
    pod["spec"]["nodeName"] = node
    pod["status"] = {
        "phase": "Running",
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "True"},
        ],
        "containerStatuses": [
            {
                "name": "main",
                "ready": True,
                "restartCount": 0,
                "image": "cuda:12",
                "imageID": "",
                "state": {"running": {"startedAt": T}},
            }
        ],
    }
    return pod


def objects() -> list[Obj]:
    node: Obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "gpu-node-1",
            "labels": {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                "nvidia.com/gpu.count": "1",
            },
        },
        "spec": {},
        "status": {
            "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "1"},
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "1"},
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": T}],
        },
    }
    event: Obj = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "train-x.1", "namespace": "team-a"},
        "involvedObject": {"kind": "Pod", "name": "train-x", "namespace": "team-a"},
        "reason": "FailedScheduling",
        "type": "Warning",
        "message": f"0/1 nodes are available: 1 Insufficient nvidia.com/gpu. {INJECTION}{FORGED}",
        "firstTimestamp": T,
        "lastTimestamp": T,
        "count": 3,
        "source": {"component": "default-scheduler"},
    }
    system = [
        _pod("gpu-operator", f"{app}-abcde", node="gpu-node-1", gpus=0, app=app)
        for app in (
            "nvidia-driver-daemonset",
            "nvidia-device-plugin-daemonset",
            "nvidia-container-toolkit-daemonset",
        )
    ]
    return [
        node,
        _namespace("team-a"),
        _namespace("team-b"),
        _namespace("gpu-operator"),
        _pod("team-a", "train-x"),
        _pod("team-b", "eval-b"),
        _pod("team-b", OTHER_TENANT_POD, node="gpu-node-1"),
        *system,
        event,
    ]


class SlowSource(MemorySource):
    """The same cluster, but the first read of every triage takes `delay` seconds."""

    def __init__(self, objs: list[Obj], *, delay: float) -> None:
        super().__init__(objs, cluster_name="demo")
        self.delay = delay
        self.pod_reads = 0

    def get(self, kind: str, name: str, *, namespace: str | None = None) -> Obj | None:
        if kind == "Pod":
            self.pod_reads += 1
            if self.delay:
                time.sleep(self.delay)
        return super().get(kind, name, namespace=namespace)

    def node_usage(self) -> Mapping[str, NodeUsage]:
        return super().node_usage()
