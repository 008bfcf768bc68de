"""`gpu-triage why-pending` and `gpu-triage demo`: the engine from a terminal."""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from gpu_triage.errors import EXIT_OK, answer_status
from gpu_triage.extras import require
from gpu_triage.output import add_output_arg, structured
from gpu_triage.progress import listed_by, showing_reads
from gpu_triage.record import VIA, recorded, recording_service, summary, who
from gpu_triage.settings import settings_of
from gpu_triage.sources import add_cluster_args, add_engine_args, source_from
from triage import load_playbook, load_snapshot, triage
from triage.fleet import stuck_workloads
from triage.named import parse_target, with_namespace
from triage.render import nodes_table, to_text


def register(sub: Any) -> None:
    p = sub.add_parser("why-pending", help="explain why a GPU pod (or workload) is not running")
    p.add_argument(
        "name",
        metavar="POD",
        help="NAME, NAMESPACE/NAME or KIND/NAME (po, job, deploy, sts, rs, ds): a pod, or a "
        "Job/Deployment/StatefulSet/ReplicaSet whose most stuck pod is examined",
    )
    p.add_argument(
        "-n",
        "--namespace",
        default=None,
        help="namespace (default: the kubeconfig context's, else 'default')",
    )
    add_cluster_args(p)
    p.add_argument(
        "--exit-code",
        action="store_true",
        help="exit 1 when a layer blocks the workload, 5 when a layer that could explain it "
        "could not be judged (default: 0 whenever the triage ran)",
    )
    p.add_argument(
        "--record",
        action="store_true",
        help="record the run in the incident store, as the Slack bot does ($DATABASE_URL)",
    )
    p.add_argument("--database-url", metavar="URL", help="incident database (with --record)")
    p.set_defaults(handler=why_pending)

    d = sub.add_parser("demo", help="triage every stuck GPU workload in the bundled demo cluster")
    d.add_argument("--snapshot", help="use this snapshot instead of the bundled demo cluster")
    add_output_arg(d)
    add_engine_args(d)
    d.set_defaults(handler=demo)


def why_pending(args: argparse.Namespace) -> int:
    """One triage through the `TriageService` the bot uses (recorded with `--record`)."""
    if args.record:  # before any work: the store is an extra
        require("incidents", what="--record")
    named = parse_target(args.name)  # before any read: a typo fails here
    given = with_namespace(named, args.namespace)
    settings = settings_of(args)
    source = source_from(args, settings=settings, read_ahead="triage")
    namespace = given or source.default_namespace or "default"
    with (
        showing_reads(listed_by(source)),
        recording_service(source, settings=settings, record=args.record) as (service, store),
    ):
        run = recorded(
            service.run(
                cluster=None,
                namespace=namespace,
                name=named.spelled,
                requested_by=who(),
                via=VIA,
                # scripts (and -o wide) get every node and every line; people the findings
                nodes=args.output in ("json", "yaml", "wide"),
            )
        )
        said = None if store is None else summary([run], where=store.display_url)
    report = run.report
    out = structured(report, args.output, kind="TriageReport")
    print(out if out is not None else to_text(report, wide=args.output == "wide"))
    if args.output == "wide" and report.nodes:
        print(nodes_table(report, headers=not args.no_headers))
    if said:
        print(said, file=sys.stderr)
    return answer_status(report.answer) if args.exit_code else EXIT_OK


def demo_snapshot() -> Path:
    return Path(str(resources.files("gpu_triage").joinpath("demo/cluster.yaml")))


def demo(args: argparse.Namespace) -> int:
    path = args.snapshot or demo_snapshot()
    source = load_snapshot(path, cluster_name="demo" if not args.snapshot else None)
    settings = settings_of(args)
    config, playbook = settings.engine_config(), load_playbook(settings.playbook)
    # the tenants' GPU workloads, once each (the fleet view also lists the stack's own pods
    # and every place a workload is stuck: `pending -A`)
    workloads = dict.fromkeys((s.namespace, s.name) for s in stuck_workloads(source) if s.gpus)
    reports = [
        triage(
            source,
            namespace=ns,
            name=name,
            config=config,
            playbook=playbook,
            nodes=args.output in ("json", "yaml", "wide"),
        )
        for ns, name in workloads
    ]
    data = structured(reports, args.output, kind="TriageReport")
    if data is not None:
        print(data)
        return 0
    print(f"GPU Triage demo: {len(reports)} stuck GPU workload(s) in {path}\n")
    width = max((len(f"{r.pod.namespace}/{r.pod.name}") for r in reports), default=10)
    if not args.no_headers:
        print(f"{'WORKLOAD':<{width}}  {'LAYER':<13}  {'OWNER':<22}  HEADLINE")
    for r in reports:
        layer = r.failing_layer.value if r.failing_layer else "-"
        team = r.owner.team if r.owner else "-"
        print(
            f"{r.pod.namespace + '/' + r.pod.name:<{width}}  {layer:<13}  {team:<22}  {r.headline}"
        )
    said: set[tuple[str, str]] = set()  # a side finding is said once per command
    for r in reports:
        print("\n" + "=" * 100)
        print(to_text(r, wide=args.output == "wide", said=said))
    return 0
