"""Typed decoding of list pages and watch events: only the fields the projections read.

A list page of pods is mostly what `kube.slim`'s projections drop (managedFields, env,
mounts, probes, the token volume). Decoding it against the shapes below builds Python
objects only for the fields the projections read and skips the rest inside the decoder: the
projection then runs on small dicts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

import msgspec

# Whole JSON is decoded as everywhere in `kube` (`kube.informer` tells this decoder apart by
# identity from a typed one).
from kube.fastjson import loads
from triage.cluster.objects import POD_ANNOTATIONS

# The shapes must name every field `slim_pod`/`slim_node` read (tests compare typed and
# untyped decoding); values under them are decoded whole.


class _Meta(TypedDict, total=False):
    name: Any
    namespace: Any
    uid: Any
    labels: Any
    annotations: Any
    ownerReferences: Any
    creationTimestamp: Any
    deletionTimestamp: Any
    generation: Any
    resourceVersion: Any  # a watch event's: where the watch has got to (the cache drops it)


# Of a pod's annotations, those `slim_pod` keeps: the others (mostly the CNI's: addresses,
# container IDs, network status) are skipped inside the decoder.
_PodAnnotations = TypedDict(  # type: ignore[misc]  # keys that are not names
    "_PodAnnotations", dict.fromkeys(sorted(POD_ANNOTATIONS), Any), total=False
)


class _PodMeta(_Meta, total=False):
    annotations: _PodAnnotations | None


class _Container(TypedDict, total=False):
    name: Any
    image: Any
    resources: Any
    restartPolicy: Any
    ports: Any


class _Volume(TypedDict, total=False):
    name: Any
    persistentVolumeClaim: Any
    ephemeral: Any


class _PodSpec(TypedDict, total=False):
    nodeName: Any
    nodeSelector: Any
    affinity: Any
    tolerations: Any
    overhead: Any
    priority: Any
    priorityClassName: Any
    preemptionPolicy: Any
    runtimeClassName: Any
    schedulingGates: Any
    resourceClaims: Any
    schedulerName: Any
    serviceAccountName: Any
    topologySpreadConstraints: Any
    containers: list[_Container] | None
    initContainers: list[_Container] | None
    volumes: list[_Volume] | None


class _ContainerStatus(TypedDict, total=False):
    name: Any
    state: Any
    lastState: Any
    ready: Any
    started: Any
    restartCount: Any


class _PodStatus(TypedDict, total=False):
    phase: Any
    conditions: Any
    reason: Any
    message: Any
    nominatedNodeName: Any
    startTime: Any
    qosClass: Any
    resourceClaimStatuses: Any
    containerStatuses: list[_ContainerStatus] | None
    initContainerStatuses: list[_ContainerStatus] | None


class _Pod(TypedDict, total=False):
    kind: Any
    apiVersion: Any
    metadata: _PodMeta | None
    spec: _PodSpec | None
    status: _PodStatus | None


class _NodeStatus(TypedDict, total=False):
    # Every NodeStatus field but images, volumesInUse and volumesAttached (_NODE_STATUS_DROP).
    capacity: Any
    allocatable: Any
    phase: Any
    conditions: Any
    addresses: Any
    daemonEndpoints: Any
    nodeInfo: Any
    config: Any
    runtimeHandlers: Any
    features: Any
    declaredFeatures: Any


class _Node(TypedDict, total=False):
    kind: Any
    apiVersion: Any
    metadata: _Meta | None
    spec: Any
    status: _NodeStatus | None


class _PodList(TypedDict, total=False):
    metadata: Any
    items: list[_Pod] | None


class _NodeList(TypedDict, total=False):
    metadata: Any
    items: list[_Node] | None


class _EventMeta(TypedDict, total=False):
    name: Any
    namespace: Any
    creationTimestamp: Any


class _EventRef(TypedDict, total=False):
    # The object an Event is about, as triage.cluster.events files it: not its uid, API
    # version, resourceVersion or fieldPath (a fifth of a decoded Event).
    kind: Any
    name: Any
    namespace: Any


class _Event(TypedDict, total=False):
    # What triage.cluster.events reads of core/v1 (and events.k8s.io/v1-shaped) Events. They
    # are never cached, but a fleet sweep lists every one in the cluster: without their
    # managedFields, sources and reporting fields, the list costs a fraction.
    kind: Any
    apiVersion: Any
    metadata: _EventMeta | None
    involvedObject: _EventRef | None
    regarding: _EventRef | None
    reason: Any
    message: Any
    note: Any
    type: Any
    count: Any
    deprecatedCount: Any
    series: Any
    lastTimestamp: Any
    eventTime: Any
    firstTimestamp: Any


class _EventList(TypedDict, total=False):
    metadata: Any
    items: list[_Event] | None


class _PodEvent(TypedDict, total=False):
    type: Any
    object: _Pod | None


class _NodeEvent(TypedDict, total=False):
    type: Any
    object: _Node | None


# For the watch cache's projection (`kube.slim`), a pod spec's fields are kept as their JSON
# text: most pods have a spec another pod of their workload and node has, and `kube.slim`
# looks it up by that text, decoding it only when it is new. Volumes and containers are
# decoded: the service-account token volume every pod has is its own, and so is each
# container's mount of it (of volumes only claims are kept, of containers what `_Container`
# names).
Text = msgspec.Raw


class _TextPodSpec(TypedDict, total=False):
    nodeName: Text
    nodeSelector: Text
    affinity: Text
    tolerations: Text
    overhead: Text
    priority: Text
    priorityClassName: Text
    preemptionPolicy: Text
    runtimeClassName: Text
    schedulingGates: Text
    resourceClaims: Text
    schedulerName: Text
    serviceAccountName: Text
    topologySpreadConstraints: Text
    containers: list[_Container] | None
    initContainers: list[_Container] | None
    volumes: list[_Volume] | None


class _SlimPod(TypedDict, total=False):
    kind: Any
    apiVersion: Any
    metadata: _PodMeta | None
    spec: _TextPodSpec | None
    status: _PodStatus | None


class _SlimPodList(TypedDict, total=False):
    metadata: Any
    items: list[_SlimPod] | None


class _SlimPodEvent(TypedDict, total=False):
    type: Any
    object: _SlimPod | None


# Workloads with a pod template (`kube.slim.slim_workload`): the template as a pod's, the
# rest of the spec field by field (every field of a Job's, a ReplicaSet's, a Deployment's and
# a StatefulSet's spec but the selector), the status whole.


class _TemplateMeta(TypedDict, total=False):
    labels: Any
    annotations: _PodAnnotations | None


class _Template(TypedDict, total=False):
    metadata: _TemplateMeta | None
    spec: _TextPodSpec | None


class _WorkloadSpec(TypedDict, total=False):
    template: _Template | None
    replicas: Any
    minReadySeconds: Any
    # Job
    activeDeadlineSeconds: Any
    backoffLimit: Any
    backoffLimitPerIndex: Any
    completionMode: Any
    completions: Any
    managedBy: Any
    manualSelector: Any
    maxFailedIndexes: Any
    parallelism: Any
    podFailurePolicy: Any
    podReplacementPolicy: Any
    successPolicy: Any
    suspend: Any
    ttlSecondsAfterFinished: Any
    # Deployment
    paused: Any
    progressDeadlineSeconds: Any
    revisionHistoryLimit: Any
    strategy: Any
    # StatefulSet
    ordinals: Any
    persistentVolumeClaimRetentionPolicy: Any
    podManagementPolicy: Any
    serviceName: Any
    updateStrategy: Any
    volumeClaimTemplates: Any


class _Workload(TypedDict, total=False):
    kind: Any
    apiVersion: Any
    metadata: _Meta | None
    spec: _WorkloadSpec | None
    status: Any


class _WorkloadList(TypedDict, total=False):
    metadata: Any
    items: list[_Workload] | None


class _WorkloadEvent(TypedDict, total=False):
    type: Any
    object: _Workload | None


WORKLOAD_SPEC = frozenset(_WorkloadSpec.__annotations__)  # what `slim_workload` keeps of a spec
# The kinds of `_Workload`: their pod template is read only as a pod to come.
TEMPLATED = frozenset(("Job", "ReplicaSet", "StatefulSet", "Deployment"))


_WHOLE: msgspec.json.Decoder[Any] = msgspec.json.Decoder()


def spec_part(text: msgspec.Raw) -> Any:
    """A pod spec field kept as text by the projection's decoders, decoded."""
    return _WHOLE.decode(text)


