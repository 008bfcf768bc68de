"""Every realistic scenario snapshot (tests/fixtures, `kubectl get -A -o yaml|json` shaped)
gets the verdict a GPU platform engineer would give, naming the objects involved."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from triage import TriageReport, load_snapshot, triage

FIXTURES = Path(__file__).parents[1] / "fixtures"
CASES: list[dict[str, Any]] = yaml.safe_load((FIXTURES / "expected.yaml").read_text())


def everything(r: TriageReport) -> str:
    parts = [r.headline]
    for f in r.findings:
        parts += [f.summary, *f.evidence, *f.detail]
    return "\n".join(parts)


@pytest.mark.parametrize("case", CASES, ids=[c["file"].rsplit(".", 1)[0] for c in CASES])
def test_fixture_verdict(case: dict[str, Any]) -> None:
    source = load_snapshot(FIXTURES / case["file"])
    report = triage(source, namespace=case["namespace"], name=case["name"])
    layer = report.failing_layer.value if report.failing_layer else None
    assert layer == case["failing_layer"], f"{case['note']}\n{everything(report)}"
    text = everything(report)
    missing = [s for s in case.get("evidence_contains", []) if str(s) not in text]
    assert not missing, f"evidence lacks {missing}\n{text}"
    if layer is not None:
        assert report.owner is not None and report.remediation
    if "code" in case:  # the leading code of the failing layer's finding (or, clear, any)
        assert layer is not None, case["note"]
        assert report.finding(report.failing_layer).codes[:1] == [case["code"]], text
    unsaid = [w for w in case.get("says", []) if w not in text]
    assert not unsaid, f"the report does not say {unsaid}\n{text}"
    if "owner" in case:
        assert report.owner is not None and report.owner.team == case["owner"], report.owner


@pytest.mark.parametrize("case", CASES[::3], ids=[c["file"].rsplit(".", 1)[0] for c in CASES[::3]])
def test_placement_fast_path_agrees_with_the_full_evaluation(
    case: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Healthy nodes take an inlined path in Placement.fit; it must not change any answer."""
    import triage.layers.health as node_health
    from triage.layers.node import assess_node

    fast = triage(
        load_snapshot(FIXTURES / case["file"]), namespace=case["namespace"], name=case["name"]
    )

    def never_clean(*args: Any, **kwargs: Any) -> Any:
        health = assess_node(*args, **kwargs)
        health.clean = False
        return health

    monkeypatch.setattr(node_health, "assess_node", never_clean)
    full = triage(
        load_snapshot(FIXTURES / case["file"]), namespace=case["namespace"], name=case["name"]
    )
    assert fast.model_dump(exclude={"generated_at"}) == full.model_dump(exclude={"generated_at"})
