"""`gpu-triage verify-node`, `verify-nodes` and `preflight`: node admission from a terminal or CI.

Exit status: 0 when every verified node passes (preflight: no problems), 1 when any fails or
nothing matched, 2 (from cli.py) for errors. The optional test pod is the only write this tool
makes; it is refused unless writes are enabled (`--allow-writes` or GPU_TRIAGE_ALLOW_WRITES=1).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gpu_triage.errors import UserError
from gpu_triage.output import structured
from gpu_triage.progress import listed_by, showing_reads
from gpu_triage.settings import settings_of
from gpu_triage.sources import add_cluster_args, live_client, source_from
from triage import load_playbook
from triage.cluster.source import ClusterSource
from triage.label_query import parse_label_selector
from triage.verify.node import (
    CheckStatus,
    NodeVerification,
    probe_check,
    verify_node,
    verify_nodes,
    with_check,
)
from triage.verify.preflight import OperatorState, Preflight, preflight

_MARK = {
    CheckStatus.PASS: "pass",
    CheckStatus.FAIL: "FAIL",
    CheckStatus.WARN: "warn",
    CheckStatus.SKIP: "skip",
}


def _common(p: argparse.ArgumentParser) -> None:
    add_cluster_args(p)


def _test_pod_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--test-pod",
        action="store_true",
        help="also run a 1-GPU nvidia-smi pod on each node (a write; always deleted)",
    )
    p.add_argument(
        "--allow-writes",
        action="store_true",
        help="permit --test-pod (or set GPU_TRIAGE_ALLOW_WRITES=1)",
    )
    p.add_argument("--test-pod-image", default="nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04")
    p.add_argument("--test-pod-namespace", default="default")
    p.add_argument("--test-pod-timeout", type=float, default=180.0, help="seconds (default 180)")


def register(sub: Any) -> None:
    p = sub.add_parser("verify-node", help="run the GPU node verification template on one node")
    p.add_argument("node", metavar="NODE")
    _common(p)
    _test_pod_args(p)
    p.set_defaults(handler=verify_node_cmd)

    m = sub.add_parser("verify-nodes", help="verify every GPU node (or those matching --selector)")
    m.add_argument(
        "--selector",
        "-l",
        help="label selector as kubectl's: k=v, k==v, k!=v, 'k in (a,b)', 'k notin (a,b)', k, "
        "!k, comma-separated (default: all GPU nodes)",
    )
    _common(m)
    _test_pod_args(m)
    m.set_defaults(handler=verify_nodes_cmd)

    f = sub.add_parser(
        "preflight", help="cluster baseline: GPU nodes, runtimes, driver strategy, permissions"
    )
    _common(f)
    f.add_argument(
        "--access-policy",
        help="the Slack bot's access policy to check too ($GPU_TRIAGE_ACCESS_POLICY)",
    )
    f.set_defaults(handler=preflight_cmd)


def parse_selector(text: str | None) -> dict[str, Any] | None:
    """`-l` in kubectl's grammar (`triage.label_query`); None when not given."""
    if not text:
        return None
    return parse_label_selector(text)


def _source(args: argparse.Namespace) -> ClusterSource:
    if getattr(args, "test_pod", False):
        from kube.testpod import writes_enabled

        if not writes_enabled(flag=args.allow_writes):
            raise UserError(
                "--test-pod creates a pod: pass --allow-writes or set GPU_TRIAGE_ALLOW_WRITES=1"
            )
        if args.snapshot:
            raise UserError("--test-pod needs a live cluster, not --snapshot")
    return source_from(args)


def _engine(args: argparse.Namespace) -> dict[str, Any]:
    settings = settings_of(args)
    return {"config": settings.engine_config(), "playbook": load_playbook(settings.playbook)}


