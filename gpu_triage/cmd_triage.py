"""`gpu-triage why-pending` and `gpu-triage demo`: the engine from a terminal."""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path
from typing import Any

from gpu_triage.sources import add_cluster_args, add_engine_args, open_source
from triage import EngineConfig, load_playbook, load_snapshot, triage
from triage.cluster.objects import name_of, ns_of, owner, pod_problem
from triage.cluster.quantities import pod_requests
from triage.cluster.source import ClusterSource
from triage.layers.scheduling.exclusions import wants_gpu
from triage.render import to_json, to_text


def register(sub: Any) -> None:
    p = sub.add_parser("why-pending", help="explain why a GPU pod (or workload) is not running")
    p.add_argument(
        "name", metavar="POD", help="pod name, or a Job/Deployment/StatefulSet/ReplicaSet name"
    )
    p.add_argument(
        "-n",
        "--namespace",
        default=None,
        help="namespace (default: the kubeconfig context's, else 'default')",
    )
    add_cluster_args(p)
    p.set_defaults(handler=why_pending)

    d = sub.add_parser("demo", help="triage every stuck GPU workload in the bundled demo cluster")
    d.add_argument("--snapshot", help="use this snapshot instead of the bundled demo cluster")
    d.add_argument("--format", choices=("text", "json"), default="text")
    add_engine_args(d)
    d.set_defaults(handler=demo)


def _config(args: argparse.Namespace) -> EngineConfig:
    return EngineConfig(operator_namespace=args.operator_namespace)


def why_pending(args: argparse.Namespace) -> int:
    source = open_source(snapshot=args.snapshot, kubeconfig=args.kubeconfig, context=args.context)
    namespace = args.namespace or getattr(source, "default_namespace", None) or "default"
    report = triage(
        source,
        namespace=namespace,
        name=args.name,
        config=_config(args),
        playbook=load_playbook(args.playbook),
    )
    print(to_json(report) if args.format == "json" else to_text(report))
    return 0


def demo_snapshot() -> Path:
    return Path(str(resources.files("gpu_triage").joinpath("demo/cluster.yaml")))


def stuck_gpu_workloads(source: ClusterSource) -> list[tuple[str, str]]:
    """(namespace, name) of every GPU pod that is not running, and of GPU workloads with no pods.

    A pod owned by a ReplicaSet or Job is reported under its workload's name once.
    """
    found: list[tuple[str, str]] = []
    owners_with_pods: set[tuple[str, str]] = set()
    for pod in source.objects("Pod"):
        ref = owner(pod)
        if ref:
            owners_with_pods.add((ns_of(pod), ref[1]))
        if not wants_gpu(pod, pod_requests(pod)) or pod_problem(pod) is None:
            continue
        name = name_of(pod)
        if ref and ref[0] == "ReplicaSet":
            rs = source.get("ReplicaSet", ref[1], namespace=ns_of(pod))
            parent = owner(rs) if rs else None
            name = parent[1] if parent else ref[1]
        elif ref and ref[0] in ("Job", "StatefulSet"):
            name = ref[1]
        if (ns_of(pod), name) not in found:
            found.append((ns_of(pod), name))
    for kind in ("Job", "ReplicaSet"):
        for w in source.objects(kind):
            tpl = {"spec": ((w.get("spec") or {}).get("template") or {}).get("spec") or {}}
            if not wants_gpu(tpl, pod_requests(tpl)) or (ns_of(w), name_of(w)) in owners_with_pods:
                continue
            status = w.get("status") or {}
            done = any(
                c.get("type") == "Complete" and c.get("status") == "True"
                for c in status.get("conditions") or []
            )
            if done or (kind == "ReplicaSet" and not (w.get("spec") or {}).get("replicas")):
                continue
            name = name_of(w)
            parent = owner(w)
            if kind == "ReplicaSet" and parent:
                name = parent[1]
            if (ns_of(w), name) not in found:
                found.append((ns_of(w), name))
    return sorted(found)


def demo(args: argparse.Namespace) -> int:
    path = args.snapshot or demo_snapshot()
    source = load_snapshot(path, cluster_name="demo" if not args.snapshot else None)
    playbook = load_playbook(args.playbook)
    reports = [
        triage(source, namespace=ns, name=name, config=_config(args), playbook=playbook)
        for ns, name in stuck_gpu_workloads(source)
    ]
    if args.format == "json":
        print("[" + ",\n".join(to_json(r) for r in reports) + "]")
        return 0
    print(f"GPU Triage demo: {len(reports)} stuck GPU workload(s) in {path}\n")
    width = max((len(f"{r.pod.namespace}/{r.pod.name}") for r in reports), default=10)
    print(f"{'WORKLOAD':<{width}}  {'LAYER':<13}  {'OWNER':<22}  HEADLINE")
    for r in reports:
        layer = r.failing_layer.value if r.failing_layer else "-"
        team = r.owner.team if r.owner else "-"
        print(
            f"{r.pod.namespace + '/' + r.pod.name:<{width}}  {layer:<13}  {team:<22}  {r.headline}"
        )
    for r in reports:
        print("\n" + "=" * 100)
        print(to_text(r))
    return 0
