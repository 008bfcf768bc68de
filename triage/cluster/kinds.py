"""Every kind the engine reads, and where each lives in the API.

The live adapter builds URLs and RBAC names from `ResourceType`; the snapshot reader keys on
kind; the chart's ClusterRole grants exactly these (a test compares them).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ResourceType:
    """Where a kind lives in the API. The live adapter uses it; the snapshot reader keys on kind."""

    kind: str
    group: str
    version: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def _rt(kind: str, api: str, plural: str, *, namespaced: bool = True) -> ResourceType:
    group, _, version = api.rpartition("/")
    return ResourceType(kind, group, version, plural, namespaced)


# Every kind the engine reads. Anything else in a snapshot is ignored.
KINDS: dict[str, ResourceType] = {
    rt.kind: rt
    for rt in (
        _rt("Namespace", "v1", "namespaces", namespaced=False),
        _rt("Node", "v1", "nodes", namespaced=False),
        _rt("Pod", "v1", "pods"),
        _rt("Event", "v1", "events"),
        _rt("ResourceQuota", "v1", "resourcequotas"),
        _rt("LimitRange", "v1", "limitranges"),
        _rt("PersistentVolumeClaim", "v1", "persistentvolumeclaims"),
        _rt("PersistentVolume", "v1", "persistentvolumes", namespaced=False),
        _rt("StorageClass", "storage.k8s.io/v1", "storageclasses", namespaced=False),
        _rt("CSINode", "storage.k8s.io/v1", "csinodes", namespaced=False),
        _rt("DaemonSet", "apps/v1", "daemonsets"),
        _rt("Deployment", "apps/v1", "deployments"),
        _rt("ReplicaSet", "apps/v1", "replicasets"),
        _rt("StatefulSet", "apps/v1", "statefulsets"),
        _rt("Job", "batch/v1", "jobs"),
        _rt("RuntimeClass", "node.k8s.io/v1", "runtimeclasses", namespaced=False),
        _rt("PriorityClass", "scheduling.k8s.io/v1", "priorityclasses", namespaced=False),
        _rt(
            "ValidatingWebhookConfiguration",
            "admissionregistration.k8s.io/v1",
            "validatingwebhookconfigurations",
            namespaced=False,
        ),
        _rt("ClusterPolicy", "nvidia.com/v1", "clusterpolicies", namespaced=False),
        _rt("Workload", "kueue.x-k8s.io/v1beta1", "workloads"),
        _rt("LocalQueue", "kueue.x-k8s.io/v1beta1", "localqueues"),
        _rt("ClusterQueue", "kueue.x-k8s.io/v1beta1", "clusterqueues", namespaced=False),
        _rt("ResourceClaim", "resource.k8s.io/v1", "resourceclaims"),
        _rt("ResourceClaimTemplate", "resource.k8s.io/v1", "resourceclaimtemplates"),
        _rt("ResourceSlice", "resource.k8s.io/v1", "resourceslices", namespaced=False),
        _rt("DeviceClass", "resource.k8s.io/v1", "deviceclasses", namespaced=False),
        _rt("NodePool", "karpenter.sh/v1", "nodepools", namespaced=False),
        _rt("NodeClaim", "karpenter.sh/v1", "nodeclaims", namespaced=False),
        _rt("PodGroup", "scheduling.volcano.sh/v1beta1", "podgroups"),
        _rt("Queue", "scheduling.volcano.sh/v1beta1", "queues", namespaced=False),
    )
}


# Kinds read one named object at a time, never listed or watched: the RBAC grants `get` on
# exactly these names (deploy/helm templates/role-named-reads.yaml).
NAMED: dict[str, tuple[ResourceType, str, tuple[str, ...]]] = {
    "ConfigMap": (
        _rt("ConfigMap", "v1", "configmaps"),
        "kube-system",
        ("cluster-autoscaler-status",),
    ),
}
ALL_KINDS: dict[str, ResourceType] = {**KINDS, **{k: v[0] for k, v in NAMED.items()}}