# What a node's usage is worked out from (`triage.cluster.usage.contribution`: the pod's name,
# the node it is bound to, its phase, and its effective requests, `pod_requests`): a triage
# that must know every node's usage reads every running pod for that alone.


class _UsageMeta(TypedDict, total=False):
    name: Any
    namespace: Any


class _UsageContainer(TypedDict, total=False):
    resources: Any
    restartPolicy: Any


class _UsageSpec(TypedDict, total=False):
    nodeName: Any
    containers: list[_UsageContainer] | None
    initContainers: list[_UsageContainer] | None
    overhead: Any


class _UsageStatus(TypedDict, total=False):
    phase: Any


class _UsagePod(TypedDict, total=False):
    kind: Any
    apiVersion: Any
    metadata: _UsageMeta | None
    spec: _UsageSpec | None
    status: _UsageStatus | None


class _UsagePodList(TypedDict, total=False):
    metadata: Any
    items: list[_UsagePod] | None


_EVENT_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {
    "Pod": msgspec.json.Decoder(_PodEvent),
    "Node": msgspec.json.Decoder(_NodeEvent),
}

_LIST_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {
    "Pod": msgspec.json.Decoder(_PodList),
    "Node": msgspec.json.Decoder(_NodeList),
    "Event": msgspec.json.Decoder(_EventList),
}


