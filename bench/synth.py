"""A synthetic GPU cluster: node pools, tenants with quotas, the GPU Operator, and failures.

Deterministic for a seed. Pods carry the bulk of a real pod (env, mounts, probes,
managedFields, container statuses, the labels their controllers set, the annotations the CNI
writes) so list payloads and the cache's slimming are realistic. Each tenant pod is a Job's,
and its Job exists, as `kubectl get job -o yaml` prints it (`job`): a batch cluster holds as
many Jobs as pods, running and completed.
Most pools are NVIDIA's; an AMD MI300X pool and an AWS Trainium pool ask their own
resources, and some pending pods ask an RDMA device no node offers. About 2% of pods are
Pending for a mix of reasons the engine diagnoses.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import uuid
import zlib
from typing import Any

Obj = dict[str, Any]
POOLS = (  # (name, share of nodes, product, devices per node, their resource)
    ("a100", 0.50, "NVIDIA-A100-SXM4-80GB", 8, "nvidia.com/gpu"),
    ("h100", 0.30, "NVIDIA-H100-80GB-HBM3", 8, "nvidia.com/gpu"),
    ("l4", 0.10, "NVIDIA-L4", 4, "nvidia.com/gpu"),
    ("mi300x", 0.03, "AMD Instinct MI300X", 8, "amd.com/gpu"),
    ("trn1", 0.02, "trn1.32xlarge", 32, "aws.amazon.com/neuroncore"),
    ("cpu", 0.05, "", 0, ""),
)
NVIDIA_GPU = "nvidia.com/gpu"
RDMA = "rdma/hca_shared_devices_a"  # an RDMA device pool some pods ask and no node offers
TS = "2025-01-01T00:00:00Z"
OPERATOR_NS = "gpu-operator"
# A reservation: the first nodes of the H100 pool carry this label, and a few pending pods
# select it (a team's reserved capacity, full): a pod pinned to a small pool.
RESERVATION = ("node-reservation", "rsv-a")
RESERVED = 64  # nodes in the reservation (fewer in a small cluster: a quarter of the pool)
PINNED = 3  # pending pods pinned to it, besides `pods`


def _ts(name: str) -> str:
    """A per-object timestamp, so identical pods do not share strings a real cluster would not."""
    n = zlib.crc32(name.encode()) % 86400
    return f"2025-01-01T{n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z"


def _uid(key: str) -> str:
    """A uid as the API server writes one (a UUID), the same for the same key."""
    return str(uuid.UUID(bytes=hashlib.blake2b(key.encode(), digest_size=16).digest()))


def _network_annotations(name: str, gpu: int) -> Obj:
    """What the CNI writes on a pod it gave an address: Calico's container ID and address, and
    Multus's status of each network attached (the pod network; an RDMA network for a pod
    of eight GPUs or more, as the NVIDIA Network Operator attaches one)."""
    n = zlib.crc32(name.encode())
    ip = f"10.{128 + n % 64}.{n >> 8 & 255}.{n >> 16 & 255}"
    networks = [{"name": "k8s-pod-network", "ips": [ip], "default": True, "dns": {}}]
    if gpu >= 8:
        networks.append({
            "name": "gpu-operator/rdma-net", "interface": "net1",
            "ips": [f"192.168.{n >> 8 & 255}.{n >> 16 & 255}"], "mac": "02:00:" + ":".join(f"{n:08x}"[i : i + 2] for i in range(0, 8, 2)),
            "dns": {}, "device-info": {"type": "pci", "version": "1.1.0",
                                      "pci": {"pci-address": f"0000:{n % 200 + 16:02x}:00.2"}},
        })  # fmt: skip
    status = json.dumps(networks, indent=4)  # as Multus writes it
    return {
        "cni.projectcalico.org/containerID": hashlib.sha256(name.encode()).hexdigest(),
        "cni.projectcalico.org/podIP": f"{ip}/32",
        "cni.projectcalico.org/podIPs": f"{ip}/32",
        "k8s.v1.cni.cncf.io/network-status": status,
    }


def _meta(name: str, ns: str | None = None, **extra: Any) -> Obj:
    m: Obj = {"name": name, "uid": f"uid-{ns or ''}-{name}", "creationTimestamp": _ts(name)}
    if ns:
        m["namespace"] = ns
    m["managedFields"] = _MANAGED
    return m | extra


# What every object, or every pod, has alike is one Python object here (never changed in
# place), so that the server of a 20,000-node cluster fits in memory; its JSON is the same.
_MANAGED = [
    {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
     "time": TS, "fieldsType": "FieldsV1",
     "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                  "f:spec": {"f:containers": {"k:{\"name\":\"main\"}": {".": {}}}}}},
]  # fmt: skip
_ENV = [{"name": f"ENV_{i}", "value": f"value-{i}"} for i in range(12)]
_MOUNTS = [{"name": f"vol-{i}", "mountPath": f"/mnt/{i}"} for i in range(4)]
_VOLUMES = [{"name": f"vol-{i}", "emptyDir": {}} for i in range(4)]
_TOKEN = {"defaultMode": 420, "sources": [
    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
        "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}  # fmt: skip
_CONTAINER = {
    "command": ["python", "-m", "train"], "args": ["--epochs", "100", "--config", "/cfg"],
    "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 10},
    "ports": [{"containerPort": 8080, "protocol": "TCP"}],
}  # fmt: skip
_TOLERATIONS = [{"key": k, "operator": "Exists", "effect": "NoSchedule"}
                for k in ("nvidia.com/gpu", "amd.com/gpu", "aws.amazon.com/neuron")]  # fmt: skip


def node(
    name: str,
    pool: str,
    product: str,
    gpus: int,
    *,
    broken: bool,
    reserved: bool = False,
    resource: str = NVIDIA_GPU,
) -> Obj:
    cap = {"cpu": "96", "memory": "1536Gi", "pods": "110", "ephemeral-storage": "3Ti"}
    labels = {"kubernetes.io/hostname": name, "node-pool": pool}
    if reserved:
        labels[RESERVATION[0]] = RESERVATION[1]
    taints = []
    if gpus and resource == "amd.com/gpu":
        labels |= {"feature.node.kubernetes.io/amd-gpu": "true",
                   "amd.com/gpu.product-name": product.replace(" ", "_")}  # fmt: skip
        taints.append({"key": "amd.com/gpu", "value": "present", "effect": "NoSchedule"})
        cap[resource] = str(gpus)
    elif gpus and resource.startswith("aws.amazon.com/neuron"):
        labels |= {"node.kubernetes.io/instance-type": product}
        taints.append({"key": "aws.amazon.com/neuron", "value": "true", "effect": "NoSchedule"})
        cap[resource] = str(gpus)
        cap["aws.amazon.com/neurondevice"] = str(gpus // 2)
    elif gpus:
        labels |= {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": product,
                   "nvidia.com/gpu.count": str(gpus), "nvidia.com/gpu.deploy.driver": "true",
                   "nvidia.com/gpu.deploy.device-plugin": "true"}  # fmt: skip
        taints.append({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
        if not broken:
            cap["nvidia.com/gpu"] = str(gpus)
    conds = [
        {"type": t, "status": "False", "reason": f"Kubelet{t}", "lastHeartbeatTime": TS}
        for t in ("MemoryPressure", "DiskPressure", "PIDPressure")
    ] + [{"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": TS}]
    return {
        "kind": "Node", "apiVersion": "v1",
        "metadata": _meta(name, labels=labels),
        "spec": {"taints": taints, "providerID": f"aws:///{name}"},
        "status": {
            "capacity": cap, "allocatable": dict(cap), "conditions": conds,
            "nodeInfo": {"kubeletVersion": "v1.31.2", "containerRuntimeVersion": "containerd://1.7"},
            "images": [{"names": [f"registry/img-{i}:v1"], "sizeBytes": 10**9} for i in range(8)],
        },
    }  # fmt: skip


def pod(
    name: str,
    ns: str,
    *,
    node: str | None,
    gpu: int,
    phase: str,
    resource: str = NVIDIA_GPU,
    **spec_extra: Any,
) -> Obj:
    res: Obj = {"requests": {"cpu": "8", "memory": "64Gi"}, "limits": {"memory": "64Gi"}}
    if gpu:
        res["limits"][resource] = str(gpu)
    # Every real pod has a service-account token volume of its own, mounted in each container
    # (its name ends in five random characters), and each container its own ID.
    token = f"kube-api-access-{zlib.crc32(f'{ns}/{name}'.encode()) % 16**5:05x}"
    container = {
        "name": "main", "image": "registry.example.com/train:2025.01", "resources": res,
        "command": _CONTAINER["command"], "args": _CONTAINER["args"],
        "env": [*_ENV, {"name": "RUN_ID", "value": name.rsplit("-", 1)[0]}],  # its Job's run
        "volumeMounts": [*_MOUNTS, {"name": token, "readOnly": True,
                                    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
        "readinessProbe": _CONTAINER["readinessProbe"], "ports": _CONTAINER["ports"],
    }  # fmt: skip
    spec: Obj = {
        "containers": [container],
        "volumes": [*_VOLUMES, {"name": token, "projected": _TOKEN}],
        "tolerations": _TOLERATIONS,
        "serviceAccountName": "default", "restartPolicy": "Never", "schedulerName": "default-scheduler",
        "priority": 0,
    } | spec_extra  # fmt: skip
    status: Obj = {"phase": phase, "qosClass": "Burstable"}
    if node:
        spec["nodeName"] = node
        status |= {
            "hostIP": "10.0.0.1", "podIP": "10.1.0.1", "startTime": _ts(name),
            "conditions": [{"type": t, "status": "True", "lastTransitionTime": _ts(name + t)}
                           for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
            "containerStatuses": [{"name": "main", "ready": True, "restartCount": 0,
                                   "image": container["image"], "imageID": "sha256:abc",
                                   "containerID": f"containerd://{zlib.crc32(name.encode()):08x}",
                                   "started": True,
                                   "state": {"running": {"startedAt": _ts(name + "s")}}}],
        }  # fmt: skip
    # Owned by its Job, with the labels the Job controller sets (both generations of them;
    # the API server writes map keys sorted), and what the CNI writes once it has an address.
    job = name.rsplit("-", 1)[0]
    uid = _uid(f"{ns}/{job}")
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": uid,
             "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    labels = {"app": "train", "batch.kubernetes.io/controller-uid": uid,
              "batch.kubernetes.io/job-name": job, "controller-uid": uid, "job-name": job,
              "team": ns}  # fmt: skip
    meta = _meta(name, ns, generateName=f"{job}-", labels=labels, ownerReferences=[owner])
    if node:
        meta["annotations"] = _network_annotations(name, gpu)
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": spec, "status": status}


# What the API server adds to a pod template it stores (a pod's own spec in the benchmark
# lacks them: the cache never keeps them, and the wire size of pods was measured without).
_TEMPLATE_DEFAULTS = {"dnsPolicy": "ClusterFirst", "securityContext": {},
                      "terminationGracePeriodSeconds": 30}  # fmt: skip
_CONTAINER_DEFAULTS = {"imagePullPolicy": "IfNotPresent",
                       "terminationMessagePath": "/dev/termination-log",
                       "terminationMessagePolicy": "File"}  # fmt: skip


def _with_job(p: Obj) -> tuple[Obj, Obj]:
    return p, job(p)


def job(p: Obj) -> Obj:
    """The Job of a Job's pod (`pod`), as `kubectl get job -o yaml` prints it: the spec with
    the API server's defaults, the selector and template labels the Job controller sets, the
    pod template without what admission and the kubelet add to its pods (the node, the
    priority, the service-account token volume), the status its pod gives, and managedFields."""
    meta, spec, status = p["metadata"], p["spec"], p["status"]
    ref = meta["ownerReferences"][0]
    name, ns, uid = ref["name"], meta["namespace"], ref["uid"]
    volumes = [v for v in spec.get("volumes", []) if "projected" not in v]
    containers = [
        {k: v for k, v in c.items()}
        | {"volumeMounts": [m for m in c.get("volumeMounts", []) if "readOnly" not in m]}
        | _CONTAINER_DEFAULTS
        for c in spec["containers"]
    ]
    drop = ("nodeName", "priority", "serviceAccountName", "volumes", "containers")
    template = {k: v for k, v in spec.items() if k not in drop} | _TEMPLATE_DEFAULTS
    template |= {"containers": containers, "volumes": volumes}
    start = _ts(name + "start")
    state: Obj = {"startTime": start, "terminating": 0, "uncountedTerminatedPods": {}}
    phase = status.get("phase")
    if phase == "Succeeded":
        done = _ts(name + "done")
        state |= {"completionTime": done, "ready": 0, "succeeded": 1, "conditions": [
            {"type": t, "status": "True", "reason": "CompletionsReached",
             "message": "Reached expected number of succeeded pods",
             "lastProbeTime": done, "lastTransitionTime": done}
            for t in ("SuccessCriteriaMet", "Complete")]}  # fmt: skip
    else:
        ready = any(c.get("ready") for c in status.get("containerStatuses", []))
        state |= {"active": 1, "ready": int(ready)}
    fields = _job_fields(tuple(template), tuple(containers[0]))
    managed = [
        {"manager": "kubectl-create", "operation": "Update", "apiVersion": "batch/v1",
         "time": meta["creationTimestamp"], "fieldsType": "FieldsV1", "fieldsV1": fields},
        {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "batch/v1",
         "time": start, "fieldsType": "FieldsV1", "subresource": "status",
         "fieldsV1": {"f:status": {f"f:{k}": {} for k in state}}},
    ]  # fmt: skip
    job_meta = _meta(name, ns, labels={"app": "train", "team": ns}, generation=1)
    job_meta |= {"uid": uid, "managedFields": managed}
    return {
        "kind": "Job", "apiVersion": "batch/v1", "metadata": job_meta,
        "spec": {"backoffLimit": 6, "completionMode": "NonIndexed", "completions": 1,
                 "manualSelector": False, "parallelism": 1,
                 "podReplacementPolicy": "TerminatingOrFailed",
                 "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}},
                 "suspend": False,
                 "template": {"metadata": {"creationTimestamp": None, "labels": meta["labels"]},
                              "spec": template}},
        "status": state,
    }  # fmt: skip


@functools.cache
def _job_fields(template: tuple[str, ...], container: tuple[str, ...]) -> Obj:
    """The fields kubectl-create owns of a Job of this template (the same for its like)."""
    return {
        "f:spec": {f"f:{k}": {} for k in ("backoffLimit", "completionMode", "completions",
                   "manualSelector", "parallelism", "podReplacementPolicy", "suspend")}
        | {"f:template": {"f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:team": {}}},
           "f:spec": {f"f:{k}": {} for k in template}
           | {"f:containers": {'k:{"name":"main"}': {f"f:{k}": {} for k in container}}}}}
    }  # fmt: skip


OPERANDS: dict[str, str] = {
    "nvidia-driver-daemonset": "driver",
    "nvidia-device-plugin-daemonset": "device-plugin",
}


def operand_pod(ds: Obj, node: str) -> Obj:
    """A DaemonSet pod as its controller writes it: owned by the DaemonSet, pinned to `node`."""
    name = ds["metadata"]["name"]
    p = pod(f"{name}-{node}", OPERATOR_NS, node=node, gpu=0, phase="Running")
    p["metadata"]["generateName"] = f"{name}-"
    p["metadata"]["labels"] = {"app": name, "controller-revision-hash": "7c9b8d5f4",
                               "pod-template-generation": "1"}  # fmt: skip
    p["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                         "name": name, "uid": ds["metadata"]["uid"],
                                         "controller": True, "blockOwnerDeletion": True}]  # fmt: skip
    p["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}  # fmt: skip
    p["spec"]["restartPolicy"] = "Always"
    return p


PENDING_KINDS = (
    "insufficient",  # 16 GPUs: no node has that many
    "wrong-product",  # nodeSelector on a product the cluster does not have
    "untolerated",  # no toleration for the GPU nodes' taint
    "broken-driver",  # fits anywhere: the full pools and the broken nodes decide
    "pool-affinity",  # required node affinity on the L4 pool, which is full
    "quota-rejected",  # a Job whose pods the namespace quota rejected: no pod exists
    "amd-full",  # 8 AMD GPUs: the MI300X pool runs full
    "rdma-missing",  # GPUs and an RDMA device no node offers
)


def _quota_rejected(name: str, ns: str, gpu: int) -> list[Obj]:
    """A Job without pods and the job controller's FailedCreate event."""
    template = pod(name, ns, node=None, gpu=gpu, phase="Pending")
    job = {"kind": "Job", "apiVersion": "batch/v1", "metadata": _meta(name, ns),
           "spec": {"template": {"spec": template["spec"]}}, "status": {}}  # fmt: skip
    message = (
        f'Error creating: pods "{name}-x7k2p" is forbidden: exceeded quota: gpu-quota, '
        f"requested: requests.nvidia.com/gpu={gpu}, used: requests.nvidia.com/gpu=512, "
        "limited: requests.nvidia.com/gpu=512"
    )
    event = {"kind": "Event", "apiVersion": "v1", "metadata": _meta(f"{name}.create", ns),
             "involvedObject": {"kind": "Job", "name": name, "namespace": ns},
             "reason": "FailedCreate", "type": "Warning", "message": message,
             "count": 12, "lastTimestamp": TS}  # fmt: skip
    return [job, event]


