"""`gpu-triage db upgrade`, `incidents`, `incident ID` and `stats`: the incident history in a
terminal (text) or for scripts (JSON).

Every command takes `--database-url` (default `DATABASE_URL`, else the SQLite file in the data
directory). With `--auto-migrate` or `GPU_TRIAGE_AUTO_MIGRATE=1` the schema is upgraded first.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gpu_triage.output import add_output_arg, structured
from gpu_triage.settings import settings_of
from incidents.errors import IncidentNotFoundError
from incidents.values import Incident, IncidentStatus, Stats, TriageRun
from triage.model import LAYER_ORDER, Layer
from triage.render import one_line

if TYPE_CHECKING:
    from incidents.store import IncidentStore


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    db = subparsers.add_parser("db", help="manage the incident database")
    db_sub = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    up = db_sub.add_parser("upgrade", help="create or upgrade the schema (alembic upgrade head)")
    _common(up, formats=False, migrate=False)
    up.set_defaults(handler=_upgrade, needs="incidents")

    ls = subparsers.add_parser("incidents", help="list incidents, newest first")
    ls.add_argument("--status", choices=[s.value for s in IncidentStatus], help="filter by status")
    ls.add_argument("--layer", choices=[layer.value for layer in Layer], help="filter by layer")
    ls.add_argument("--limit", type=_positive, default=50, help="at most N incidents (default 50)")
    ls.add_argument(
        "--groups", action="store_true", help="list root-cause groups (the fleet view's alerts)"
    )
    _cluster_arg(ls)
    scope = ls.add_mutually_exclusive_group()
    scope.add_argument(
        "-n", "--namespace", action="append", help="only this namespace's (repeatable)"
    )
    scope.add_argument(
        "-A", "--all-namespaces", action="store_true", help="every namespace (the default)"
    )
    _common(ls)
    ls.set_defaults(handler=_list, needs="incidents")

    one = subparsers.add_parser("incident", help="one incident and its triage runs")
    one.add_argument("id", type=_positive, metavar="ID", help="incident id")
    _common(one)
    one.set_defaults(handler=_show, needs="incidents")

    st = subparsers.add_parser("stats", help="incidents per layer, open now, time to resolve")
    _cluster_arg(st)
    _common(st)
    st.set_defaults(handler=_stats, needs="incidents")


def _cluster_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cluster", metavar="NAME", help="only this cluster's (default: every cluster's)"
    )


def _common(parser: argparse.ArgumentParser, *, formats: bool = True, migrate: bool = True) -> None:
    parser.add_argument(
        "--database-url",
        metavar="URL",
        help="SQLAlchemy URL (default: $DATABASE_URL, else incidents.sqlite in $GPU_TRIAGE_DATA_DIR, "
        "else in $XDG_DATA_HOME/gpu-triage or ~/.local/share/gpu-triage)",
    )
    if formats:
        add_output_arg(parser)
    if migrate:
        parser.add_argument(
            "--auto-migrate",
            action="store_true",
            default=None,
            help="upgrade the schema first (same as GPU_TRIAGE_AUTO_MIGRATE=1)",
        )


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def _open(args: argparse.Namespace) -> IncidentStore:
    """The store `--database-url` (else the settings) names; migrated first only with
    `--auto-migrate` or GPU_TRIAGE_AUTO_MIGRATE on."""
    return settings_of(args).open_store(migrate=False)


def _upgrade(args: argparse.Namespace) -> int:
    from incidents.database import display_name
    from incidents.store import IncidentStore  # SQLAlchemy/Alembic load only when needed

    settings = settings_of(args)
    with IncidentStore.from_url(settings.store_url, timeouts=settings.store_timeouts) as store:
        before = store.current_revision()
        store.upgrade()
        after = store.current_revision()
    where = display_name(settings.store_url)
    if before == after:
        print(f"{where}: schema already at {after}")
    else:
        print(f"{where}: schema upgraded {before or 'empty'} -> {after}")
    return 0


def _list_groups(args: argparse.Namespace) -> int:
    status = {"open": "open", "acknowledged": "open", "resolved": "resolved"}.get(args.status or "")
    with _open(args) as store:
        items = store.groups.list(status=status, limit=args.limit, cluster=args.cluster)
    if args.layer:
        items = [g for g in items if g.layer.value == args.layer]
    if _structured(items, args, kind="GroupIncident"):
        return 0
    if not items:
        print("No root-cause groups (they are recorded by the bot's watch mode: --alerts).")
        return 0
    rows = [
        ["GROUP", "CLUSTER", "STATUS", "LAYER", "CAUSE", "WORKLOADS", "GPUS", "OPENED (UTC)",
         "THREAD"]
    ]  # fmt: skip
    for g in items:
        rows.append(
            [
                f"g{g.id}",
                g.cluster,
                g.status,
                g.layer.value,
                g.cause if len(g.cause) <= 70 else g.cause[:67] + "...",
                str(g.workloads),
                str(g.gpus),
                _time(g.opened_at, seconds=False),
                g.channel or "-",
            ]
        )
    print(_table(rows, right={5, 6}))
    return 0


def _list(args: argparse.Namespace) -> int:
    if args.groups:
        return _list_groups(args)
    status = IncidentStatus(args.status) if args.status else None
    layer = Layer(args.layer) if args.layer else None
    with _open(args) as store:
        items = store.list(
            status=status,
            layer=layer,
            limit=args.limit,
            namespaces=args.namespace or None,
            cluster=args.cluster,
        )
    if _structured(items, args, kind="Incident"):
        return 0
    if not items:
        what = " ".join(x for x in (args.status, args.layer) if x)
        where = f" in {', '.join(args.namespace)}" if args.namespace else ""
        where += f" in cluster {args.cluster}" if args.cluster else ""
        print(f"No {what + ' ' if what else ''}incidents{where}.")
        return 0
    wide = args.output == "wide"
    now = datetime.now(UTC)
    head = ["ID", "STATUS", "LAYER", "WORKLOAD", "OPENED (UTC)", "RUNS", "OWNER"]
    rows = [head + (["CLUSTER", "SLACK THREAD", "HEADLINE"] if wide else [])]
    for i in items:
        row = [
            str(i.id),
            "snoozed" if i.snoozed(now) else i.status.value,
            i.failing_layer.value if i.failing_layer else "-",
            f"{i.workload} [{i.cluster}]" if i.cluster != "default" and not wide else i.workload,
            _time(i.opened_at, seconds=False),
            str(i.run_count),
            i.owner_team or "-",
        ]
        if wide:
            thread = f"{i.channel} {i.thread}" if i.thread else "-"
            row += [i.cluster, thread, i.headline]
        rows.append(row)
    print(_table(rows, right={0, 5}))
    return 0


def _show(args: argparse.Namespace) -> int:
    with _open(args) as store:
        incident = store.get(args.id)
        if incident is None:
            raise IncidentNotFoundError(args.id)
        runs = store.runs(args.id)
    if _structured({"incident": incident, "runs": runs}, args, kind="IncidentDetail"):
        return 0
    print(_incident_text(incident, runs))
    return 0


def _stats(args: argparse.Namespace) -> int:
    with _open(args) as store:
        stats = store.stats(cluster=args.cluster)
        groups = store.groups.counts(cluster=args.cluster)
    if _structured({**stats.model_dump(mode="json"), "groups": groups}, args, kind="IncidentStats"):
        return 0
    print(_stats_text(stats))
    print(f"root-cause groups: {groups['open']} open, {groups['resolved']} resolved")
    return 0


def _incident_text(i: Incident, runs: list[TriageRun]) -> str:
    layer = f"{i.failing_layer.value} ({i.failing_layer.label})" if i.failing_layer else "-"
    usergroup = f"usergroup {i.owner_usergroup}" if i.owner_usergroup else None
    owner = ", ".join(x for x in (i.owner_team, i.owner_channel, usergroup) if x)
    lines = [
        f"Incident {i.id}: {i.status.value}",
        f"  Workload:     {i.workload}" + (f" (pod {i.pod})" if i.pod and i.pod != i.name else ""),
        f"  Cluster:      {i.cluster}",
        f"  Layer:        {layer}",
        f"  Cause:        {i.headline}",
        f"  Owner:        {owner or '-'}",
        f"  Opened:       {_time(i.opened_at)}"
        + (f" by {i.requested_by}" if i.requested_by else ""),
    ]
    if i.reopened_at:
        lines.append(
            f"  Reopened:     {_time(i.reopened_at)} ({i.reopen_count} time(s): its cause returned)"
        )
    if i.acknowledged_at:
        lines.append(f"  Acknowledged: {_time(i.acknowledged_at)} by {i.acknowledged_by or '-'}")
    if i.snoozed_until:
        lines.append(f"  Snoozed:      until {_time(i.snoozed_until)} by {i.snoozed_by or '-'}")
    if i.resolved_at:
        how = f" ({i.resolution.value})" if i.resolution else ""
        by = f" by {i.resolved_by}" if i.resolved_by else ""
        took = _duration((i.resolved_at - (i.reopened_at or i.opened_at)).total_seconds())
        lines.append(f"  Resolved:     {_time(i.resolved_at)}{by}{how}, after {took}")
    if i.channel or i.thread:
        chat = (i.chat or "chat").capitalize() + ":"
        lines.append(f"  {chat:<14}channel {i.channel or '-'}, thread {i.thread or '-'}")
    lines.append(f"  Fingerprint:  {i.fingerprint}")
    lines.append("")
    lines.append(f"Runs ({len(runs)}):")
    rows = [["RUN", "AT (UTC)", "LAYER", "TOOK", "FROM", "BY", "HEADLINE"]]
    for r in runs:
        rows.append(
            [
                str(r.id),
                _time(r.created_at),
                r.failing_layer.value if r.failing_layer else "running",
                f"{r.duration_ms:.0f} ms",
                r.source,
                r.requested_by or "-",
                r.headline,
            ]
        )
    lines.append(_table(rows, right={0, 3}, indent="  "))
    return "\n".join(one_line(line) for line in "\n".join(lines).split("\n"))


def _stats_text(s: Stats) -> str:
    median = s.median_time_to_resolve_seconds
    ack = s.median_time_to_acknowledge_seconds
    lines = [
        f"Incidents: {s.total} total, {s.open_now} open now, {s.resolved} resolved",
        f"Median time to acknowledge: {_duration(ack) if ack is not None else '-'}",
        f"Median time to resolve: {_duration(median) if median is not None else '-'}",
        "",
    ]
    rows = [["LAYER", "TOTAL", "OPEN NOW", "MEDIAN TO ACK", "MEDIAN TO RESOLVE"]]
    for layer in LAYER_ORDER:
        m = s.median_time_to_resolve_seconds_by_layer.get(layer)
        a = s.median_time_to_acknowledge_seconds_by_layer.get(layer)
        rows.append(
            [
                layer.value,
                str(s.by_layer.get(layer, 0)),
                str(s.open_by_layer.get(layer, 0)),
                _duration(a) if a is not None else "-",
                _duration(m) if m is not None else "-",
            ]
        )
    lines.append(_table(rows, right={1, 2}))
    return "\n".join(lines)


def _table(rows: list[list[str]], *, right: set[int], indent: str = "") -> str:
    rows = [[one_line(cell) for cell in row] for row in rows]  # headlines quote cluster text
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    out = []
    for r in rows:
        cells = [
            cell.rjust(widths[c]) if c in right else cell.ljust(widths[c])
            for c, cell in enumerate(r)
        ]
        out.append(indent + "  ".join(cells).rstrip())
    return "\n".join(out)


def _time(value: datetime, *, seconds: bool = True) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


def _duration(seconds: float) -> str:
    total = round(seconds)
    if total < 60:
        return f"{total}s"
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    parts = [
        f"{days}d" if days else "",
        f"{hours}h" if hours else "",
        f"{minutes}m" if minutes else "",
    ]
    return " ".join(p for p in parts if p)


def _structured(value: Any, args: argparse.Namespace, *, kind: str) -> bool:
    """Print `value` as JSON or YAML when asked for; False for text and wide."""
    text = structured(value, args.output, kind=kind)
    if text:  # `-o name` of nothing prints nothing, as kubectl
        print(text)
    return text is not None