def _with_probes(
    args: argparse.Namespace, source: ClusterSource, results: list[NodeVerification]
) -> list[NodeVerification]:
    if not args.test_pod:
        return results
    from kube.testpod import TestPod

    client = live_client(source)
    if client is None:
        raise UserError("--test-pod needs a live cluster connection")
    probe = TestPod(
        client,
        namespace=args.test_pod_namespace,
        image=args.test_pod_image,
        timeout=args.test_pod_timeout,
    )
    playbook = load_playbook(settings_of(args).playbook)
    out = []
    for r in results:
        res = probe.run(r.node)
        if not res.deleted:
            print(
                f"gpu-triage: warning: test pod {res.namespace}/{res.pod} was not deleted: delete it by hand",
                file=sys.stderr,
            )
        check = probe_check(
            outcome=res.outcome,
            summary=res.summary,
            evidence=[
                f"pod {res.namespace}/{res.pod} ({res.seconds:g}s, deleted={res.deleted})",
                *res.evidence,
            ],
        )
        node = source.get("Node", r.node) or {"metadata": {"name": r.node}}
        out.append(with_check(r, check, node=node, playbook=playbook))
    return out


def verify_node_cmd(args: argparse.Namespace) -> int:
    source = _source(args)
    with showing_reads(listed_by(source)):
        found = [verify_node(source, args.node, **_engine(args))]
        results = _with_probes(args, source, found)
    return _emit(results, fmt=args.output, one=True, no_headers=args.no_headers)


def verify_nodes_cmd(args: argparse.Namespace) -> int:
    selector = parse_selector(args.selector)
    source = _source(args)
    with showing_reads(listed_by(source)):
        found = verify_nodes(source, selector=selector, **_engine(args))
        results = _with_probes(args, source, found)
    if not results and args.output == "text":
        what = f"matching {args.selector}" if selector else "(no GPU nodes found)"
        print(f"no nodes {what}: nothing verified")
    if not results and args.output not in ("json", "yaml"):
        return 1
    return _emit(results, fmt=args.output, no_headers=args.no_headers)


def _emit(
    results: list[NodeVerification], *, fmt: str, one: bool = False, no_headers: bool = False
) -> int:
    data = results[0] if one and len(results) == 1 else results
    out = structured(data, fmt, kind="NodeVerification")
    print(out if out is not None else to_text(results, headers=not no_headers, wide=fmt == "wide"))
    return 0 if results and all(r.passed for r in results) else 1


def to_text(results: list[NodeVerification], *, headers: bool = True, wide: bool = False) -> str:
    """A table, one line per node; then the checks of each node that failed (of every node
    with `wide`): a passing node is its line."""
    width = max([len(r.node) for r in results] + [4])
    lines = [f"{'NODE':<{width}}  RESULT  {'LAYER':<13}  {'OWNER':<22}  DRIVER"] if headers else []
    for r in results:
        layer = r.failing_layer.value if r.failing_layer else "-"
        owner = r.owner.team if r.owner else "-"
        lines.append(
            f"{r.node:<{width}}  {'pass' if r.passed else 'FAIL':<6}  {layer:<13}  {owner:<22}  {r.driver_strategy}"
        )
    for r in results:
        if r.passed and not wide:
            continue
        lines += ["", f"== {r.node}: {'passed' if r.passed else 'FAILED'} (cluster {r.cluster})"]
        for c in r.checks:
            if c.status in (CheckStatus.PASS, CheckStatus.SKIP) and not wide:
                continue  # a failing node's passing checks are for -o wide
            lines.append(f"  [{_MARK[c.status]}] {c.name:<18} {c.summary}")
            if c.status in (CheckStatus.FAIL, CheckStatus.WARN) or c.name in (
                "container-runtime",
                "taints",
            ):
                lines += [f"         - {e}" for e in c.evidence]
        if r.owner:
            where = " ".join(x for x in (r.owner.channel, r.owner.usergroup) if x)
            lines.append(f"  owner: {r.owner.team} {where} (route: {r.owner.source})".rstrip())
    return "\n".join(lines)