def cluster(
    *, nodes: int, pods: int, tenants: int = 40, seed: int = 1
) -> tuple[list[Obj], list[tuple[str, str]]]:
    """All objects, and the (namespace, name) of pending pods worth triaging (`pinned` finds
    the few more pinned to the reservation)."""
    rnd = random.Random(seed)
    objs: list[Obj] = [{"kind": "Namespace", "apiVersion": "v1", "metadata": _meta(OPERATOR_NS)}]
    node_list: list[tuple[str, str, int, bool]] = []
    resource_of: dict[str, tuple[str, int]] = {}  # node -> the devices it offers, how many
    start = 0
    for pool, share, product, gpus, resource in POOLS:
        count = max(1, round(nodes * share))
        reserved = min(RESERVED, count // 4) if pool == "h100" else 0
        for i in range(count):
            if len(node_list) >= nodes:
                break
            name = f"{pool}-{start + i:05d}"
            nvidia = resource == NVIDIA_GPU
            broken = gpus > 0 and nvidia and rnd.random() < 0.01
            objs.append(node(name, pool, product, gpus, broken=broken, reserved=i < reserved,
                             resource=resource))  # fmt: skip
            # only the NVIDIA pools run the GPU Operator's operands (below)
            node_list.append((name, pool, gpus if nvidia else 0, broken))
            resource_of[name] = (resource, gpus)
        start += count
    policy: Obj = {"kind": "ClusterPolicy", "apiVersion": "nvidia.com/v1",
              "metadata": _meta("cluster-policy"),
              "status": {"state": "notReady", "namespace": OPERATOR_NS}}  # fmt: skip
    objs.append(policy)
    owner = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "name": "cluster-policy",
             "uid": policy["metadata"]["uid"], "controller": True}  # fmt: skip
    daemonsets: dict[str, Obj] = {}
    for ds, key in OPERANDS.items():  # as the operator creates them: owned, label-selected
        tolerate = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        daemonsets[ds] = {
            "kind": "DaemonSet", "apiVersion": "apps/v1",
            "metadata": _meta(ds, OPERATOR_NS, labels={"app": ds}, ownerReferences=[owner]),
            "spec": {"selector": {"matchLabels": {"app": ds}},
                     "template": {"metadata": {"labels": {"app": ds}},
                                  "spec": {"nodeSelector": {f"nvidia.com/gpu.deploy.{key}": "true"},
                                           "tolerations": tolerate,
                                           "containers": [{"name": ds, "image": f"nvcr.io/{ds}"}]}}},
            "status": {"desiredNumberScheduled": nodes},
        }  # fmt: skip
        objs.append(daemonsets[ds])
    teams = [f"team-{t:02d}" for t in range(tenants)]
    full_quota = teams[-1]  # this tenant has used its whole GPU quota
    for t in teams:
        used = "512" if t == full_quota else "0"
        objs.append({"kind": "Namespace", "apiVersion": "v1", "metadata": _meta(t)})
        objs.append({"kind": "ResourceQuota", "apiVersion": "v1",
                     "metadata": _meta("gpu-quota", t),
                     "spec": {"hard": {"requests.nvidia.com/gpu": "512"}},
                     "status": {"hard": {"requests.nvidia.com/gpu": "512"},
                                "used": {"requests.nvidia.com/gpu": used}}})  # fmt: skip
    made = 0
    gpu_nodes = [n for n in node_list if n[2] and not n[3]]
    for name, _pool, gpus, broken in node_list:  # the operator's pods, one per GPU node
        for ds in OPERANDS:
            if made >= pods or not gpus:
                continue
            p = operand_pod(daemonsets[ds], name)
            if broken and ds == "nvidia-driver-daemonset":
                p["status"]["containerStatuses"][0]["state"] = {
                    "waiting": {"reason": "CrashLoopBackOff", "message": "driver not loaded"}
                }
                p["status"]["containerStatuses"][0]["ready"] = False
            objs.append(p)
            made += 1
    free = {n[0]: n[2] for n in gpu_nodes}
    others = {  # the other vendors' pools: their free devices, per node
        r: {n: count for n, (res, count) in resource_of.items() if res == r and count}
        for r in ("amd.com/gpu", "aws.amazon.com/neuroncore")
    }
    pending: list[tuple[str, str]] = []
    workload = 0
    while made < pods:
        team = teams[workload % len(teams)]
        gpu = rnd.choice((1, 1, 2, 4, 8))
        pname = f"train-{workload:06d}-0"
        if rnd.random() < 0.02:
            why = PENDING_KINDS[len(pending) % len(PENDING_KINDS)]
            if why == "quota-rejected":
                objs.extend(_quota_rejected(pname.rsplit("-", 1)[0], full_quota, gpu))
                pending.append((full_quota, pname.rsplit("-", 1)[0]))
                workload += 1
                continue
            extra: Obj = {}
            if why == "wrong-product":
                extra["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-B200"}
            if why == "insufficient":
                gpu = 16
            if why == "amd-full":
                extra["resource"] = "amd.com/gpu"
                gpu = 8
            if why == "rdma-missing":
                extra["rdma"] = True
            if why == "pool-affinity":
                expr = {"key": "node-pool", "operator": "In", "values": ["l4"]}
                extra["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [expr]}]}}}  # fmt: skip
                gpu = min(gpu, 4)
            rdma = extra.pop("rdma", False)
            p = pod(pname, team, node=None, gpu=gpu, phase="Pending", **extra)
            if rdma:
                p["spec"]["containers"][0]["resources"]["limits"][RDMA] = "1"
            if why == "untolerated":
                p["spec"]["tolerations"] = []
            p["status"]["conditions"] = [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": f"0/{nodes} nodes are available: {nodes} Insufficient nvidia.com/gpu.",
            }]  # fmt: skip
            objs += _with_job(p)
            objs.append({"kind": "Event", "apiVersion": "v1",
                         "metadata": _meta(f"{pname}.evt", team),
                         "involvedObject": {"kind": "Pod", "name": pname, "namespace": team},
                         "reason": "FailedScheduling", "type": "Warning",
                         "message": p["status"]["conditions"][0]["message"],
                         "eventTime": TS, "series": {"count": 3, "lastObservedTime": TS}})  # fmt: skip
            pending.append((team, pname))
        elif others and rnd.random() < 0.08:  # a pod of the AMD or Trainium pools
            resource = rnd.choice(sorted(others))
            pool_free = others[resource]
            want = rnd.choice((1, 2, 4, 8)) if resource == "amd.com/gpu" else rnd.choice((2, 8, 32))
            target = next((n for n, f in pool_free.items() if f >= want), None)
            if target:
                pool_free[target] -= want
            objs += _with_job(pod(pname, team, node=target, gpu=want if target else 0,
                            phase="Running" if target else "Succeeded", resource=resource))  # fmt: skip
        else:
            target = None
            for _ in range(4):
                cand = rnd.choice(gpu_nodes)[0] if gpu_nodes else None
                if cand and free[cand] >= gpu:
                    target = cand
                    break
            phase = "Running" if target else "Succeeded"
            target = target or (rnd.choice(gpu_nodes)[0] if gpu_nodes else None)
            if phase == "Running" and target:
                free[target] -= gpu
            objs += _with_job(pod(pname, team, node=target, gpu=gpu if target else 0, phase=phase))
        made += 1
        workload += 1
    for i in range(PINNED):  # after the others: the cluster is otherwise as it was
        p = pod(f"pinned-{i:03d}-0", teams[i % len(teams)], node=None, gpu=8, phase="Pending",
                nodeSelector=dict([RESERVATION]))  # fmt: skip
        p["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                      "reason": "Unschedulable",
                                      "message": f"0/{nodes} nodes are available"}]  # fmt: skip
        objs += _with_job(p)
    return objs, pending


def pinned(objs: list[Obj]) -> list[tuple[str, str]]:
    """The pending pods of `cluster` pinned to the reservation (a pool of `RESERVED` nodes)."""
    return [
        (o["metadata"]["namespace"], o["metadata"]["name"])
        for o in objs
        if o["kind"] == "Pod"
        and (o["spec"].get("nodeSelector") or {}).get(RESERVATION[0]) == RESERVATION[1]
    ]
