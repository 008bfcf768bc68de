"""Slim projections of raw objects: only the fields the engine reads, for the watch cache.

At 150,000 pods a full pod (managedFields, env, volumes, mounts, probes) costs several
kilobytes; the engine reads placement, requests and status. What pods have equal (containers,
tolerations, selectors, labels, whole specs and statuses, short strings) is kept once
(`kube.share`); a pod's spec and status are looked up by what their slim forms keep before
anything is made of them; what remains a pod's own is made of dicts as small as CPython makes
them (`kube.compact`). Of a pod's annotations, only those the engine reads are kept
(`POD_ANNOTATIONS`: the rest are mostly its CNI's, unique to it). Small kinds are kept whole
except `managedFields`, which nothing reads. When the engine starts reading a new field of
a pod or node, add it here (tests compare triage through the cache with triage on full
objects).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Hashable
from contextlib import suppress
from sys import intern
from typing import Any

import orjson

from kube.compact import compact, compacted
from kube.decode import TEMPLATED, WORKLOAD_SPEC, Text, spec_part
from kube.share import ABSENT, Sharer, digest
from triage.cluster.objects import JOB_SELF_LABELS, POD_ANNOTATIONS, SELF_LABELS, Obj
from triage.layers.stacks.components import pod_component

# No resourceVersion: nothing reads it from a cached object, and without it an update that
# changes nothing else slims to an equal object, which the informer then keeps as it is.
_META = frozenset((
    "name", "namespace", "uid", "labels", "annotations", "ownerReferences",
    "creationTimestamp", "deletionTimestamp", "generation",
))  # fmt: skip
_POD_META = _META - {"uid"}  # see slim_pod
_POD_SPEC = frozenset((
    "nodeName", "nodeSelector", "affinity", "tolerations", "overhead", "priority",
    "priorityClassName", "preemptionPolicy", "runtimeClassName", "schedulingGates",
    "resourceClaims", "schedulerName", "serviceAccountName", "topologySpreadConstraints",
))  # fmt: skip
_SHARED_SPEC = (
    "nodeSelector", "affinity", "tolerations", "overhead", "resourceClaims",
    "topologySpreadConstraints",
)  # fmt: skip
_INTERNED_SPEC = (
    "nodeName", "priorityClassName", "runtimeClassName", "schedulerName",
    "serviceAccountName", "preemptionPolicy",
)  # fmt: skip
_CONTAINER = frozenset(("name", "image", "resources", "restartPolicy", "ports"))
_POD_STATUS = frozenset((
    "phase", "conditions", "reason", "message", "nominatedNodeName", "qosClass",
    "resourceClaimStatuses",
))  # fmt: skip
_CONDITION = frozenset(("type", "status", "reason", "message", "lastTransitionTime"))
_TRUE_CONDITION = _CONDITION - {"lastTransitionTime"}
_CONTAINER_STATUS = frozenset(("name", "state", "lastState", "ready", "started", "restartCount"))
_CONTAINER_STATUS_PLAIN = ("name", "ready", "started", "restartCount")
_NODE_STATUS_DROP = ("images", "volumesInUse", "volumesAttached")
_NODE_SHARED = ("capacity", "allocatable", "conditions", "nodeInfo", "daemonEndpoints")
_OBJECT = ("kind", "apiVersion", "metadata", "spec", "status")


def _pick(src: Obj | None, keys: frozenset[str]) -> Obj:
    # Over the object's own keys: decoded typed (`kube.decode`), it has few beyond these.
    out: Obj = {}
    if src:
        for k, v in src.items():  # a loop: a comprehension is a call of its own (per pod)
            if k in keys:
                out[k] = v
    return out


def slim_meta(
    obj: Obj,
    sharer: Sharer,
    keys: frozenset[str] = _META,
    *,
    share_labels: bool = True,
    annotations: frozenset[str] | None = None,
) -> Obj:
    """The metadata the engine reads: with `annotations`, only the annotations of those keys
    (none at all when it has none of them)."""
    meta = _pick(obj.get("metadata"), keys)
    if sharer.kind is not None:  # a new version of a cached object: the strings it had
        sharer.earlier(meta)
    # Objects created in the same second (a Job's pods, a ReplicaSet scaling up) share their
    # creation time.
    for k in ("namespace", "creationTimestamp"):
        v = meta.get(k)
        if type(v) is str:
            meta[k] = intern(v)
    refs = meta.get("ownerReferences")
    if refs:
        meta["ownerReferences"] = refs = sharer.owners(refs, meta.get("namespace"))
    if share_labels and "labels" in meta:
        meta["labels"] = sharer.labels(meta["labels"], refs, meta.get("name"))
    if "annotations" in meta:
        kept = meta["annotations"]
        if annotations is not None and type(kept) is dict:
            kept = {k: v for k, v in kept.items() if k in annotations}
            if not kept:
                del meta["annotations"]
                return compacted(meta)
        meta["annotations"] = sharer.value(kept)
    return compacted(meta)


def _condition(cond: Obj) -> Obj:
    # Judgment call: a True condition's transition time is dropped. Every running pod has
    # four of them (~300 bytes each at 150,000 pods) and the engine reads when a pod became
    # unschedulable or unready, not since when it has been fine.
    if cond.get("status") == "True":
        return _pick(cond, _TRUE_CONDITION)
    return _pick(cond, _CONDITION)


def _status_key(status: Obj) -> Hashable:
    """What the slim form of a pod status (`_slim_status`) is made of, as a hashable key:
    every field it keeps, in the decoded order, and of each condition and container state
    the fields it keeps. Raises AttributeError for a part that is not a mapping; a key with
    a part that is not a plain value raises TypeError when looked up. (Loops, not
    comprehensions: this runs for every pod of a list, and each comprehension is a call.)"""
    parts: list[tuple[str, Any]] = []
    for k, v in status.items():
        if k == "conditions":
            conditions: list[tuple[Any, ...]] = []
            for c in v or ():
                get = c.get
                if get("status") == "True":  # when it became true is dropped
                    conditions.append((get("type", ABSENT), get("reason", ABSENT),
                                       get("message", ABSENT)))  # fmt: skip
                else:
                    conditions.append((get("type", ABSENT), get("status", ABSENT),
                                       get("reason", ABSENT), get("message", ABSENT),
                                       get("lastTransitionTime", ABSENT)))  # fmt: skip
            v = tuple(conditions)
        elif k == "containerStatuses" or k == "initContainerStatuses":
            containers: list[tuple[Any, ...]] = []
            for cs in v or ():
                get = cs.get
                containers.append((get("name", ABSENT), get("ready", ABSENT),
                                   get("started", ABSENT), get("restartCount", ABSENT),
                                   _state_key(get("state", ABSENT)),
                                   _state_key(get("lastState", ABSENT))))  # fmt: skip
            v = tuple(containers)
        elif k not in _POD_STATUS:
            continue
        parts.append((k, v))
    return tuple(parts)  # looking it up raises TypeError for an unhashable part


def _state_key(state: Any) -> Hashable:
    if not state or state is ABSENT:
        return (ABSENT, state is None, state is ABSENT)
    key: list[Any] = []
    for k, sub in state.items():
        key.append(k)
        key.append(not sub)
        for f, x in (sub or {}).items():
            if f not in _STATE_DROP:
                key.append(f)
                key.append(x)
        key.append(_END)
    return tuple(key)


_END = object()  # ends a state's fields in its key


# Of a container's state, what the engine reads: that it runs, why it waits, how it ended.
# When a container started or finished is not read, but for device plugins (`_timed`);
# without those times the statuses of running and of completed containers are the same for
# every pod of a workload, and shared.
_STATE_DROP = ("startedAt", "finishedAt", "containerID")
_TIMED_STATE_DROP = ("finishedAt", "containerID")


def _state(state: Obj | None, drop: tuple[str, ...] = _STATE_DROP) -> Obj | None:
    if not state:
        return state
    out = {k: {f: v for f, v in (sub or {}).items() if f not in drop} for k, sub in state.items()}
    for k, sub in out.items():
        if not sub and state.get(k):  # running: {startedAt} stays truthy: a marker, not {}
            out[k] = {"kept": False}
    return out


def _container_status(cs: Obj, drop: tuple[str, ...] = _STATE_DROP) -> Obj:
    out = _pick(cs, _CONTAINER_STATUS)
    for k in ("state", "lastState"):
        if k in out:
            out[k] = _state(out[k], drop)
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


def _spec_parts(spec: Obj, sharer: Sharer) -> None:
    """Shares the parts of a new pod spec in place: what pods of other shapes or on other
    nodes have equal (containers, tolerations, selectors), and short strings."""
    for k in _SHARED_SPEC:
        if k in spec:
            spec[k] = sharer.value(spec[k])
    for k in _INTERNED_SPEC:
        if k in spec:
            spec[k] = sharer.text(spec[k])
    for k in ("containers", "initContainers"):
        if k in spec:
            spec[k] = sharer.value(spec[k])


def _slim_spec(spec: Obj, claims: list[Obj], sharer: Sharer) -> Obj:
    out = _pick(spec, _POD_SPEC)
    for k in ("containers", "initContainers"):
        if spec.get(k):
            out[k] = [_pick(c, _CONTAINER) for c in spec[k]]
    if claims:
        out["volumes"] = [
            {
                "name": sharer.text(v.get("name")),
                **{k: v[k] for k in ("persistentVolumeClaim", "ephemeral") if k in v},
            }
            for v in claims
        ]
    _spec_parts(out, sharer)
    return out


def _slim_status(status: Obj, drop: tuple[str, ...] = _STATE_DROP) -> Obj:
    out = _pick(status, _POD_STATUS)
    if status.get("conditions"):
        out["conditions"] = [_condition(c) for c in status["conditions"]]
    for k in ("containerStatuses", "initContainerStatuses"):
        if status.get(k):
            out[k] = [_container_status(c, drop) for c in status[k]]
    return out


def _timed(obj: Obj) -> bool:
    """Whether the engine reads when the pod's containers started: a device plugin's, whose
    start a kubelet restart is compared with (`triage.layers.node_context`). Its status is
    then its own, not shared: one pod per GPU node."""
    refs = (obj.get("metadata") or {}).get("ownerReferences")
    if not refs or type(refs) is not list or (refs[0] or {}).get("kind") != "DaemonSet":
        return False
    found = pod_component(obj)
    return found is not None and found[1] == "device-plugin"


def _shared_spec(sharer: Sharer, spec: Obj) -> Obj:
    """The slim form of a pod spec, shared by every pod whose spec is the same but for
    its volumes other than claims: looked up by the spec as decoded (typed, it holds
    only what the slim form keeps), before anything is made of it. Of the volumes, only
    claims matter (to the volume filters); the service-account token volume every pod
    has is unique per pod and would cost ~200 bytes each."""
    volumes = spec.get("volumes")
    claims: list[Obj] = []
    for v in volumes or ():
        if _claim(v):
            claims.append(v)
    text = _spec_text(spec)
    if text is not None:
        return _shared_text_spec(sharer, spec, claims, text)
    seen = spec  # decoded whole (a page of unexpected shape, a test): looked up by its JSON
    if volumes is not None:
        seen = spec.copy()
        del seen["volumes"]
    try:
        key: Hashable = digest(orjson.dumps(seen) + (orjson.dumps(claims) if claims else b""))
    except TypeError:  # not JSON (no API server sends that): made each time
        return _slim_spec(spec, claims, sharer)
    found = sharer.specs.get(key)
    if found is None:
        found = sharer.keep(sharer.specs, key, _slim_spec(spec, claims, sharer))
    return found


def _claim(volume: Obj) -> bool:
    """Whether a pod's volume is a claim's (all the volume filters read)."""
    return type(volume) is dict and ("persistentVolumeClaim" in volume or "ephemeral" in volume)


def _spec_text(spec: Obj, *, node: bool = True) -> bytes | None:
    """A spec decoded for the projection (`kube.decode`: each field but its volumes and
    containers as JSON text) as one string: each field after its name, the containers as
    decoded (with `node=False`, but the node, marked where it came). None for a spec decoded
    whole. Within an API server's answers equal fields are equal text (it writes map keys
    sorted)."""
    parts: list[Any] = []
    for k, v in spec.items():
        if type(v) is not Text:
            if k == "volumes":
                continue
            if k != "containers" and k != "initContainers":
                return None
            v = orjson.dumps(v)  # what `_Container` names of each: no mount of the token
        elif k == "nodeName" and not node:
            parts.append(b"@")  # no field is named so
            continue
        parts.append(k.encode())
        parts.append(v)
    return b"\0".join(parts)  # no JSON text holds a NUL byte: the parts stay apart


def _shared_text_spec(sharer: Sharer, spec: Obj, claims: list[Obj], text: bytes) -> Obj:
    """`_shared_spec` of a spec decoded for the projection. The pods of a workload on every
    node have specs alike but for the node: the first one's slim form is the template of the
    others (its node replaced), so a spec is decoded and slimmed once per workload, not once
    per node it runs on."""
    claimed = b"\0" + orjson.dumps(claims) if claims else b""
    key = digest(text + claimed)
    found = sharer.specs.get(key)
    if found is not None:
        return found
    node = spec.get("nodeName")
    if node is None:
        return sharer.keep(sharer.specs, key, _slim_spec(_decoded_spec(spec), claims, sharer))
    template_key = digest((_spec_text(spec, node=False) or b"") + claimed + b"\0@")
    template = sharer.specs.get(template_key)
    if template is None:
        made = sharer.keep(
            sharer.specs, template_key, _slim_spec(_decoded_spec(spec), claims, sharer)
        )
    else:
        made = template.copy()  # the node keeps its place among the fields
        made["nodeName"] = sharer.text(spec_part(node))
    return sharer.keep(sharer.specs, key, made)


def _decoded_spec(spec: Obj) -> Obj:
    return {k: spec_part(v) if type(v) is Text else v for k, v in spec.items()}


def _shared_status(sharer: Sharer, status: Obj) -> Obj:
    """The slim form of a pod status, shared by every pod whose status is the same but
    for what the slim form drops (when each container started, when each condition
    became true): looked up by those parts as decoded, before anything is made of them
    (the running pods of a workload, every completed pod of a kind)."""
    try:
        key = _status_key(status)
        found = sharer.statuses.get(key)
    except (TypeError, AttributeError):  # a part that is not a plain value: made each time
        return sharer.value(_slim_status(status), _status_parts)  # type: ignore[no-any-return]
    if found is None:
        made = sharer.value(_slim_status(status), _status_parts)
        found = sharer.keep(sharer.statuses, key, made)
    return found


def slim_pod(obj: Obj, sharer: Sharer) -> Obj:
    spec = obj.get("spec") or {}
    # Judgment call: the engine reads a pod's uid only to match it against a ResourceClaim's
    # reservations, so a pod without claims is kept without it: its metadata then has five
    # keys and fits the smallest dict (165 bytes less per pod, 25 MB at 150,000 pods).
    keys = _META if "resourceClaims" in spec else _POD_META
    # Pods of one workload on one node have equal specs, and running pods of one shape equal
    # statuses: one copy of each for all of them (`_shared_spec`, `_shared_status`).
    status = obj.get("status") or {}
    if _timed(obj):
        status_ = sharer.value(_slim_status(status, _TIMED_STATE_DROP), _status_parts)
    else:
        status_ = _shared_status(sharer, status)
    spec_ = _shared_spec(sharer, spec)
    meta = slim_meta(obj, sharer, keys, annotations=POD_ANNOTATIONS)
    return compact(_OBJECT, (obj.get("kind"), obj.get("apiVersion"), meta, spec_, status_))


def _node_status_parts(status: Obj, sharer: Sharer) -> None:
    """Shares the parts of a new node status that nodes of one pool have equal."""
    for k in _NODE_SHARED:
        if k in status:
            status[k] = sharer.value(status[k])


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
    if spec.get("taints"):  # the same across a pool
        spec = spec | {"taints": sharer.value(spec["taints"])}
    # A node's labels name it (its hostname): kept, not looked up; their keys and the values
    # a pool shares are interned.
    meta = slim_meta(obj, sharer, share_labels=False)
    if meta.get("labels"):
        meta["labels"] = {sys.intern(k): sharer.text(v) for k, v in meta["labels"].items()}
    # Capacity, allocatable, conditions and node info are equal across a pool's nodes (2-3 KB
    # a node): shared.
    status = sharer.value(status, _node_status_parts)
    return compact(_OBJECT, (obj.get("kind"), obj.get("apiVersion"), meta, spec, status))


# Workloads whose pod template the engine reads only as a pod to come (`triage.target`, a
# workload without pods; `triage.fleet.stuck`, the devices it wants), `TEMPLATED`: kept as a
# pod is. DaemonSets are few, and the stack view reads more of their templates: kept whole.
# Kinds whose cluster-wide lists a command keeps projected, as the cache keeps them (large
# ones); the others are kept whole.
PROJECTED = TEMPLATED | {"Pod"}
# Of a workload's spec, every field but its selector is kept (`WORKLOAD_SPEC`): the selector
# is not read (pods are matched to their workload by owner references), and a Job's names
# the Job's own uid. Of its status, when a Job started and finished are not read, and they
# make each Job's status its own.
_WORKLOAD_STATUS_DROP = frozenset(("startTime", "completionTime"))


def slim_workload(obj: Obj, sharer: Sharer) -> Obj:
    """A Job, ReplicaSet, StatefulSet or Deployment. Its pod template is kept as a pod's spec
    and labels are (`_shared_spec`, `Sharer.labels`; of its annotations those the engine
    reads of a pod's), its metadata as other kinds' (`slim_meta`), its status as a pod's
    conditions are (`_condition`) and shared (the statuses of running Jobs, of completed Jobs,
    are alike), the rest of its spec as it is. A batch cluster has a Job for each pod or few,
    and one decoded whole (every variable, mount and probe of each container, its
    managedFields) costs twenty times its pod slimmed. The labels of its template that name
    the workload itself (the Job controller's: `JOB_SELF_LABELS`) are left out and named
    (`template_labels` puts them back), so that the spec of a tenant's Jobs alike is one."""
    spec = obj.get("spec")
    template = spec.get("template") if type(spec) is dict else None
    if type(template) is not dict:
        return slim_other(obj, sharer)
    meta = slim_meta(obj, sharer)
    fields: list[tuple[str, Any]] = []  # the spec's fields kept, the template's as its parts
    parts: list[Any] = []  # and all of them in a row, to find a spec made of them
    for k, v in spec.items():  # type: ignore[union-attr]
        if k == "template":
            v = _template_parts(template, meta, sharer)
            parts += (k, *v)
        elif k in WORKLOAD_SPEC:
            v = sharer.value(v) if type(v) in (dict, list) else sharer.text(v)
            parts += (k, v)
        else:
            continue
        fields.append((k, v))
    slim_spec = sharer.made_of(
        parts,
        lambda: compacted({k: _template(*v) if k == "template" else v for k, v in fields}),
        (meta.get("namespace"), meta.get("name")),
    )
    status = obj.get("status")
    if type(status) is dict:
        status = sharer.value(_workload_status(status), _workload_status_parts)
    kind, version = sharer.text(obj.get("kind")), sharer.text(obj.get("apiVersion"))
    return compact(_OBJECT, (kind, version, meta, slim_spec, status))


_MADE = object()  # a template's metadata made of its parts (not an odd value kept as it is)


def _template_parts(template: Obj, meta: Obj, sharer: Sharer) -> tuple[Any, ...]:
    """A pod template's parts, shared: its metadata (`_MADE`, or a value of unexpected type
    as it is), its labels but those naming the workload itself, the keys of those, the
    annotations the engine reads of a pod, and its spec kept as a pod's. `ABSENT` for what
    it does not have."""
    tpl_meta = template.get("metadata", ABSENT)
    labels = notes = ABSENT
    left_out: tuple[str, ...] = ()
    if type(tpl_meta) is dict:
        found = tpl_meta.get("labels")
        if found is not None:
            found, left_out = _without_self_labels(found, meta)
            labels = sharer.labels(found, (), meta.get("name"))
        found = tpl_meta.get("annotations")
        if type(found) is dict:
            found = {k: v for k, v in found.items() if k in POD_ANNOTATIONS} or None
        if found is not None:
            notes = sharer.value(found)
        tpl_meta = _MADE
    pod_spec = template.get("spec", ABSENT)
    if type(pod_spec) is dict:
        # As a pod's spec: decoded typed (`kube.decode`), looked up by what the slim form
        # keeps, so the templates of a tenant's Jobs that differ only in what no layer reads
        # (a variable naming the run) are one.
        with suppress(AttributeError, TypeError):  # a part of unexpected shape: kept as it is
            pod_spec = _shared_spec(sharer, pod_spec)
    return tpl_meta, labels, left_out, notes, pod_spec


def _template(tpl_meta: Any, labels: Any, left_out: tuple[str, ...], notes: Any, spec: Any) -> Obj:
    """The template `_template_parts` took apart, as the cache keeps it."""
    tpl: Obj = {}
    if tpl_meta is _MADE:
        kept: Obj = {}
        if labels is not ABSENT:
            kept["labels"] = labels
        if notes is not ABSENT:
            kept["annotations"] = notes
        if left_out:
            kept[SELF_LABELS] = left_out
        tpl["metadata"] = compacted(kept)
    elif tpl_meta is not ABSENT:
        tpl["metadata"] = tpl_meta
    if spec is not ABSENT:
        tpl["spec"] = spec
    return compacted(tpl)


def _without_self_labels(labels: Any, meta: Obj) -> tuple[Any, tuple[str, ...]]:
    """`labels` without those the Job controller sets to the workload's own name and uid,
    and their keys. Only of a set in the order the API server prints it (by key), so that
    `template_labels` gives it back as it was."""
    if type(labels) is not dict:
        return labels, ()
    kept: Obj = {}
    left_out = []
    for k, v in labels.items():  # a loop, not calls: it runs for every Job
        field = JOB_SELF_LABELS.get(k)
        if field is not None and type(v) is str and v == meta.get(field):
            left_out.append(k)
        else:
            kept[k] = v
    if not left_out:
        return labels, ()
    try:
        ordered = list(labels) == sorted(labels)
    except TypeError:  # a key that is not text (a hand-written YAML snapshot's)
        ordered = False
    return (kept, _one(tuple(left_out))) if ordered else (labels, ())


@functools.cache
def _one(keys: tuple[str, ...]) -> tuple[str, ...]:
    return keys  # one tuple for every template that leaves out the same labels


def _workload_status(status: Obj) -> Obj:
    out = {k: v for k, v in status.items() if k not in _WORKLOAD_STATUS_DROP}
    conditions = out.get("conditions")
    if type(conditions) is list:
        out["conditions"] = [_condition(c) if type(c) is dict else c for c in conditions]
    return out


def _workload_status_parts(status: Obj, sharer: Sharer) -> None:
    for k, v in status.items():
        status[k] = sharer.text(v)
    if type(status.get("conditions")) is list:
        status["conditions"] = [sharer.value(c) for c in status["conditions"]]


def slim_other(obj: Obj, sharer: Sharer) -> Obj:
    meta = obj.get("metadata") or {}
    if "managedFields" not in meta:
        return obj
    return obj | {"metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


# An Event's strings that repeat across the cluster's events: what happened, and where.
_EVENT_TEXT = (
    "reason", "type", "message", "note", "eventTime", "lastTimestamp", "firstTimestamp", "action",
)  # fmt: skip
_EVENT_PART_TEXT = ("namespace", "kind", "creationTimestamp", "lastObservedTime")


def slim_event(obj: Obj, sharer: Sharer) -> Obj:
    """An Event of a cluster-wide list (a fleet sweep holds every one while it runs), its
    repeated strings kept once: the message (a workload's pods are refused alike), the reason,
    type and times, and the namespace and kind of what it is about. About half of a decoded
    event of a live cluster; the names, its own and its object's, stay its own."""
    obj = slim_other(obj, sharer)
    string = sharer.string  # the list's own table: most event times are seen once
    for k in _EVENT_TEXT:
        if k in obj:
            obj[k] = string(obj[k])
    for part in ("metadata", "involvedObject", "regarding", "series"):
        d = obj.get(part)
        if type(d) is dict:
            for k in _EVENT_PART_TEXT:
                if k in d:
                    d[k] = string(d[k])
    return obj


def projection(kind: str, sharer: Sharer | None = None) -> Callable[[Obj], Obj]:
    """The projection for `kind`, sharing equal values through `sharer` (a fresh one if None)."""
    fn = {"Pod": slim_pod, "Node": slim_node, "Event": slim_event}.get(kind)
    fn = fn or (slim_workload if kind in TEMPLATED else slim_other)
    share = sharer or Sharer()
    return lambda obj: fn(obj, share)


def projections() -> Callable[[str], Callable[[Obj], Obj]]:
    """Each kind's projection, made once (sharing within the kind): a snapshot read into
    memory keeps what the cache would (`triage.cluster.snapshot.read_snapshot`)."""
    return functools.cache(projection)


# --- typed list decoding --------------------------------------------------------------------
