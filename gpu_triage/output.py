"""What commands print, by kubectl's conventions: `-o/--output text|wide|json|yaml` on every
command that prints (`--format` is kept as another name for it). `text` is for people, `wide`
adds what does not fit a terminal line (more columns, every member), `json` and `yaml` carry
the same data for scripts."""

from __future__ import annotations

import argparse
import json
from typing import Any

import yaml
from pydantic import BaseModel

from gpu_triage.contract import document
from gpu_triage.errors import UserError
from triage.model import TriageReport
from triage.render import report_data

FORMATS = ("text", "wide", "json", "yaml", "name")
# kubectl's `-o name`: resource.group/name
_RESOURCE = {
    "Pod": "pod", "Job": "job.batch", "Deployment": "deployment.apps",
    "StatefulSet": "statefulset.apps", "ReplicaSet": "replicaset.apps",
    "DaemonSet": "daemonset.apps", "Node": "node",
}  # fmt: skip


def add_output_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-o",
        "--output",
        "--format",
        dest="output",
        choices=FORMATS,
        default="text",
        help="text (default), wide (what text leaves out), json, yaml, or name (kubectl's "
        "resource/name, one a line); --format is another name for it",
    )
    p.add_argument(
        "--no-headers",
        action="store_true",
        help="tables without their header line (text and wide), as kubectl's",
    )


_NAMED = (
    "TriageReport",
    "Sweep",
    "NodeVerification",
    "Incident",
    "GroupIncident",
    "IncidentDetail",
)


def resource_name(kind: str, name: str) -> str:
    """`kind`/`name` as `kubectl get -o name` prints it (`statefulset.apps/x`)."""
    return f"{_RESOURCE.get(kind, kind.lower())}/{name}"


def names(data: Any, kind: str) -> str:
    """`-o name`: the objects `data` (a document of `kind`) is about, one a line."""
    if kind not in _NAMED:
        raise UserError(f"-o name lists objects, and this command prints a {kind}: use -o json")
    items = data if isinstance(data, list) else [data]
    out: list[str] = []
    for item in items:
        if isinstance(item, TriageReport):
            out.append(resource_name(item.pod.kind, item.pod.name))
        elif hasattr(item, "groups") and hasattr(item, "waiting"):  # a Sweep
            members = [m for g in item.groups for m in g.members]
            out += [resource_name(m.kind, m.name) for m in [*members, *item.waiting]]
        elif hasattr(item, "node") and hasattr(item, "checks"):  # a NodeVerification
            out.append(resource_name("Node", item.node))
        elif kind in ("Incident", "GroupIncident") and hasattr(item, "id"):
            out.append(f"incident/{'g' if kind == 'GroupIncident' else ''}{item.id}")
        elif kind == "IncidentDetail" and isinstance(item, dict):
            out.append(f"incident/{item['incident'].id}")
    return "\n".join(dict.fromkeys(out))


def structured(data: Any, output: str, *, kind: str) -> str | None:
    """`data` (a model, or lists and dicts of them) as a JSON or YAML document of `kind`
    (`gpu_triage.contract`: a list is a `{kind}List`); None for the other formats."""
    if output == "name":
        return names(data, kind)
    if output not in ("json", "yaml"):
        return None
    plain = document(kind, _plain(data))
    if output == "json":
        return json.dumps(plain, indent=2, ensure_ascii=False)
    return yaml.safe_dump(plain, sort_keys=False, width=100, allow_unicode=True).rstrip("\n")


def _plain(data: Any) -> Any:
    if isinstance(data, TriageReport):
        return report_data(data)
    if isinstance(data, BaseModel):
        return data.model_dump(mode="json")
    if isinstance(data, (list, tuple)):
        return [_plain(x) for x in data]
    if isinstance(data, dict):
        return {k: _plain(v) for k, v in data.items()}
    return data
