"""The shape of the objects the engine reads, checked as the API server would check them.

A live API server never hands out a pod whose `metadata` is a string, whose labels are
numbers or whose GPU request is "-1": it refuses to store them. A snapshot is a file, and a
file can hold anything; the engine reads fields without a type check at every step, so a
wrong type would end in a traceback, and a bad quantity would vanish silently ("requests no
NVIDIA resources"). So every object of a snapshot is checked here first: the fields the
engine reads have the types the API declares, and every resource quantity parses by
Kubernetes' rules (an extended resource such as `nvidia.com/gpu` is a whole number, never
negative, and its request equals its limit). `check` names the field that is wrong.

The types below cover what the engine reads of each kind (any other field is not looked at);
a field the engine starts to read belongs here too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, TypedDict

import msgspec

from triage.cluster.objects import Obj
from triage.cluster.quantities import amount, is_extended, quantity

Quantity = str | int | float
Resources = dict[str, Quantity] | None
Labels = dict[str, str] | None


class _Owner(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool | None


class _Meta(TypedDict, total=False):
    name: str
    namespace: str | None
    uid: str | None
    labels: Labels
    annotations: Labels
    ownerReferences: list[_Owner] | None
    creationTimestamp: str | None
    deletionTimestamp: str | None
    generation: int | None
    resourceVersion: str | None


class _Condition(TypedDict, total=False):
    type: str
    status: str
    reason: str | None
    message: str | None
    lastTransitionTime: str | None
    lastHeartbeatTime: str | None


class _ClaimUse(TypedDict, total=False):
    name: str
    request: str | None


class _ResourceRequirements(TypedDict, total=False):
    requests: Resources
    limits: Resources
    claims: list[_ClaimUse] | None


class _Port(TypedDict, total=False):
    containerPort: int
    hostPort: int | None
    hostIP: str | None
    protocol: str | None


class _Container(TypedDict, total=False):
    name: str
    image: str | None
    resources: _ResourceRequirements | None
    restartPolicy: str | None
    ports: list[_Port] | None


class _ClaimSource(TypedDict, total=False):
    resourceClaimName: str | None
    resourceClaimTemplateName: str | None


class _PodClaim(_ClaimSource, total=False):  # the source's fields, or (DRA alpha) under it
    name: str
    source: _ClaimSource | None


class _Named(TypedDict, total=False):
    name: str


class _ClaimRef(TypedDict, total=False):
    claimName: str
    readOnly: bool | None


class _Volume(TypedDict, total=False):
    name: str
    persistentVolumeClaim: _ClaimRef | None
    ephemeral: dict[str, Any] | None


class _Toleration(TypedDict, total=False):
    key: str | None
    operator: str | None
    value: str | None
    effect: str | None
    tolerationSeconds: int | None


class _Requirement(TypedDict, total=False):
    key: str
    operator: str
    values: list[str] | None


class _NodeSelectorTerm(TypedDict, total=False):
    matchExpressions: list[_Requirement] | None
    matchFields: list[_Requirement] | None


class _NodeSelector(TypedDict, total=False):
    nodeSelectorTerms: list[_NodeSelectorTerm] | None


class _PreferredTerm(TypedDict, total=False):
    weight: int
    preference: _NodeSelectorTerm | None


class _NodeAffinity(TypedDict, total=False):
    requiredDuringSchedulingIgnoredDuringExecution: _NodeSelector | None
    preferredDuringSchedulingIgnoredDuringExecution: list[_PreferredTerm] | None


class _LabelSelector(TypedDict, total=False):
    matchLabels: Labels
    matchExpressions: list[_Requirement] | None


class _PodAffinityTerm(TypedDict, total=False):
    labelSelector: _LabelSelector | None
    namespaceSelector: _LabelSelector | None
    namespaces: list[str] | None
    topologyKey: str
    matchLabelKeys: list[str] | None
    mismatchLabelKeys: list[str] | None


class _WeightedPodAffinityTerm(TypedDict, total=False):
    weight: int
    podAffinityTerm: _PodAffinityTerm | None


class _PodAffinity(TypedDict, total=False):
    requiredDuringSchedulingIgnoredDuringExecution: list[_PodAffinityTerm] | None
    preferredDuringSchedulingIgnoredDuringExecution: list[_WeightedPodAffinityTerm] | None


class _Affinity(TypedDict, total=False):
    nodeAffinity: _NodeAffinity | None
    podAffinity: _PodAffinity | None
    podAntiAffinity: _PodAffinity | None


class _SpreadConstraint(TypedDict, total=False):
    maxSkew: int
    topologyKey: str
    whenUnsatisfiable: str
    labelSelector: _LabelSelector | None
    minDomains: int | None
    nodeAffinityPolicy: str | None
    nodeTaintsPolicy: str | None
    matchLabelKeys: list[str] | None


class _PodSpec(TypedDict, total=False):
    nodeName: str | None
    nodeSelector: Labels
    affinity: _Affinity | None
    tolerations: list[_Toleration] | None
    containers: list[_Container] | None
    initContainers: list[_Container] | None
    overhead: Resources
    priority: int | None
    priorityClassName: str | None
    preemptionPolicy: str | None
    runtimeClassName: str | None
    schedulingGates: list[_Named] | None
    resourceClaims: list[_PodClaim] | None
    schedulerName: str | None
    topologySpreadConstraints: list[_SpreadConstraint] | None
    volumes: list[_Volume] | None


class _Waiting(TypedDict, total=False):
    reason: str | None
    message: str | None


class _Terminated(TypedDict, total=False):
    exitCode: int | None
    reason: str | None
    message: str | None


class _State(TypedDict, total=False):
    running: dict[str, Any] | None
    waiting: _Waiting | None
    terminated: _Terminated | None


class _ContainerStatus(TypedDict, total=False):
    name: str
    state: _State | None
    lastState: _State | None
    ready: bool | None
    restartCount: int | None


class _PodStatus(TypedDict, total=False):
    phase: str | None
    conditions: list[_Condition] | None
    reason: str | None
    message: str | None
    nominatedNodeName: str | None
    containerStatuses: list[_ContainerStatus] | None
    initContainerStatuses: list[_ContainerStatus] | None


class _Pod(TypedDict, total=False):
    spec: _PodSpec | None
    status: _PodStatus | None


class _Taint(TypedDict, total=False):
    key: str
    value: str | None
    effect: str


class _NodeSpec(TypedDict, total=False):
    taints: list[_Taint] | None
    unschedulable: bool | None
    providerID: str | None


class _NodeStatus(TypedDict, total=False):
    capacity: Resources
    allocatable: Resources
    conditions: list[_Condition] | None
    nodeInfo: dict[str, Any] | None


class _Node(TypedDict, total=False):
    spec: _NodeSpec | None
    status: _NodeStatus | None


class _Template(TypedDict, total=False):
    metadata: _Meta | None
    spec: _PodSpec | None


class _WorkloadSpec(TypedDict, total=False):
    replicas: int | None
    parallelism: int | None
    suspend: bool | None
    template: _Template | None


class _Workload(TypedDict, total=False):
    spec: _WorkloadSpec | None
    status: dict[str, Any] | None


class _QuotaSpec(TypedDict, total=False):
    hard: Resources
    scopes: list[str] | None
    scopeSelector: dict[str, Any] | None


class _QuotaStatus(TypedDict, total=False):
    hard: Resources
    used: Resources


class _Quota(TypedDict, total=False):
    spec: _QuotaSpec | None
    status: _QuotaStatus | None


class _Ref(TypedDict, total=False):
    kind: str | None
    name: str | None
    namespace: str | None


class _Series(TypedDict, total=False):
    count: int | None
    lastObservedTime: str | None


class _Event(TypedDict, total=False):
    involvedObject: _Ref | None
    regarding: _Ref | None
    reason: str | None
    message: str | None
    note: str | None
    type: str | None
    count: int | None
    deprecatedCount: int | None
    series: _Series | None
    lastTimestamp: str | None
    firstTimestamp: str | None
    eventTime: str | None


class _OtherStatus(TypedDict, total=False):
    conditions: list[_Condition] | None


class _Other(TypedDict, total=False):
    spec: dict[str, Any] | None
    status: _OtherStatus | None


class _LimitItem(TypedDict, total=False):
    type: str | None
    max: Resources
    min: Resources
    default: Resources
    defaultRequest: Resources
    maxLimitRequestRatio: Resources


class _LimitRangeSpec(TypedDict, total=False):
    limits: list[_LimitItem] | None


class _LimitRange(TypedDict, total=False):
    spec: _LimitRangeSpec | None


class _DeviceBasic(TypedDict, total=False):
    attributes: dict[str, dict[str, Any]] | None
    capacity: dict[str, Any] | None


class _Device(TypedDict, total=False):
    name: str
    attributes: dict[str, dict[str, Any]] | None
    capacity: dict[str, Any] | None
    basic: _DeviceBasic | None


class _Pool(TypedDict, total=False):
    name: str
    generation: int | None
    resourceSliceCount: int | None


class _SliceSpec(TypedDict, total=False):
    driver: str
    pool: _Pool | None
    nodeName: str | None
    nodeSelector: _NodeSelector | None
    allNodes: bool | None
    devices: list[_Device] | None


class _ResourceSlice(TypedDict, total=False):
    spec: _SliceSpec | None


class _DeviceRequest(TypedDict, total=False):
    name: str
    deviceClassName: str | None
    count: int | None
    allocationMode: str | None
    selectors: list[dict[str, Any]] | None
    exactly: dict[str, Any] | None
    firstAvailable: list[dict[str, Any]] | None


class _DeviceClaim(TypedDict, total=False):
    requests: list[_DeviceRequest] | None
    constraints: list[dict[str, Any]] | None
    config: list[dict[str, Any]] | None


class _ClaimSpec(TypedDict, total=False):
    devices: _DeviceClaim | None


class _DeviceResult(TypedDict, total=False):
    request: str
    driver: str
    pool: str
    device: str


class _AllocatedDevices(TypedDict, total=False):
    results: list[_DeviceResult] | None
    config: list[dict[str, Any]] | None


class _Allocation(TypedDict, total=False):
    devices: _AllocatedDevices | None
    nodeSelector: _NodeSelector | None


class _Consumer(TypedDict, total=False):
    apiGroup: str | None
    resource: str | None
    name: str
    uid: str | None


class _ClaimStatus(TypedDict, total=False):
    allocation: _Allocation | None
    reservedFor: list[_Consumer] | None


class _ResourceClaim(TypedDict, total=False):
    spec: _ClaimSpec | None
    status: _ClaimStatus | None


class _ClaimTemplateSpec(TypedDict, total=False):
    spec: _ClaimSpec | None


class _ResourceClaimTemplate(TypedDict, total=False):
    spec: _ClaimTemplateSpec | None


class _PodSet(TypedDict, total=False):
    name: str
    count: int | None
    template: _Template | None


class _KueueWorkloadSpec(TypedDict, total=False):
    queueName: str | None
    podSets: list[_PodSet] | None
    priority: int | None
    priorityClassName: str | None


class _KueueWorkload(TypedDict, total=False):
    spec: _KueueWorkloadSpec | None
    status: _OtherStatus | None


class _FlavorResource(TypedDict, total=False):
    name: str
    nominalQuota: Quantity | None
    borrowingLimit: Quantity | None
    lendingLimit: Quantity | None
    total: Quantity | None
    borrowed: Quantity | None


class _Flavor(TypedDict, total=False):
    name: str
    resources: list[_FlavorResource] | None


class _ResourceGroup(TypedDict, total=False):
    coveredResources: list[str] | None
    flavors: list[_Flavor] | None


class _ClusterQueueSpec(TypedDict, total=False):
    cohort: str | None
    resourceGroups: list[_ResourceGroup] | None
    namespaceSelector: _LabelSelector | None


class _ClusterQueueStatus(TypedDict, total=False):
    conditions: list[_Condition] | None
    flavorsUsage: list[_Flavor] | None
    flavorsReservation: list[_Flavor] | None


class _ClusterQueue(TypedDict, total=False):
    spec: _ClusterQueueSpec | None
    status: _ClusterQueueStatus | None


class _LocalQueueSpec(TypedDict, total=False):
    clusterQueue: str | None


class _LocalQueue(TypedDict, total=False):
    spec: _LocalQueueSpec | None
    status: _OtherStatus | None


class _NodeRequirement(_Requirement, total=False):
    minValues: int | None


class _NodeClaimTemplateSpec(TypedDict, total=False):
    requirements: list[_NodeRequirement] | None
    taints: list[_Taint] | None
    startupTaints: list[_Taint] | None


class _NodeClaimTemplate(TypedDict, total=False):
    metadata: _Meta | None
    spec: _NodeClaimTemplateSpec | None


class _NodePoolSpec(TypedDict, total=False):
    template: _NodeClaimTemplate | None
    limits: Resources


class _NodePool(TypedDict, total=False):
    spec: _NodePoolSpec | None
    status: _OtherStatus | None


class _NodeClaim(TypedDict, total=False):
    spec: _NodeClaimTemplateSpec | None
    status: _OtherStatus | None


class _PVSpec(TypedDict, total=False):
    capacity: Resources
    storageClassName: str | None
    nodeAffinity: _PVNodeAffinity | None
    claimRef: dict[str, Any] | None
    csi: dict[str, Any] | None


class _PVNodeAffinity(TypedDict, total=False):
    required: _NodeSelector | None


class _PersistentVolume(TypedDict, total=False):
    spec: _PVSpec | None
    status: dict[str, Any] | None


class _PVCSpec(TypedDict, total=False):
    storageClassName: str | None
    volumeName: str | None
    resources: _ResourceRequirements | None
    accessModes: list[str] | None


class _PVCStatus(TypedDict, total=False):
    phase: str | None
    conditions: list[_Condition] | None


class _PersistentVolumeClaim(TypedDict, total=False):
    spec: _PVCSpec | None
    status: _PVCStatus | None


class _TopologyRequirement(TypedDict, total=False):
    key: str
    values: list[str] | None


class _TopologyTerm(TypedDict, total=False):
    matchLabelExpressions: list[_TopologyRequirement] | None


class _StorageClass(TypedDict, total=False):
    provisioner: str
    volumeBindingMode: str | None
    allowedTopologies: list[_TopologyTerm] | None
    parameters: Labels


class _CSIDriverOnNode(TypedDict, total=False):
    name: str
    nodeID: str | None
    allocatable: dict[str, int | None] | None
    topologyKeys: list[str] | None


class _CSINodeSpec(TypedDict, total=False):
    drivers: list[_CSIDriverOnNode] | None


class _CSINode(TypedDict, total=False):
    spec: _CSINodeSpec | None


class _RuntimeScheduling(TypedDict, total=False):
    nodeSelector: Labels
    tolerations: list[_Toleration] | None


class _Overhead(TypedDict, total=False):
    podFixed: Resources


class _RuntimeClass(TypedDict, total=False):
    handler: str
    scheduling: _RuntimeScheduling | None
    overhead: _Overhead | None


class _PriorityClass(TypedDict, total=False):
    value: int
    globalDefault: bool | None
    preemptionPolicy: str | None


class _Webhook(TypedDict, total=False):
    name: str
    failurePolicy: str | None
    rules: list[dict[str, Any]] | None
    namespaceSelector: _LabelSelector | None
    objectSelector: _LabelSelector | None
    matchConditions: list[dict[str, Any]] | None


class _WebhookConfiguration(TypedDict, total=False):
    webhooks: list[_Webhook] | None


class _DeviceSelector(TypedDict, total=False):
    cel: dict[str, Any] | None


class _DeviceClassSpec(TypedDict, total=False):
    selectors: list[_DeviceSelector] | None


class _DeviceClass(TypedDict, total=False):
    spec: _DeviceClassSpec | None


class _ClusterPolicySpec(TypedDict, total=False):
    operator: dict[str, Any] | None
    driver: dict[str, Any] | None
    toolkit: dict[str, Any] | None
    devicePlugin: dict[str, Any] | None
    gfd: dict[str, Any] | None
    dcgmExporter: dict[str, Any] | None
    migManager: dict[str, Any] | None


class _ClusterPolicy(TypedDict, total=False):
    spec: _ClusterPolicySpec | None
    status: dict[str, Any] | None


class _Head(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: _Meta


_BODY: dict[str, type] = {
    "Pod": _Pod,
    "Node": _Node,
    "ResourceQuota": _Quota,
    "Event": _Event,
    **dict.fromkeys(("Deployment", "ReplicaSet", "StatefulSet", "Job", "DaemonSet"), _Workload),
    "LimitRange": _LimitRange,
    "ResourceSlice": _ResourceSlice,
    "ResourceClaim": _ResourceClaim,
    "ResourceClaimTemplate": _ResourceClaimTemplate,
    "Workload": _KueueWorkload,
    "ClusterQueue": _ClusterQueue,
    "LocalQueue": _LocalQueue,
    "NodePool": _NodePool,
    "NodeClaim": _NodeClaim,
    "ClusterPolicy": _ClusterPolicy,
    "PersistentVolume": _PersistentVolume,
    "PersistentVolumeClaim": _PersistentVolumeClaim,
    "StorageClass": _StorageClass,
    "CSINode": _CSINode,
    "RuntimeClass": _RuntimeClass,
    "PriorityClass": _PriorityClass,
    "ValidatingWebhookConfiguration": _WebhookConfiguration,
    "DeviceClass": _DeviceClass,
}
# The place of every resource map a kind carries: (path from the object, what it is).
_RESOURCE_MAPS: dict[str, tuple[tuple[str, ...], ...]] = {
    "Node": (("status", "capacity"), ("status", "allocatable")),
    "ResourceQuota": (("spec", "hard"), ("status", "hard"), ("status", "used")),
}
_MSGSPEC = re.compile(
    r"Expected `(?P<want>[^`]+)`, got `(?P<got>[^`]+)`(?: - at `\$(?P<at>[^`]*)`)?"
)
_WORDS = {"str": "a string", "int": "an integer", "float": "a number", "bool": "true or false",
          "object": "a mapping", "array": "a list", "null": "null"}  # fmt: skip


class InvalidObjectError(ValueError):
    """An object the API server would refuse; `str(e)` names the field."""


def check(obj: Obj) -> None:
    """Raise InvalidObjectError when the object is not one the API server would store: a
    field the engine reads has the wrong type, or a resource quantity is not valid."""
    _convert(obj, _Head)
    name = obj["metadata"].get("name") if isinstance(obj.get("metadata"), dict) else None
    if "metadata" not in obj or not name:
        raise InvalidObjectError("metadata.name: missing (every object has a name)")
    kind = str(obj["kind"])
    _convert(obj, _BODY.get(kind, _Other))
    for field, value, integer in _quantities(kind, obj):
        _check_quantity(field, value, integer=integer)
    if kind == "Pod":
        _check_pod_requests(obj.get("spec") or {}, "spec")
    elif kind in _WORKLOADS:
        template = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
        _check_pod_requests(template, "spec.template.spec")


_WORKLOADS = ("Deployment", "ReplicaSet", "StatefulSet", "Job", "DaemonSet")


def _convert(obj: Obj, shape: type) -> None:
    try:
        msgspec.convert(obj, shape)
    except msgspec.ValidationError as e:
        raise InvalidObjectError(_said(str(e), obj)) from None


def _said(message: str, obj: Obj) -> str:
    """msgspec's "Expected `str`, got `int` - at `$.metadata.labels[...]`", in our words:
    "metadata.labels.team: expected a string, got an integer"."""
    m = _MSGSPEC.match(message)
    if m is None:
        return message
    at = (m.group("at") or "").lstrip(".")
    if at.endswith("[...]"):  # a value of a mapping: name its key
        at = _bad_key(obj, at.removesuffix("[...]"), m.group("want"))
    want = " or ".join(_WORDS.get(w, w) for w in m.group("want").split(" | ") if w != "null")
    return (
        f"{at or '(the object)'}: expected {want}, got {_WORDS.get(m.group('got'), m.group('got'))}"
    )


def _bad_key(obj: Obj, path: str, want: str) -> str:
    cur: Any = obj
    for part in re.findall(r"[^.\[\]]+", path):
        cur = cur[int(part)] if isinstance(cur, list) else (cur or {}).get(part)
    types: dict[str, tuple[type, ...]] = {
        "str": (str,), "int": (int,), "float": (int, float), "bool": (bool,),
    }  # fmt: skip
    allowed = tuple(t for w in want.split(" | ") for t in types.get(w, ()))
    if isinstance(cur, dict):
        for k, v in cur.items():
            if v is not None and (not allowed or not isinstance(v, allowed)):
                return f"{path}.{k}"
    return path


def _quantities(kind: str, obj: Obj) -> Iterator[tuple[str, Any, bool]]:
    """(field, quantity, must be whole) for every resource quantity outside pod specs."""
    for path in _RESOURCE_MAPS.get(kind, ()):
        cur: Any = obj
        for part in path:
            cur = (cur or {}).get(part) if isinstance(cur, dict) else None
        for res, value in (cur or {}).items():
            name = str(res).removeprefix("requests.").removeprefix("limits.")
            yield f"{'.'.join(path)}.{res}", value, is_extended(name)


def _check_pod_requests(spec: Obj, where: str) -> None:
    for group in ("containers", "initContainers"):
        for i, c in enumerate(spec.get(group) or []):
            res = c.get("resources") or {}
            at = f"{where}.{group}[{i}] ({c.get('name') or '?'}).resources"
            for which in ("requests", "limits"):
                for name, value in (res.get(which) or {}).items():
                    _check_quantity(f"{at}.{which}.{name}", value, integer=is_extended(name))
            for name, value in (res.get("requests") or {}).items():
                limit = (res.get("limits") or {}).get(name)
                if (
                    limit is not None
                    and is_extended(name)
                    and amount(name, value) != amount(name, limit)
                ):
                    raise InvalidObjectError(
                        f"{at}.requests.{name}: must equal its limit ({limit}): an extended "
                        "resource cannot be overcommitted"
                    )
    for name, value in (spec.get("overhead") or {}).items():
        _check_quantity(f"{where}.overhead.{name}", value, integer=is_extended(name))


def _check_quantity(field: str, value: Any, *, integer: bool) -> None:
    try:
        q = quantity(value)
    except ValueError as e:
        raise InvalidObjectError(f"{field}: {e}") from None
    if q < 0:
        raise InvalidObjectError(f"{field}: {value!r} is negative: a quantity cannot be")
    if integer and q != q.to_integral_value():
        raise InvalidObjectError(
            f"{field}: {value!r} is not a whole number: an extended resource is counted in units"
        )
