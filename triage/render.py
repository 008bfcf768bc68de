"""Plain-text and JSON renderings of a report, for terminals and scripts.

Slack has its own renderer in `bot/`; both read the same TriageReport.
"""

from __future__ import annotations

import json
import re
from typing import Any

from triage.model import Answer, Audience, Status, TriageReport

_MARK = {
    Status.FAIL: "FAIL",
    Status.WARN: "warn",
    Status.OK: "ok",
    Status.UNKNOWN: "????",
    Status.SKIPPED: "skip",
}


# Every line break `str.splitlines()` knows, and the controls that can move a terminal's cursor
# or reorder text (ESC sequences, bidi overrides): cluster text must not start a line of its own.
_BREAKS = re.compile(r"\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")
_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f\u202a-\u202e\u2066-\u2069]")


def one_line(text: str) -> str:
    """`text` (from a cluster) on one line: line breaks become spaces, controls are dropped."""
    return _CONTROLS.sub("", _BREAKS.sub(" ", text))


def report_data(report: TriageReport) -> dict[str, Any]:
    """The report as JSON-able data: the model, and its fingerprint (the incident key)."""
    data = report.model_dump(mode="json")
    data["fingerprint"] = report.fingerprint
    return data


def to_json(report: TriageReport) -> str:
    return json.dumps(report_data(report), indent=2, ensure_ascii=False)


def to_text(report: TriageReport, *, operator: bool = True) -> str:
    """A terminal report: verdict first, then each layer's evidence, owner and next steps, as
    much of it as the audience may read (`TriageReport.for_audience`)."""
    report = report.for_audience(Audience.of(operator=operator))
    ref = report.pod
    what = f"{ref.kind.lower()} {ref.namespace}/{ref.name}"
    if ref.pod and ref.pod != ref.name:
        what += f" (pod {ref.pod})"
    lines = [f"{what} on cluster {report.cluster}"]
    if report.answer == Answer.UNKNOWN:
        lines.append("  UNKNOWN: a layer that could explain it could not be judged")
        lines.append(f"  {report.headline}")
    elif report.failing_layer is None:
        lines.append(f"  OK: {report.headline}")
    else:
        lines.append(
            f"  BLOCKED at layer {report.failing_layer.value} ({report.failing_layer.label})"
        )
        lines.append(f"  {report.headline}")
    lines.append("")
    for f in report.findings:
        lines.append(f"[{_MARK[f.status]}] {f.layer.value}: {f.summary}")
        for ev in f.evidence:
            lines.append(f"       - {ev}")
        for d in f.detail:
            lines.append(f"       · {d}")
    if report.gpu_stack:
        lines += ["", "GPU stack:"] + [f"  {line}" for line in report.gpu_stack]
    if report.owner is not None:
        o = report.owner
        extra = ", ".join(
            x for x in (o.channel, f"usergroup {o.usergroup}" if o.usergroup else None) if x
        )
        lines += [
            "",
            f"Owner: {o.team}" + (f" ({extra})" if extra else "") + f"  [route: {o.source}]",
        ]
    steps = report.operator_steps + report.remediation
    if steps:
        lines += ["", "Next steps:"]
        lines += [f"  {i}. {step}" for i, step in enumerate(steps, 1)]
    if report.verification:
        lines += ["", "Verify with:"]
        lines += [f"  $ {cmd}" for cmd in report.verification]
    if report.unread:
        lines += ["", "Could not read:"]
        for u in report.unread:
            judged = f" (left {', '.join(la.value for la in u.layers)} unknown)" if u.layers else ""
            lines.append(f"  - {u.message}{judged}")
    for note in report.notes + ([report.data_age_note] if report.data_age_note else []):
        lines.append(f"Note: {note}")
    return "\n".join(one_line(line) for line in lines)  # each entry is one line, whatever it quotes
