"""Slim projections of raw objects: only the fields the engine reads, for the watch cache.

At 150,000 pods a full pod (managedFields, env, volumes, mounts, probes) costs several
kilobytes; the engine reads placement, requests and status. Pods of one workload also repeat
the same containers, tolerations, selectors and labels, and the same short strings (namespace,
node, phase): a `Sharer` keeps one copy of each. Shared values are never mutated: callers treat
cached objects as read-only, as with any ClusterSource. Small kinds are kept whole except
`managedFields`, which nothing reads. When the engine starts reading a new field of a pod or
node, add it here (tests compare triage through the cache with triage on full objects).
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable
from typing import Any

import orjson

from triage.cluster.objects import Obj


def _canon(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


# No resourceVersion: nothing reads it from a cached object, and without it an update that
# changes nothing else slims to an equal object, which the informer then keeps as it is.
_META = (
    "name", "namespace", "uid", "labels", "annotations", "ownerReferences",
    "creationTimestamp", "deletionTimestamp", "generation",
)  # fmt: skip
_POD_META = tuple(k for k in _META if k != "uid")  # see slim_pod
_POD_SPEC = (
    "nodeName", "nodeSelector", "affinity", "tolerations", "overhead", "priority",
    "priorityClassName", "preemptionPolicy", "runtimeClassName", "schedulingGates",
    "resourceClaims", "schedulerName", "serviceAccountName", "topologySpreadConstraints",
)  # fmt: skip
_SHARED_SPEC = (
    "nodeSelector", "affinity", "tolerations", "overhead", "resourceClaims",
    "topologySpreadConstraints",
)  # fmt: skip
_INTERNED_SPEC = (
    "nodeName", "priorityClassName", "runtimeClassName", "schedulerName",
    "serviceAccountName", "preemptionPolicy",
)  # fmt: skip
_OWNER_REF = ("apiVersion", "kind", "name", "controller")
_CONTAINER = ("name", "image", "resources", "restartPolicy", "ports")
_POD_STATUS = (
    "phase", "conditions", "reason", "message", "nominatedNodeName", "qosClass",
    "resourceClaimStatuses",
)  # fmt: skip
_CONDITION = ("type", "status", "reason", "message", "lastTransitionTime")
_CONTAINER_STATUS = ("name", "state", "lastState", "ready", "started", "restartCount")
_NODE_STATUS_DROP = ("images", "volumesInUse", "volumesAttached")
_MAX_SHARED = 200_000  # distinct shared values kept before the table starts over
_RECENT_OWNERS = 16  # owner-reference lists kept for the next objects (`Sharer.owners`)


class Sharer:
    """Returns one canonical instance for equal JSON values and short strings."""

    def __init__(self) -> None:
        self._values: dict[bytes, Any] = {}
        self._owners: dict[tuple[Any, ...], list[Obj]] = {}

    def value(self, value: Any, parts: Callable[[Any, Sharer], None] | None = None) -> Any:
        """The canonical instance of `value`. When `value` is new, `parts(value, self)`
        first shares its parts in place: a value seen before (most pod statuses) skips that."""
        if not value:
            return value
        # A digest, not the canonical JSON itself: most values (a pod's spec with its node,
        # its owner) are seen once, and a key as large as the value would double their cost.
        key = hashlib.blake2b(_canon(value), digest_size=16).digest()
        found = self._values.get(key)
        if found is not None:
            return found
        if parts is not None:
            parts(value, self)
        if len(self._values) >= _MAX_SHARED:
            self._values.clear()
        self._values[key] = value
        return value

    @staticmethod
    def text(value: Any) -> Any:
        return sys.intern(value) if isinstance(value, str) and len(value) <= 64 else value

    def owners(self, refs: list[Obj]) -> list[Obj]:
        """One list of owner references for neighbouring objects with the same owners: the
        pods of a Job or of a DaemonSet come one after another in a list's name order (and
        in a watch's bursts). Only the last few are kept: most owners have a single pod, and
        a table of every owner would cost more in keys than it saved."""
        try:
            key = tuple([tuple([r.get(k, _ABSENT) for k in _OWNER_REF]) for r in refs])
            found = self._owners.get(key)
        except (AttributeError, TypeError):  # not a dict, or an odd value: kept unshared
            return [{k: self.text(v) for k, v in _pick(r, _OWNER_REF).items()} for r in refs]
        if found is not None:
            return found
        made = [
            {k: self.text(v) for k, v in zip(_OWNER_REF, values, strict=True) if v is not _ABSENT}
            for values in key
        ]
        if key:
            if len(self._owners) >= _RECENT_OWNERS:
                self._owners.clear()
            self._owners[key] = made
        return made


_ABSENT = object()  # a field an owner reference does not have (not the same as null)


def _pick(src: Obj | None, keys: tuple[str, ...]) -> Obj:
    if not src:
        return {}
    return {k: src[k] for k in keys if k in src}


def _head(obj: Obj) -> Obj:
    return {"kind": obj.get("kind"), "apiVersion": obj.get("apiVersion")}


def slim_meta(obj: Obj, sharer: Sharer, keys: tuple[str, ...] = _META) -> Obj:
    meta = _pick(obj.get("metadata"), keys)
    if "namespace" in meta:
        meta["namespace"] = sharer.text(meta["namespace"])
    for k in ("labels", "annotations"):
        if k in meta:
            meta[k] = sharer.value(meta[k])
    if meta.get("ownerReferences"):
        meta["ownerReferences"] = sharer.owners(meta["ownerReferences"])
    return meta


def _condition(cond: Obj) -> Obj:
    # Judgment call: a True condition's transition time is dropped. Every running pod has
    # four of them (~300 bytes each at 150,000 pods) and the engine reads when a pod became
    # unschedulable or unready, not since when it has been fine.
    if cond.get("status") == "True":
        return _pick(cond, _CONDITION[:-1])
    return _pick(cond, _CONDITION)


# Of a container's state, what the engine reads: that it runs, why it waits, how it ended.
# When a container started or finished is not read; without those times the statuses of
# running and of completed containers are the same for every pod of a workload, and shared.
_STATE_DROP = ("startedAt", "finishedAt", "containerID")


def _state(state: Obj | None) -> Obj | None:
    if not state:
        return state
    out = {
        k: {f: v for f, v in (sub or {}).items() if f not in _STATE_DROP}
        for k, sub in state.items()
    }
    for k, sub in out.items():
        if not sub and state.get(k):  # running: {startedAt} stays truthy: a marker, not {}
            out[k] = {"kept": False}
    return out


def _container_status(cs: Obj) -> Obj:
    out = _pick(cs, _CONTAINER_STATUS)
    for k in ("state", "lastState"):
        if k in out:
            out[k] = _state(out[k])
    return out


def _status_parts(status: Obj, sharer: Sharer) -> None:
    """Shares the parts of a new pod status in place: True conditions and container statuses
    (equal across the pods of a workload), the lists of them, and short strings."""
    for k in ("phase", "qosClass", "reason"):
        if k in status:
            status[k] = sharer.text(status[k])
    if status.get("conditions"):
        status["conditions"] = sharer.value(
            [
                sharer.value(c)
                if c.get("status") == "True"
                else {k: sharer.text(v) for k, v in c.items()}
                for c in status["conditions"]
            ]
        )
    for k in ("containerStatuses", "initContainerStatuses"):
        if k in status:
            status[k] = sharer.value([sharer.value(c) for c in status[k]])


def slim_pod(obj: Obj, sharer: Sharer) -> Obj:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    out_spec = _pick(spec, _POD_SPEC)
    for k in _SHARED_SPEC:
        if k in out_spec:
            out_spec[k] = sharer.value(out_spec[k])
    for k in _INTERNED_SPEC:
        if k in out_spec:
            out_spec[k] = sharer.text(out_spec[k])
    for k in ("containers", "initContainers"):
        if spec.get(k):
            out_spec[k] = sharer.value([_pick(c, _CONTAINER) for c in spec[k]])
    # Of the volumes, only claims matter (to the volume filters); the service-account token
    # volume every pod has is unique per pod and would cost ~200 bytes each.
    claims = [
        v for v in spec.get("volumes") or () if "persistentVolumeClaim" in v or "ephemeral" in v
    ]
    if claims:
        out_spec["volumes"] = [
            {
                "name": sharer.text(v.get("name")),
                **{k: v[k] for k in ("persistentVolumeClaim", "ephemeral") if k in v},
            }
            for v in claims
        ]
    out_status = _pick(status, _POD_STATUS)
    if status.get("conditions"):
        out_status["conditions"] = [_condition(c) for c in status["conditions"]]
    for k in ("containerStatuses", "initContainerStatuses"):
        if status.get(k):
            out_status[k] = [_container_status(c) for c in status[k]]
    # Judgment call: the engine reads a pod's uid only to match it against a ResourceClaim's
    # reservations, so a pod without claims is kept without it: its metadata then has five
    # keys and fits the smallest dict (165 bytes less per pod, 25 MB at 150,000 pods).
    keys = _META if "resourceClaims" in spec else _POD_META
    # Pods of one workload on one node have equal specs, and running pods of one shape equal
    # statuses: one copy of each for all of them.
    return _head(obj) | {
        "metadata": slim_meta(obj, sharer, keys),
        "spec": sharer.value(out_spec),
        "status": sharer.value(out_status, _status_parts),
    }


def slim_node(obj: Obj, sharer: Sharer) -> Obj:
    status = {k: v for k, v in (obj.get("status") or {}).items() if k not in _NODE_STATUS_DROP}
    # The kubelet rewrites every condition's heartbeat time every few minutes (17 updates a
    # second at 5,000 nodes); nothing reads it from the cache (a snapshot's age comes from a
    # full object), and without it a heartbeat slims to the node the cache already holds.
    if status.get("conditions"):
        status["conditions"] = [
            {k: v for k, v in c.items() if k != "lastHeartbeatTime"} for c in status["conditions"]
        ]
    spec = obj.get("spec") or {}
    return _head(obj) | {"metadata": slim_meta(obj, sharer), "spec": spec, "status": status}


def slim_other(obj: Obj, sharer: Sharer) -> Obj:
    meta = obj.get("metadata") or {}
    if "managedFields" not in meta:
        return obj
    return obj | {"metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


def projection(kind: str, sharer: Sharer | None = None) -> Callable[[Obj], Obj]:
    """The projection for `kind`, sharing equal values through `sharer` (a fresh one if None)."""
    fn = {"Pod": slim_pod, "Node": slim_node}.get(kind, slim_other)
    share = sharer or Sharer()
    return lambda obj: fn(obj, share)


# --- typed list decoding --------------------------------------------------------------------
