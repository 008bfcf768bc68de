"""The optional GPU test pod: the one thing `verify-node` writes to a cluster.

A minimal pod asking for one GPU is pinned to the node (node affinity on `metadata.name`, so
the scheduler still decides and its verdict is observed; every taint tolerated, so only the
GPU itself can keep it off), runs `nvidia-smi`, and is watched by polling its phase, container
states and events until it succeeds, fails, or the timeout passes. The pod is deleted in a
`finally`: on success, failure, timeout, an API error after creation and Ctrl-C alike.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kube.client import RawClient, path_for
from kube.lists import events_for
from kube.send import send_json
from triage.cluster.events import sorted_events
from triage.cluster.objects import condition, container_states
from triage.cluster.source import KINDS, SourceError

log = logging.getLogger(__name__)

DEFAULT_IMAGE = "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"
LABEL = "gpu-triage.io/test-pod"
WRITES_ENV = "GPU_TRIAGE_ALLOW_WRITES"
# Waiting reasons that mean the container cannot start: no point waiting for the timeout.
START_FAILURES = frozenset(
    {
        "CreateContainerError",
        "RunContainerError",
        "CreateContainerConfigError",
        "StartError",
        "CrashLoopBackOff",
    }
)


def writes_enabled(*, flag: bool, environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return flag or env.get(WRITES_ENV, "").strip().lower() in ("1", "true", "yes")


def manifest(
    *, node: str, image: str = DEFAULT_IMAGE, resource: str = "nvidia.com/gpu"
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "gpu-triage-test-",
            "labels": {LABEL: "true", "app.kubernetes.io/managed-by": "gpu-triage"},
            "annotations": {"gpu-triage.io/node": node},
        },
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": [node]}
                                ]
                            }
                        ]
                    }
                }
            },
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "nvidia-smi",
                    "image": image,
                    "command": ["nvidia-smi"],
                    "resources": {"limits": {resource: "1"}},
                }
            ],
        },
    }


@dataclass
class ProbeResult:
    node: str
    namespace: str
    pod: str | None
    outcome: str  # succeeded | failed | unschedulable | timeout
    summary: str
    scheduled: bool = False
    evidence: list[str] = field(default_factory=list)
    deleted: bool = False
    seconds: float = 0.0


def _judge(pod: dict[str, Any]) -> tuple[str, str] | None:
    """(outcome, summary) once the pod's fate is known, else None."""
    status = pod.get("status") or {}
    phase = status.get("phase")
    node = (pod.get("spec") or {}).get("nodeName")
    if phase == "Succeeded":
        return "succeeded", f"nvidia-smi ran on {node} and exited 0"
    for name, cs in container_states(pod):
        state = cs.get("state") or {}
        waiting = (state.get("waiting") or {}).get("reason")
        if waiting in START_FAILURES:
            msg = " ".join(str((state.get("waiting") or {}).get("message") or "").split())[:300]
            return "failed", f"container {name} cannot start: {waiting}" + (
                f": {msg}" if msg else ""
            )
        term = state.get("terminated") or {}
        if term and term.get("exitCode", 0) != 0:
            msg = " ".join(str(term.get("message") or term.get("reason") or "").split())[:300]
            return "failed", f"container {name} exited {term.get('exitCode')}" + (
                f": {msg}" if msg else ""
            )
    if phase == "Failed":
        why = status.get("reason") or "Failed"
        msg = " ".join(str(status.get("message") or "").split())[:300]
        return "failed", f"pod failed: {why}" + (f": {msg}" if msg else "")
    return None


def _evidence(pod: dict[str, Any] | None, events: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    if pod is not None:
        sched = condition(pod, "PodScheduled")
        if sched and sched.get("status") != "True" and sched.get("message"):
            out.append(f"PodScheduled={sched.get('status')}: {sched.get('message')}")
    for ev in sorted_events(events):
        line = f"event {ev.reason}: {ev.message}"
        if line not in out:
            out.append(line)
    return out[-12:]


class TestPod:
    """Create, watch and always delete one test pod. `sleep`/`clock` are seams for tests."""

    __test__ = False  # not a pytest class, despite the name

    def __init__(
        self,
        client: RawClient,
        *,
        namespace: str = "default",
        image: str = DEFAULT_IMAGE,
        timeout: float = 180.0,
        poll: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client, self.namespace, self.image = client, namespace, image
        self.timeout, self.poll, self.sleep, self.clock = timeout, poll, sleep, clock

    def run(self, node: str) -> ProbeResult:

        rt = KINDS["Pod"]
        start = self.clock()
        _, created = send_json(
            self.client,
            method="POST",
            path=path_for(rt, namespace=self.namespace),
            verb="create",
            resource="pods",
            namespace=self.namespace,
            body=manifest(node=node, image=self.image),
        )
        name = str(((created or {}).get("metadata") or {}).get("name") or "")
        if not name:
            raise SourceError("the API server created the test pod but returned no name")
        result = ProbeResult(
            node=node, namespace=self.namespace, pod=name, outcome="timeout", summary=""
        )
        try:
            self._watch(name, result, deadline=start + self.timeout)
        finally:
            result.deleted = self._delete(name)
            result.seconds = round(self.clock() - start, 1)
        return result

    def _watch(self, name: str, result: ProbeResult, *, deadline: float) -> None:
        pod: dict[str, Any] | None = None
        while True:
            pod = self.client.get_json(
                KINDS["Pod"], verb="get", namespace=self.namespace, name=name
            )
            events = events_for(self.client, namespace=self.namespace, kind="Pod", name=name)
            result.scheduled = bool(((pod or {}).get("spec") or {}).get("nodeName"))
            result.evidence = _evidence(pod, events)
            if pod is None:
                result.outcome, result.summary = (
                    "failed",
                    "the test pod disappeared before finishing",
                )
                return
            judged = _judge(pod)
            if judged is not None:
                result.outcome, result.summary = judged
                return
            if self.clock() >= deadline:
                if result.scheduled:
                    result.outcome = "timeout"
                    result.summary = f"bound to {result.node} but not finished within {self.timeout:g}s (image pull?)"
                else:
                    result.outcome = "unschedulable"
                    result.summary = f"not scheduled onto {result.node} within {self.timeout:g}s"
                return
            self.sleep(self.poll)

    def _delete(self, name: str) -> bool:

        try:
            status, _ = send_json(
                self.client,
                method="DELETE",
                path=path_for(KINDS["Pod"], namespace=self.namespace, name=name),
                verb="delete",
                resource="pods",
                namespace=self.namespace,
                query=[("gracePeriodSeconds", "0")],
                body={
                    "apiVersion": "v1",
                    "kind": "DeleteOptions",
                    "propagationPolicy": "Background",
                },
            )
        except SourceError as e:
            log.warning(
                "could not delete test pod %s/%s (%s): run kubectl -n %s delete pod %s",
                self.namespace,
                name,
                e,
                self.namespace,
                name,
            )
            return False
        return status in (200, 202, 404)
