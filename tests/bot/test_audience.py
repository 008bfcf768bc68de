"""One audience rule: the text renderer, Block Kit and the language model's digest show a tenant
the same part of a report (`TriageReport.for_audience`), and an operator all of it."""

from __future__ import annotations

import json

from assist.checks import report_digest
from bot.core.refs import ButtonRef
from bot.slack.blocks import report_blocks
from tests.bot.test_bot_units import _report as blocked
from triage import Audience, TriageReport
from triage.render import to_text

SECRET_BITS = ("other-ns/their-pod", "restart nvidia-driver-abc", "GPU Operator in gpu-operator",
               "kubectl get pods -n gpu-operator", "api.internal:6443")  # fmt: skip


def _report() -> TriageReport:
    """A blocked report with something of each kind only operators may read."""
    report = blocked(["team-a/train-0 asks for 8 GPUs"], detail=["other-ns/their-pod on node-1"])
    return report.model_copy(
        update={
            "remediation": ["ask for fewer GPUs"],
            "operator_steps": ["restart nvidia-driver-abc"],
            "verification": ["kubectl get pods -n gpu-operator"],
            "gpu_stack": ["GPU Operator in gpu-operator"],
            "data_age_note": "cluster data may be up to 90s old: lost the watch on pods "
            "(connection refused: api.internal:6443)",
        }
    )


def _rendered(report: TriageReport, audience: Audience) -> dict[str, str]:
    operator = audience is Audience.OPERATOR
    blocks = report_blocks(report, audience=audience, ref=ButtonRef(None, "team-a", "train-0"))
    return {
        "text": to_text(report, operator=operator),
        "blocks": json.dumps(blocks, ensure_ascii=False),
        "digest": json.dumps(report_digest(report, operator=operator), ensure_ascii=False),
    }


def test_a_tenant_reads_the_same_part_of_a_report_in_every_rendering() -> None:
    report = _report()
    for where, text in _rendered(report, Audience.TENANT).items():
        assert "asks for 8 GPUs" in text and "ask for fewer GPUs" in text, where
        leaked = [bit for bit in SECRET_BITS if bit in text]
        assert leaked == [], where
    assert "lost the watch on pods" in _rendered(report, Audience.TENANT)["text"]


def test_an_operator_reads_all_of_it() -> None:
    report = _report()
    assert report.for_audience(Audience.OPERATOR) is report
    shown = _rendered(report, Audience.OPERATOR)
    for where in ("text", "blocks", "digest"):
        assert "their-pod" in shown[where] and "restart nvidia-driver-abc" in shown[where], where
    assert "api.internal:6443" in shown["text"] and "api.internal:6443" in shown["blocks"]


def test_the_tenant_view_is_a_report_like_any_other() -> None:
    tenant = _report().for_audience(Audience.TENANT)
    assert TriageReport.model_validate(tenant.model_dump()) == tenant
    assert tenant.fingerprint == _report().fingerprint
