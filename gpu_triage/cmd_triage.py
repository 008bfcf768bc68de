"""`gpu-triage why-pending` and `gpu-triage demo`: the engine from a terminal."""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path
from typing import Any

from gpu_triage.sources import add_cluster_args, add_engine_args, open_source
from triage import EngineConfig, load_playbook, load_snapshot, triage
from triage.fleet import stuck_workloads
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


def demo(args: argparse.Namespace) -> int:
    path = args.snapshot or demo_snapshot()
    source = load_snapshot(path, cluster_name="demo" if not args.snapshot else None)
    playbook = load_playbook(args.playbook)
    reports = [
        triage(source, namespace=ns, name=name, config=_config(args), playbook=playbook)
        for ns, name in ((s.namespace, s.name) for s in stuck_workloads(source))
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
