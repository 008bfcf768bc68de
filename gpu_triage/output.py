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

from triage.model import TriageReport
from triage.render import report_data

FORMATS = ("text", "wide", "json", "yaml")


def add_output_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-o",
        "--output",
        "--format",
        dest="output",
        choices=FORMATS,
        default="text",
        help="text (default), wide, json or yaml (--format is another name for it)",
    )


def structured(data: Any, output: str) -> str | None:
    """`data` (a model, or lists and dicts of them) as JSON or YAML; None for text and wide."""
    if output not in ("json", "yaml"):
        return None
    plain = _plain(data)
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
