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

import json
import sys
from collections.abc import Callable
from typing import Any

from triage.cluster.objects import Obj

try:
    import orjson

    def _canon(value: Any) -> bytes:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
except ImportError:  # pragma: no cover - depends on the install

    def _canon(value: Any) -> bytes:
        return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


# No resourceVersion: nothing reads it from a cached object, and without it an update that
# changes nothing else slims to an equal object, which the informer then keeps as it is.
_META = (
    "name", "namespace", "uid", "labels", "annotations", "ownerReferences",
    "creationTimestamp", "deletionTimestamp", "generation",
)  # fmt: skip
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
    "phase", "conditions", "reason", "message", "nominatedNodeName", "startTime", "qosClass",
    "resourceClaimStatuses",
)  # fmt: skip
_CONDITION = ("type", "status", "reason", "message", "lastTransitionTime")
_CONTAINER_STATUS = ("name", "state", "lastState", "ready", "started", "restartCount")
_NODE_STATUS_DROP = ("images", "volumesInUse", "volumesAttached")
_MAX_SHARED = 200_000  # distinct shared values kept before the table starts over


class Sharer:
    """Returns one canonical instance for equal JSON values and short strings."""

    def __init__(self) -> None:
        self._values: dict[bytes, Any] = {}

    def value(self, value: Any) -> Any:
        if not value:
            return value
        key = _canon(value)
        if len(self._values) >= _MAX_SHARED:
            self._values.clear()
        return self._values.setdefault(key, value)

    @staticmethod
    def text(value: Any) -> Any:
        return sys.intern(value) if isinstance(value, str) and len(value) <= 64 else value


def _pick(src: Obj | None, keys: tuple[str, ...]) -> Obj:
    if not src:
        return {}
    return {k: src[k] for k in keys if k in src}


def _head(obj: Obj) -> Obj:
    return {"kind": obj.get("kind"), "apiVersion": obj.get("apiVersion")}


def slim_meta(obj: Obj, sharer: Sharer) -> Obj:
    meta = _pick(obj.get("metadata"), _META)
    if "namespace" in meta:
        meta["namespace"] = sharer.text(meta["namespace"])
    for k in ("labels", "annotations"):
        if k in meta:
            meta[k] = sharer.value(meta[k])
    if meta.get("ownerReferences"):
        meta["ownerReferences"] = [
            {k: sharer.text(v) for k, v in _pick(ref, _OWNER_REF).items()}
            for ref in meta["ownerReferences"]
        ]
    return meta


def _condition(cond: Obj, sharer: Sharer) -> Obj:
    # Judgment call: a True condition's transition time is dropped. Every running pod has
    # four of them (~300 bytes each at 150,000 pods) and the engine reads when a pod became
    # unschedulable or unready, not since when it has been fine.
    if cond.get("status") == "True":
        return sharer.value(_pick(cond, _CONDITION[:-1]))  # type: ignore[no-any-return]
    return {k: sharer.text(v) for k, v in _pick(cond, _CONDITION).items()}


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
    for k in ("phase", "qosClass", "reason"):
        if k in out_status:
            out_status[k] = sharer.text(out_status[k])
    if status.get("conditions"):
        out_status["conditions"] = [_condition(c, sharer) for c in status["conditions"]]
    for k in ("containerStatuses", "initContainerStatuses"):
        if status.get(k):
            out_status[k] = [
                {**_pick(c, _CONTAINER_STATUS), "name": sharer.text(c.get("name"))}
                for c in status[k]
            ]
    return _head(obj) | {
        "metadata": slim_meta(obj, sharer),
        "spec": out_spec,
        "status": out_status,
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
