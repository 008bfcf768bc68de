"""Kubernetes objects as plain dicts (`Obj`) and the accessors every layer shares: metadata,
conditions, controller owners, and one line on why a pod is unhealthy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

Obj = dict[str, Any]
T = TypeVar("T")

# A pod's annotations that the engine reads. A cached pod keeps only these (`kube.slim`): the
# rest are mostly its CNI's (addresses, container IDs, network status), unique to each pod and
# larger than all else it keeps. Reading another annotation of a pod? Add it here.
KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"  # also a label
VOLCANO_GROUP = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")
LIMIT_RANGER = "kubernetes.io/limit-ranger"  # what the LimitRanger set on the pod
POD_ANNOTATIONS = frozenset((KUEUE_QUEUE, *VOLCANO_GROUP, LIMIT_RANGER))

# The kinds a pod's owner reference names (a ReplicaSet's, in turn, its Deployment).
OWNER_KINDS = ("Job", "StatefulSet", "DaemonSet", "ReplicaSet", "Deployment")


# The labels the Job controller puts in a Job's pod template (the API server, when the Job is
# made without a manual selector): the Job's own uid and name, under both generations of keys
# (clusters before 1.27 set only the last two). A cached workload leaves out of its template's
# labels those whose value is its own (`kube.slim`), naming them under `SELF_LABELS`, so
# that the templates of a tenant's Jobs are one; `template_labels` puts them back.
JOB_SELF_LABELS = {
    "batch.kubernetes.io/controller-uid": "uid",
    "batch.kubernetes.io/job-name": "name",
    "controller-uid": "uid",
    "job-name": "name",
}
SELF_LABELS = "_selfLabels"  # a cached template's metadata: the label keys it left out


def template_labels(workload: Obj) -> dict[str, str]:
    """The labels of `workload`'s pod template, as the API server printed them."""
    tpl = ((workload.get("spec") or {}).get("template") or {}).get("metadata") or {}
    found: dict[str, str] = tpl.get("labels") or {}
    left_out = tpl.get(SELF_LABELS)
    if not left_out:
        return found
    own = meta(workload)
    whole = dict(found)
    for key in left_out:
        value = own.get(JOB_SELF_LABELS[key])
        if type(value) is str:  # it was, to be left out
            whole[key] = value
    return dict(sorted(whole.items()))  # the API server prints a map by its keys' order


def pod_terminated(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def pod_active(pod: Obj) -> bool:
    """Whether a pod takes part in placing others (a scheduler's informer lists no finished
    pod; one being deleted is going)."""
    return not pod_terminated(pod) and not (pod.get("metadata") or {}).get("deletionTimestamp")


def meta(obj: Obj) -> dict[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}


def name_of(obj: Obj) -> str:
    m = obj.get("metadata")
    if type(m) is dict:  # the usual case without a call: a sweep reads every workload's
        name = m.get("name", "")
        if type(name) is str:
            return name
    return str(meta(obj).get("name", ""))


def ns_of(obj: Obj) -> str:
    m = obj.get("metadata")
    if type(m) is dict:
        ns = m.get("namespace", "")
        if type(ns) is str:
            return ns
    return str(meta(obj).get("namespace") or "")  # `namespace: null`: none, not "None"


def labels(obj: Obj) -> dict[str, str]:
    return meta(obj).get("labels") or {}


def annotations_of(obj: Obj) -> dict[str, str]:
    return meta(obj).get("annotations") or {}


def condition(obj: Obj, ctype: str) -> Obj | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c  # type: ignore[no-any-return]
    return None


def condition_true(obj: Obj, ctype: str) -> bool | None:
    c = condition(obj, ctype)
    if c is None:
        return None
    return c.get("status") == "True"


def owner(obj: Obj) -> tuple[str, str] | None:
    refs = meta(obj).get("ownerReferences") or []
    for ref in refs:
        if ref.get("controller"):
            return str(ref.get("kind")), str(ref.get("name"))
    return (str(refs[0].get("kind")), str(refs[0].get("name"))) if refs else None


def container_states(pod: Obj) -> list[tuple[str, Obj]]:
    status = pod.get("status") or {}
    out = []
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in status.get(key) or []:
            out.append((str(cs.get("name")), cs))
    return out


def pod_problem(pod: Obj, *, messages: bool = True) -> str | None:
    """One line describing why a pod is not healthy, or None if it is running and ready.

    `messages=False` leaves out kubelet's free-text messages (which embed pod uids and
    back-off timers) and keeps the reasons and restart counts. It reads the pod's status
    alone (`triage.cluster.indexes` remembers it per status object).
    """
    status = pod.get("status") or {}
    phase = status.get("phase")
    for name, cs in container_states(pod):
        state = cs.get("state") or {}
        waiting = state.get("waiting")
        if waiting and waiting.get("reason") not in (None, "PodInitializing"):
            msg = waiting.get("message") if messages else None
            restarts = cs.get("restartCount") or 0
            counted = f" ({restarts} restarts)" if restarts and not messages else ""
            return f"container {name} {waiting.get('reason')}{counted}" + (
                f": {msg}" if msg else ""
            )
        term = state.get("terminated")
        if term and term.get("exitCode", 0) != 0 and phase != "Succeeded":
            why = term.get("reason") or "Error"
            return f"container {name} terminated {why} (exit {term.get('exitCode')})"
    if phase in ("Failed", "Unknown"):
        return f"phase {phase}" + (f": {status.get('reason')}" if status.get("reason") else "")
    if phase == "Pending":
        return "Pending"
    if phase == "Running" and condition_true(pod, "Ready") is False:
        return "running but not Ready"
    return None


class PerSpec(dict[int, tuple[Obj, Any]]):
    """Pod spec id -> (the spec, what was worked out from it alone), for work asked of one
    pod several times a triage, or of the many pods of a sweep that share one spec (the
    cache's pods of one template do); the same for a pod's status. Specs and statuses are
    replaced, never changed, so the identity check is enough; the entry keeps the object
    alive, so its id is not reused while the entry stands. Emptied when it outgrows `limit`."""

    def __init__(self, limit: int = 20_000) -> None:
        super().__init__()
        self.limit = limit

    def of(self, spec: Obj, make: Callable[[Obj], T]) -> T:
        hit = self.get(id(spec))
        if hit is not None and hit[0] is spec:
            return hit[1]  # type: ignore[no-any-return]
        out = make(spec)
        if len(self) >= self.limit:
            self.clear()
        self[id(spec)] = (spec, out)
        return out


def workload_finished(workload: Obj) -> bool:
    """Whether a Job (any workload with such conditions) completed or failed."""
    for c in (workload.get("status") or {}).get("conditions") or ():  # every workload's, a sweep
        if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return True
    return False


def workload_wanted(workload: Obj) -> int:
    """The pods a workload asks for at once: a Job's parallelism, another's replicas."""
    spec = workload.get("spec") or {}
    if workload.get("kind") == "Job":
        return int(spec.get("parallelism", 1) or 0)
    return int(spec.get("replicas", 1) or 0)


def wants_pods(workload: Obj) -> bool:
    """Whether a workload wants pods: not finished, and asking for some or suspended (a
    queue holds it)."""
    if workload_finished(workload):  # first: a finished Job's status is shared, its spec not
        return False
    return workload_wanted(workload) != 0 or (workload.get("spec") or {}).get("suspend") is True