def preflight_cmd(args: argparse.Namespace) -> int:
    source = _source(args)
    with showing_reads(listed_by(source)):
        result = preflight(source, **_engine(args))
        client = live_client(source)
        if client is not None:
            from kube.access import missing_permissions

            result = result.with_permissions(missing_permissions(client))
    result, policy_line = _with_policy(result, settings_of(args).access_policy)
    data = structured(result, args.output, kind="Preflight")
    if data is not None:
        print(data)
    else:
        print(preflight_text(result))
        if policy_line:
            print(policy_line)
    return 0 if result.passed else 1


def _with_policy(result: Preflight, path: str | None) -> tuple[Preflight, str | None]:
    """The bot's access policy, checked before it is deployed: a file that does not load is
    a problem, none at all (or one granting nobody) a warning."""
    from bot.core.policy import PolicyError
    from bot.slack.ids import load_policy
    from bot.slack.messages import NO_POLICY_NOTICE

    try:
        policy = load_policy(path)
    except PolicyError as e:
        return result.model_copy(update={"problems": [*result.problems, str(e)]}), None
    if policy.empty:
        warning = f"Slack bot: {NO_POLICY_NOTICE}"
        return result.model_copy(update={"warnings": [*result.warnings, warning]}), None
    ops = policy.operators
    operators = len(ops.users) + len(ops.usergroups) + len(ops.channels)
    namespaces = {ns for t in policy.tenants for ns in t.namespaces}
    return result, (
        f"Slack bot access policy {path}: {operators} operator principal(s), "
        f"{len(policy.tenants)} tenant(s) over {len(namespaces)} namespace(s)"
    )


def _operator_line(op: OperatorState, ns: str) -> str:
    if not op.installed or op.namespace is None:
        return "GPU Operator: not found (nodes are judged by the stack they run)"
    line = f"GPU Operator in namespace {op.namespace} ({ns}"
    line += f", found by {op.found_by})" if op.found_by else ")"
    if op.cluster_policy_state:
        line += f"; ClusterPolicy state: {op.cluster_policy_state}"
    return line


def preflight_text(p: Preflight) -> str:
    op = p.operator
    ns = {True: "exists", False: "absent", None: "unknown (cannot read namespaces)"}[
        op.namespace_exists
    ]
    lines = [
        f"Preflight for cluster {p.cluster}: {'OK' if p.passed else 'PROBLEMS FOUND'}",
        f"GPU nodes: {len(p.gpu_nodes)}   other nodes: {p.cpu_nodes}",
        _operator_line(op, ns),
        *[f"GPU stack: {line}" for line in p.gpu_stacks],
        *(
            [
                f"RuntimeClass {op.runtime_class}: {({True: 'exists', False: 'absent', None: 'unknown'})[op.runtime_class_exists]}"
            ]
            if op.installed
            else []
        ),
        "container runtimes: "
        + (", ".join(f"{v} ({n})" for v, n in p.runtime_versions.items()) or "-"),
        "permissions: "
        + (
            "not checked (snapshot)"
            if p.missing_permissions is None
            else "all granted"
            if not p.missing_permissions
            else f"{len(p.missing_permissions)} missing"
        ),
    ]
    if p.gpu_nodes:
        width = max(len(g.name) for g in p.gpu_nodes)
        lines += [
            "",
            f"{'NODE':<{width}}  {'PRODUCT':<24}  {'RUNTIME':<22}  {'DRIVER':<16}  SEPARATED BY",
        ]
        for g in p.gpu_nodes:
            lines.append(
                f"{g.name:<{width}}  {(g.product or '-'):<24}  {(g.runtime or '-'):<22}  {g.driver_strategy.split(' ')[0]:<16}  {'; '.join(g.separated_by) or 'NOTHING'}"
            )
    lines += [f"problem: {x}" for x in p.problems] + [f"warning: {x}" for x in p.warnings]
    return "\n".join(lines)
