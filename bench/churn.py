"""A busy cluster's change stream, applied to the fake API server while the bench triages.

Three kinds of change, in turn: a node's status refresh (the kubelet rewriting its
conditions' heartbeat times), a training pod finishing (deleted, as a Job's TTL controller
does) and a new one starting on the same node with the same GPUs. At 5,000 nodes the kubelets
alone send about 17 node updates a second (one per node every 5 minutes when nothing changes).
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from datetime import UTC, datetime

from bench.synth import pod
from kube.testing import FakeApiServer
from triage.cluster.objects import Obj

Running = tuple[str, str, str, int]  # namespace, name, node, GPUs


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
        for step in itertools.cycle((self._node_status, self._pod_finishes, self._pod_starts)):
            due += period
            if self._stop.wait(max(0.0, due - time.monotonic())):
                return
            step()
            self.applied += 1

    def _node_status(self) -> None:
        name = self._rnd.choice(self.nodes)
        node = self.server.object("Node", name)
        if node is None:
            return
        beat = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for cond in node["status"]["conditions"]:
            cond["lastHeartbeatTime"] = beat
        self.server.apply(node)

    def _pod_finishes(self) -> None:
        i = self._rnd.randrange(len(self.running))
        ns, name, node, gpu = self.running[i]
        self.server.delete("Pod", name, namespace=ns)
        # The freed slot is taken by the next start (same node, same GPUs).
        self.running[i] = self.running[-1]
        self.running[-1] = (ns, "", node, gpu)

    def _pod_starts(self) -> None:
        ns, _, node, gpu = self.running[-1]
        name = f"churn-{next(self._serial):06d}-0"
        self.server.apply(pod(name, ns, node=node, gpu=gpu, phase="Running"))
        self.running[-1] = (ns, name, node, gpu)
