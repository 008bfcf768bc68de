"""The machine output contract: what `-o json` and `-o yaml` print, as scripts may rely on it.

Every document carries `apiVersion: gpu-triage.io/v1` and a `kind` (as Kubernetes objects
do), so a script can tell a report from a sweep or a list before reading further; lists are
`<Kind>List` with `items`. The fields are the models' (`triage.model`, `triage.fleet`,
`triage.verify`, `incidents.values`), documented in `docs/output.md`.

The JSON Schema shipped beside this module (`schema/output-v1.json`) is generated from those
models (`python -m gpu_triage.contract > gpu_triage/schema/output-v1.json`); a test fails when
the shipped file and the models differ, and the test suite validates every fixture's output
against it. Within v1, fields are only ever added; a field removed or retyped is v2.
"""

from __future__ import annotations

import copy
import json
import sys
from importlib import resources
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import models_json_schema

API_VERSION = "gpu-triage.io/v1"
SCHEMA_FILE = "schema/output-v1.json"


def document(kind: str, data: Any) -> dict[str, Any]:
    """`data` (JSON-able) as a document of `kind`: a list becomes `{kind}List` with `items`."""
    if isinstance(data, list):
        return {"apiVersion": API_VERSION, "kind": f"{kind}List", "items": data}
    if "apiVersion" in data or "kind" in data:  # a field would hide the envelope's
        raise ValueError(f"a {kind} document cannot carry its own kind")
    return {"apiVersion": API_VERSION, "kind": kind, **data}


class IncidentDetail(BaseModel):
    """`gpu-triage incident ID`: the incident and its runs, oldest first."""

    model_config = ConfigDict(extra="forbid")

    incident: Any
    runs: list[Any]


class Answered(BaseModel):
    """`gpu-triage ask`: what kind of answer it is, which question it understood, the words,
    and the report when a triage answered it."""

    model_config = ConfigDict(extra="forbid")

    type: str = Field(description="triage, verify, fleet, faq, help or error")
    intent: str = Field(description="what the question was understood as")
    text: str = Field(description="the answer in words (the FAQ's, in the language asked)")
    report: Any = Field(default=None, description="the TriageReport, when a triage answered")
    model_answer_discarded: str | None = Field(
        default=None, description="why a language model's answer was not used"
    )


def _models() -> dict[str, tuple[type[BaseModel], dict[str, Any]]]:
    """kind → (model, extra properties the document adds)."""
    from incidents.values import GroupIncident, Incident, Stats, TriageRun
    from triage.fleet import Sweep
    from triage.model import TriageReport
    from triage.verify.node import NodeVerification
    from triage.verify.preflight import Preflight

    fingerprint = {
        "fingerprint": {
            "type": "string",
            "description": "hash of the failing layer and its codes: the incident key's cause",
        }
    }
    groups = {
        "groups": {
            "type": "object",
            "description": "root-cause groups open and resolved",
            "additionalProperties": {"type": "integer"},
        }
    }
    return {
        "TriageReport": (TriageReport, fingerprint),
        "Sweep": (Sweep, {}),
        "NodeVerification": (NodeVerification, {}),
        "Preflight": (Preflight, {}),
        # Incident and GroupIncident have a `kind` of their own (the workload's): they are
        # printed in lists and in an IncidentDetail, never as documents of their own.
        "Incident": (Incident, {}),
        "TriageRun": (TriageRun, {}),
        "GroupIncident": (GroupIncident, {}),
        "IncidentStats": (Stats, groups),
        "IncidentDetail": (IncidentDetail, {}),
        "Answer": (Answered, {}),
    }


LISTS = ("TriageReport", "NodeVerification", "Incident", "GroupIncident")
_ITEMS_ONLY = ("Incident", "GroupIncident", "TriageRun")


def schema() -> dict[str, Any]:
    """The JSON Schema of every document the CLI prints as JSON or YAML."""
    models = _models()
    _, top = models_json_schema(
        [(m, "serialization") for m, _ in models.values()], ref_template="#/$defs/{model}"
    )
    defs: dict[str, Any] = top["$defs"]
    names = {kind: m.__name__ for kind, (m, _) in models.items()}
    _tighten(defs, names)
    kinds: list[dict[str, Any]] = []
    for kind, (_, extra) in models.items():
        if kind in _ITEMS_ONLY:
            continue
        body = copy.deepcopy(defs[names[kind]])
        body["properties"] = {**_envelope(kind), **body["properties"], **extra}
        body["required"] = ["apiVersion", "kind", *body.get("required", []), *extra]
        body["additionalProperties"] = False
        kinds.append(body)
        defs[names[kind]]["properties"].update(extra)  # a list's items carry them too
        defs[names[kind]]["required"] = [*defs[names[kind]].get("required", []), *extra]
    for kind in LISTS:
        kinds.append(
            {
                "type": "object",
                "title": f"{kind}List",
                "properties": {
                    **_envelope(f"{kind}List"),
                    "items": {"type": "array", "items": {"$ref": f"#/$defs/{names[kind]}"}},
                },
                "required": ["apiVersion", "kind", "items"],
                "additionalProperties": False,
            }
        )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://gpu-triage.io/schema/output-v1.json",
        "title": "GPU Triage machine output (apiVersion gpu-triage.io/v1)",
        "oneOf": kinds,
        "$defs": defs,
    }


def _envelope(kind: str) -> dict[str, Any]:
    return {"apiVersion": {"const": API_VERSION}, "kind": {"const": kind}}


def _tighten(defs: dict[str, Any], names: dict[str, str]) -> None:
    """The wrappers' `Any` members are the models they hold."""
    detail = defs[names["IncidentDetail"]]["properties"]
    detail["incident"] = {"$ref": f"#/$defs/{names['Incident']}"}
    detail["runs"] = {"type": "array", "items": {"$ref": f"#/$defs/{names['TriageRun']}"}}
    answered = defs[names["Answer"]]["properties"]
    answered["report"] = {
        "anyOf": [{"$ref": f"#/$defs/{names['TriageReport']}"}, {"type": "null"}],
        "default": None,
    }


def shipped() -> dict[str, Any]:
    """The schema as shipped in the package."""
    text = resources.files("gpu_triage").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


if __name__ == "__main__":
    sys.stdout.write(json.dumps(schema(), indent=2, ensure_ascii=False) + "\n")
