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


_ONCE_CREATED = "once created: "
_ANYWAY = re.compile(
    r" \((?:this pod cannot use that node anyway|but \d+ other node\(s\) can take it)[^)]*\)$"
)


def _side_key(summary: str) -> str:
    """A side finding as said to any pod: without what it means for this one."""
    return _ANYWAY.sub("", summary.removeprefix(_ONCE_CREATED))


def report_data(report: TriageReport) -> dict[str, Any]:
    """The report as JSON-able data: the model, and its fingerprint (the incident key)."""
    data = report.model_dump(mode="json")
    data["fingerprint"] = report.fingerprint
    return data


def to_json(report: TriageReport) -> str:
    return json.dumps(report_data(report), indent=2, ensure_ascii=False)


def to_text(
    report: TriageReport,
    *,
    operator: bool = True,
    wide: bool = False,
    said: set[tuple[str, str]] | None = None,
) -> str:
    """A terminal report: verdict first, then each layer's evidence, owner and next steps, as
    much of it as the audience may read (`TriageReport.for_audience`).

    Quiet by default: a side finding (`warn`: it does not block this pod) is its one summary
    line, its evidence is for `wide`; with `said` (the side findings a command already
    printed, shared across its reports) one said before is named once, not repeated."""
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
        if f.status == Status.WARN and not wide:
            key = (f.layer.value, "\n".join(sorted(f.detail)) or _side_key(f.summary))
            again = said is not None and key in said
            if said is not None:
                said.add(key)
            more = len(f.evidence) + len(f.detail)
            tail = " (said above)" if again else f" (+{more} line(s) with -o wide)" if more else ""
            lines.append(f"[{_MARK[f.status]}] {f.layer.value}: {f.summary}{tail}")
            continue
        lines.append(f"[{_MARK[f.status]}] {f.layer.value}: {f.summary}")
        for ev in f.evidence:
            lines.append(f"       - {ev}")
        for d in f.detail:
            lines.append(f"       · {d}")
    stack_key = ("gpu-stack", "\n".join(report.gpu_stack))
    if report.gpu_stack and (wide or said is None or stack_key not in said):
        lines += ["", "GPU stack:"] + [f"  {line}" for line in report.gpu_stack]
    if said is not None and report.gpu_stack:
        said.add(stack_key)
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


def nodes_table(report: TriageReport, *, headers: bool = True) -> str:
    """`-o wide`'s node table: every node judged for the pod, what stops it there."""
    rows = [["NODE", "USABLE", "ELIGIBLE", "LAYER", "REASON", "BLOCKING"]] if headers else []
    for n in report.nodes or []:
        rows.append(
            [
                n.name,
                "yes" if n.usable else "no",
                "yes" if n.eligible else "no",
                n.layer.value if n.layer else "-",
                n.reason or "-",
                n.blocking or "-",
            ]
        )
    if not rows:
        return ""
    widths = [max(len(one_line(r[c])) for r in rows) for c in range(len(rows[0]))]
    lines = [
        "  ".join(one_line(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in rows
    ]
    return "\n" + "\n".join(lines)
