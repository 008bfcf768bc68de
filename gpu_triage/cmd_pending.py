"""`gpu-triage pending`: every stuck GPU workload in scope, grouped by root cause."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from typing import Any

from gpu_triage.errors import EXIT_BLOCKED, EXIT_INCOMPLETE, EXIT_OK
from gpu_triage.extras import require
from gpu_triage.output import structured
from gpu_triage.progress import listed_by, showing_reads
from gpu_triage.record import VIA, recorded, recording_service, summary, who
from gpu_triage.service import Asked
from gpu_triage.settings import CommonSettings, settings_of
from gpu_triage.sources import add_cluster_args, source_from
from triage import ClusterSource, EngineConfig, Playbook, TriageReport, load_playbook, triage
from triage.fleet import MEMBERS_SHOWN, Group, Sweep, SweepSource, sweep, waited


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
    add_cluster_args(p)
    p.add_argument(
        "--exit-code",
        action="store_true",
        help="exit 1 when any workload is stuck by a cause; else 5 when the sweep is "
        "incomplete (something could not be read or judged)",
    )
    p.add_argument(
        "--record",
        action="store_true",
        help="triage each stuck workload in full and record it in the incident store, as the "
        "Slack bot does ($DATABASE_URL)",
    )
    p.add_argument("--database-url", metavar="URL", help="incident database (with --record)")
    p.set_defaults(handler=pending)


def pending(args: argparse.Namespace) -> int:
    if args.record:  # before any work: the store is an extra
        require("incidents", what="--record")
    settings = settings_of(args)
    source = source_from(
        args, settings=settings, read_ahead="sweep" if args.all_namespaces else "triage"
    )
    namespaces = None
    if not args.all_namespaces:
        namespaces = args.namespace or [source.default_namespace or "default"]
    config, playbook = settings.engine_config(), load_playbook(settings.playbook)
    started = time.perf_counter()
    with showing_reads(listed_by(source)):
        result = sweep(source, namespaces=namespaces, config=config, playbook=playbook)
        said = None
        if args.record:
            reports = _full_reports(source, result, config=config, playbook=playbook)
            took = (time.perf_counter() - started) * 1000 / max(len(reports), 1)
            said = _record(source, reports, settings=settings, took=took)
    scope = "all namespaces" if namespaces is None else ", ".join(namespaces)
    shown = MEMBERS_SHOWN if args.output != "wide" else None
    notes = source.coverage_notes()  # what the snapshot lacks, as every report says
    out = structured(result, args.output, kind="Sweep")
    if out is None:
        print(to_text(result, scope=scope, shown=shown, notes=notes, flags=drill_flags(args)))
    elif out:  # `-o name` of nothing stuck prints nothing, as kubectl
        print(out)
    if said:
        print(said, file=sys.stderr)
    if not args.exit_code:
        return EXIT_OK
    if result.groups:
        return EXIT_BLOCKED
    return EXIT_OK if result.complete else EXIT_INCOMPLETE


def _record(
    source: ClusterSource, reports: list[TriageReport], *, settings: CommonSettings, took: float
) -> str:
    """The reports recorded through the `TriageService` the bot uses; the line saying what
    that did."""
    with recording_service(source, settings=settings, record=True) as (service, store):
        assert store is not None
        runs = [
            recorded(service.record(r, asked=Asked(who(), via=VIA), duration_ms=took))
            for r in reports
        ]
        return summary(runs, where=store.display_url)


def _full_reports(
    source: ClusterSource, result: Sweep, *, config: EngineConfig, playbook: Playbook
) -> list[TriageReport]:
    """The full report of every workload the sweep found stuck (one events list for all)."""
    shared = SweepSource(source)
    members = [m for g in result.groups for m in g.members] + result.waiting
    return [
        triage(
            shared,
            namespace=m.namespace,
            name=m.name,
            config=config,
            playbook=playbook,
            sweep=shared.state,
        )
        for m in members
    ]


def to_text(
    result: Sweep,
    *,
    scope: str,
    shown: int | None = MEMBERS_SHOWN,
    notes: list[str] | None = None,
    flags: str = "",
) -> str:
    """People's view of a sweep; `shown` members per group (None: every one); `notes` last."""
    head = (
        f"{result.workloads} stuck workload(s), {result.gpus} GPU(s) waiting, "
        f"{len(result.groups)} cause(s) in {scope} (cluster {result.cluster})"
    )
    lines = [head]
    incomplete = [f"could not read: {line}" for line in result.unread]
    incomplete += [f"not triaged: {error}" for error in result.errors]
    if result.unknown:
        incomplete.append(
            f"could not judge {len(result.unknown)} stuck workload(s): "
            + ", ".join(f"{m.namespace}/{m.name}" for m in result.unknown[:shown])
            + (
                f" and {len(result.unknown) - shown} more"
                if shown and len(result.unknown) > shown
                else ""
            )
        )
    if incomplete:
        lines += ["INCOMPLETE: what follows is not the whole picture", *incomplete]
    if not result.groups and not incomplete:
        lines.append("nothing stuck: every workload in scope runs or waits for nothing")
    elif not result.groups:
        lines.append("no stuck workload found among what could be read and judged")
    for i, group in enumerate(result.groups, 1):
        lines += ["", *_group_lines(i, group, result, shown=shown, flags=flags)]
    if result.waiting:
        names = ", ".join(f"{m.namespace}/{m.name}" for m in result.waiting[:shown])
        lines += [
            "",
            f"not blocked at any layer (a node on its way, preemption, or the pod's own problem): {names}",
        ]
    for m in result.unknown[:shown]:
        lines += ["", f"unknown: {m.namespace}/{m.name} ({m.kind}, {m.gpus} GPU): {m.headline}"]
    if notes:
        lines += ["", *(f"Note: {note}" for note in notes)]
    return "\n".join(lines)


def _group_lines(
    i: int, group: Group, result: Sweep, *, shown: int | None, flags: str = ""
) -> list[str]:
    owner = "-"
    if group.owner is not None:
        owner = group.owner.team + (f" ({group.owner.channel})" if group.owner.channel else "")
    listed = group.members[:shown]
    members = ", ".join(
        f"{m.namespace}/{m.name} ({m.kind}, {m.gpus} GPU, {waited(m.since, result.generated_at)})"
        for m in listed
    )
    more = len(group.members) - len(listed)
    first = group.members[0]
    return [
        f"{i}. {group.layer.value}: {group.cause}",
        f"   {group.workloads} workload(s), {group.gpus} GPU(s) waiting, oldest "
        f"{waited(group.oldest, result.generated_at)}, owner {owner}",
        f"   {members}" + (f" and {more} more" if more else ""),
        f"   e.g. {first.headline}",
        f"   drill in: gpu-triage why-pending {first.name} -n {first.namespace}{flags}",
    ]


def drill_flags(args: argparse.Namespace) -> str:
    """The flags that make a "drill in" hint read the same cluster: the snapshot, else the
    kubeconfig and context (quoted for a shell)."""
    out = []
    for flag, value in (
        ("--snapshot", getattr(args, "snapshot", None)),
        (
            "--kubeconfig",
            None if getattr(args, "snapshot", None) else getattr(args, "kubeconfig", None),
        ),
        ("--context", None if getattr(args, "snapshot", None) else getattr(args, "context", None)),
    ):
        if value:
            out.append(f"{flag} {shlex.quote(str(value))}")
    return "".join(f" {f}" for f in out)
