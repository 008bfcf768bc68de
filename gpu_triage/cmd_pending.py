"""`gpu-triage pending`: every stuck GPU workload in scope, grouped by root cause."""

from __future__ import annotations

import argparse
from typing import Any

import yaml

from gpu_triage.sources import add_cluster_args, open_source
from triage import EngineConfig, load_playbook
from triage.fleet import MEMBERS_SHOWN, Group, Sweep, sweep, waited


def register(sub: Any) -> None:
    p = sub.add_parser(
        "pending",
        help="every stuck GPU workload, grouped by root cause (largest GPU wait first)",
    )
    scope = p.add_mutually_exclusive_group()
    scope.add_argument(
        "-n",
        "--namespace",
        action="append",
        help="namespace to look in (repeatable; default: the kubeconfig context's)",
    )
    scope.add_argument(
        "-A", "--all-namespaces", action="store_true", help="look in every namespace"
    )
    p.add_argument(
        "-o", "--output", choices=("text", "json", "yaml"), help="output format (default: text)"
    )
    add_cluster_args(p)
    p.set_defaults(handler=pending)


def pending(args: argparse.Namespace) -> int:
    source = open_source(snapshot=args.snapshot, kubeconfig=args.kubeconfig, context=args.context)
    namespaces = None
    if not args.all_namespaces:
        namespaces = args.namespace or [getattr(source, "default_namespace", None) or "default"]
    result = sweep(
        source,
        namespaces=namespaces,
        config=EngineConfig(operator_namespace=args.operator_namespace),
        playbook=load_playbook(args.playbook),
    )
    output = args.output or args.format
    if output == "json":
        print(result.model_dump_json(indent=2))
    elif output == "yaml":
        print(yaml.safe_dump(result.model_dump(mode="json"), sort_keys=False, width=100), end="")
    else:
        print(
            to_text(result, scope="all namespaces" if namespaces is None else ", ".join(namespaces))
        )
    return 0


def to_text(result: Sweep, *, scope: str) -> str:
    head = (
        f"{result.workloads} stuck GPU workload(s), {result.gpus} GPU(s) waiting, "
        f"{len(result.groups)} cause(s) in {scope} (cluster {result.cluster})"
    )
    lines = [head]
    if not result.groups:
        lines.append("nothing stuck: every GPU workload in scope runs or waits for nothing")
    for i, group in enumerate(result.groups, 1):
        lines += ["", *_group_lines(i, group, result)]
    if result.waiting:
        names = ", ".join(f"{m.namespace}/{m.name}" for m in result.waiting[:MEMBERS_SHOWN])
        lines += ["", f"waiting, nothing blocks them (a node on its way, preemption): {names}"]
    for error in result.errors:
        lines.append(f"not triaged: {error}")
    return "\n".join(lines)


def _group_lines(i: int, group: Group, result: Sweep) -> list[str]:
    owner = "-"
    if group.owner is not None:
        owner = group.owner.team + (f" ({group.owner.channel})" if group.owner.channel else "")
    shown = group.members[:MEMBERS_SHOWN]
    members = ", ".join(
        f"{m.namespace}/{m.name} ({m.kind}, {m.gpus} GPU, {waited(m.since, result.generated_at)})"
        for m in shown
    )
    more = len(group.members) - len(shown)
    first = group.members[0]
    return [
        f"{i}. {group.layer.value}: {group.cause}",
        f"   {group.workloads} workload(s), {group.gpus} GPU(s) waiting, oldest "
        f"{waited(group.oldest, result.generated_at)}, owner {owner}",
        f"   {members}" + (f" and {more} more" if more else ""),
        f"   e.g. {first.headline}",
        f"   drill in: gpu-triage why-pending {first.name} -n {first.namespace}",
    ]
