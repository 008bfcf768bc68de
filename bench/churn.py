"""A busy cluster's change stream, applied to the fake API server while the bench triages.

Three kinds of change, in turn: a node's status refresh (the kubelet rewriting its
conditions' heartbeat times), a training Job finishing (its Job deleted by the TTL controller,
then its pod) and a new one starting on the same node with the same GPUs (the Job, its pod,
then the Job's status). At 5,000 nodes the kubelets alone send about 17 node updates a
second (one per node every 5 minutes when nothing changes).
`one(kind)` applies a single change (those, or a driver pod crashing on a healthy node) and
says which object it touched, for the bench's re-sweeps.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import threading
import time
from datetime import UTC, datetime

from bench.synth import OPERATOR_NS, job, pod
from kube.testing import FakeApiServer
from triage.cluster.objects import Obj

Running = tuple[str, str, str, int]  # namespace, name, node, GPUs
Touched = tuple[str, str, str, bool]  # kind, namespace, name, deleted


def running_pods(objs: list[Obj]) -> list[Running]:
    """The tenants' running pods of a synthetic cluster (the ones that may finish)."""
    out = []
    for o in objs:
        spec, status = o.get("spec") or {}, o.get("status") or {}
        if o["kind"] != "Pod" or status.get("phase") != "Running":
            continue
        ns = o["metadata"]["namespace"]
        if ns.startswith("team-"):
            limits = spec["containers"][0]["resources"]["limits"]
            gpu = int(limits.get("nvidia.com/gpu", 0))
            out.append((ns, o["metadata"]["name"], spec["nodeName"], gpu))
    return out


class Churn:
    """Applies `rate` changes a second on a thread until `stop()`; counts what it applied."""

    def __init__(
        self,
        server: FakeApiServer,
        *,
        nodes: list[str],
        running: list[Running],
        rate: float,
        seed: int = 1,
    ) -> None:
        self.server, self.nodes, self.running, self.rate = server, nodes, running, rate
        self.applied = 0
        self._rnd = random.Random(seed)
        self._serial = itertools.count()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="churn", daemon=True)

    def start(self) -> Churn:
        if self.rate > 0:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        period, due = 1.0 / self.rate, time.monotonic()
        for step in itertools.cycle(("heartbeat", "finish", "start")):
            due += period
            if self._stop.wait(max(0.0, due - time.monotonic())):
                return
            self.one(step)

    def one(self, kind: str) -> Touched:
        """Apply one change now: "heartbeat", "finish" (a running pod ends), "start" or
        "crash" (the NVIDIA driver pod of a healthy GPU node goes into CrashLoopBackOff)."""
        steps = {"heartbeat": self._node_status, "finish": self._pod_finishes,
                 "start": self._pod_starts, "crash": self._driver_crashes}  # fmt: skip
        touched = steps[kind]()
        self.applied += 1
        return touched

    def _node_status(self) -> Touched:
        name = self._rnd.choice(self.nodes)
        node = self.server.object("Node", name)
        if node is not None:
            beat = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            for cond in node["status"]["conditions"]:
                cond["lastHeartbeatTime"] = beat
            self.server.apply(node)
        return ("Node", "", name, False)

    def _pod_finishes(self) -> Touched:
        i = self._rnd.randrange(len(self.running))
        ns, name, node, gpu = self.running[i]
        # Its Job's TTL ran out: the Job is deleted, then its pod by the garbage collector.
        with contextlib.suppress(KeyError):
            self.server.delete("Job", name.rsplit("-", 1)[0], namespace=ns)
        self.server.delete("Pod", name, namespace=ns)
        # The freed slot is taken by the next start (same node, same GPUs).
        self.running[i] = self.running[-1]
        self.running[-1] = (ns, "", node, gpu)
        return ("Pod", ns, name, True)

    def _pod_starts(self) -> Touched:
        ns, _, node, gpu = self.running[-1]
        name = f"churn-{next(self._serial):06d}-0"
        started = pod(name, ns, node=node, gpu=gpu, phase="Running")
        made = job(started)
        # A new Job, the pod its controller makes, then the Job's status its controller
        # writes once the pod runs.
        self.server.apply(made | {"status": {}})
        self.server.apply(started)
        self.server.apply(made)
        self.running[-1] = (ns, name, node, gpu)
        return ("Pod", ns, name, False)

    def _driver_crashes(self) -> Touched:
        for node in self._rnd.sample(self.nodes, len(self.nodes)):
            name = f"nvidia-driver-daemonset-{node}"
            driver = self.server.object("Pod", name, namespace=OPERATOR_NS)
            status = (driver or {}).get("status") or {}
            containers = status.get("containerStatuses") or []
            if driver is None or not containers or not containers[0].get("ready"):
                continue
            containers[0]["ready"] = False
            containers[0]["restartCount"] = 5
            containers[0]["state"] = {
                "waiting": {"reason": "CrashLoopBackOff", "message": "driver not loaded"}
            }
            self.server.apply(driver)
            return ("Pod", OPERATOR_NS, name, False)
        raise LookupError("no healthy driver pod left")