def list_decoder(kind: str, *, projected: bool = False) -> Callable[[bytes], Any] | None:
    """A decoder of `kind`'s list pages that keeps only what its projection reads (for Events,
    which are not cached: what the engine reads; None: the kind is kept whole, decode it as it
    is). A page that does not fit the shapes (a field of an unexpected type) is decoded whole
    instead: the projection copes with both. `projected`: every object will go through
    `kube.slim.projection`, which also takes a pod spec's fields as text (`_TextPodSpec`)."""
    typed = (_PROJECTED_LISTS if projected else _LIST_DECODERS).get(kind)
    return None if typed is None else _or_whole(typed)


def usage_decoder() -> Callable[[bytes], Any]:
    """A decoder of pod list pages that keeps only what the pods' usage of their nodes is
    worked out from (`triage.cluster.usage.usage_of`); a tenth of what `list_decoder("Pod")`
    keeps, so every running pod of a large cluster costs little while it is summed."""
    return _or_whole(_USAGE_DECODER)


def event_decoder(kind: str, *, projected: bool = False) -> Callable[[bytes], Any]:
    """A decoder of one watch event line of `kind`, as `list_decoder` decodes list pages (any
    kind: events of kinds kept whole, or of unexpected shape, are decoded whole)."""
    typed = (_PROJECTED_EVENTS if projected else _EVENT_DECODERS).get(kind)
    return loads if typed is None else _or_whole(typed)


_USAGE_DECODER: msgspec.json.Decoder[Any] = msgspec.json.Decoder(_UsagePodList)
_PROJECTED_LISTS = (
    _LIST_DECODERS
    | {"Pod": msgspec.json.Decoder(_SlimPodList)}
    | dict.fromkeys(TEMPLATED, msgspec.json.Decoder(_WorkloadList))
)
_PROJECTED_EVENTS = (
    _EVENT_DECODERS
    | {"Pod": msgspec.json.Decoder(_SlimPodEvent)}
    | dict.fromkeys(TEMPLATED, msgspec.json.Decoder(_WorkloadEvent))
)


def _or_whole(typed: msgspec.json.Decoder[Any]) -> Callable[[bytes], Any]:
    def decode(data: bytes) -> Any:
        try:
            return typed.decode(data)
        except msgspec.ValidationError:
            return loads(data)

    return decode
