"""The machine output contract: every JSON document carries apiVersion and kind, validates
against the schema shipped in the package, names the objects behind each evidence sentence,
and cuts nothing short; docs/output.md documents every field."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from bench.goldens import snapshots
from gpu_triage.contract import API_VERSION, document, schema, shipped
from gpu_triage.output import structured
from triage import load_snapshot, triage
from triage.fleet import stuck_workloads, sweep
from triage.verify.node import verify_nodes

ROOT = Path(__file__).resolve().parents[2]
VALIDATOR = jsonschema.Draft202012Validator(shipped())
DEMO = ROOT / "gpu_triage/demo/cluster.yaml"


def _valid(doc: dict[str, object]) -> None:
    errors = sorted(VALIDATOR.iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message[:200]}" for e in errors[:3]]


def test_the_shipped_schema_is_the_one_the_models_make() -> None:
    assert shipped() == schema(), (
        "gpu_triage/schema/output-v1.json is stale: "
        "python -m gpu_triage.contract > gpu_triage/schema/output-v1.json"
    )


@pytest.mark.parametrize("path", snapshots(), ids=lambda p: p.name)
def test_every_fixture_s_output_validates(path: Path) -> None:
    """Every stuck workload's full report (what `why-pending -o json` prints), the sweep
    (`pending -o json`) and the node verification of each fixture."""
    source = load_snapshot(path)
    targets = dict.fromkeys((s.namespace, s.name) for s in stuck_workloads(source))
    for ns, name in list(targets)[:8]:
        report = triage(source, namespace=ns, name=name, nodes=True)
        doc = json.loads(structured(report, "json", kind="TriageReport") or "")
        assert doc["apiVersion"] == API_VERSION and doc["kind"] == "TriageReport"
        _valid(doc)
        for f in doc["findings"]:  # one item per sentence, in the same order
            assert [i["text"] for i in f["evidence_items"]] == f["evidence"]
            assert [i["text"] for i in f["detail_items"]] == f["detail"]
    _valid(json.loads(structured(sweep(source), "json", kind="Sweep") or ""))
    _valid(json.loads(structured(verify_nodes(source), "json", kind="NodeVerification") or ""))


def test_the_schema_refuses_what_is_not_the_contract() -> None:
    report = triage(load_snapshot(DEMO), namespace="team-vision", name="resnet-train-0")
    doc = json.loads(structured(report, "json", kind="TriageReport") or "")
    _valid(doc)
    for broken in (
        {**doc, "kind": "Report"},
        {k: v for k, v in doc.items() if k != "apiVersion"},
        {**doc, "failing_layer": "network"},
        {**doc, "surprise": 1},
    ):
        assert list(VALIDATOR.iter_errors(broken)), broken.get("kind")


def test_evidence_names_its_objects_with_the_field_that_says_so() -> None:
    report = triage(load_snapshot(DEMO), namespace="research", name="gh200-bench", nodes=True)
    items = [i for f in report.findings for i in f.evidence_items + f.detail_items]
    refs = {(r.kind, r.namespace, r.name, r.field, r.value) for i in items for r in i.refs}
    assert (
        "Node", None, "gpu-a100-01", "metadata.labels[nvidia.com/gpu.product]",
        "NVIDIA-A100-SXM4-80GB",
    ) in refs  # fmt: skip
    assert (
        "Pod", "gpu-operator", "nvidia-driver-daemonset-886l9",
        "status.containerStatuses[nvidia-driver-ctr].state", "CrashLoopBackOff",
    ) in refs  # fmt: skip
    assert ("Pod", "research", "gh200-bench-0", "event", "FailedScheduling") in refs


def test_json_cuts_nothing_short_where_text_counts() -> None:
    source = load_snapshot(DEMO)
    text = triage(source, namespace="research", name="gh200-bench")
    full = triage(source, namespace="research", name="gh200-bench", nodes=True)
    counted = [e for e in text.finding(text.failing_layer).evidence if "more node(s)" in e]  # type: ignore[arg-type]
    assert counted  # the terminal counts the rest ...
    evidence = full.finding(full.failing_layer).evidence  # type: ignore[arg-type]
    assert not [e for e in evidence if re.search(r"… .*more", e)]  # ... scripts get them all
    named = {r.name for i in full.finding(full.failing_layer).evidence_items for r in i.refs}  # type: ignore[arg-type]
    assert {n.name for n in full.nodes or [] if n.reason == "scheduling.selector-mismatch"} <= named


def test_every_field_is_documented() -> None:
    doc = (ROOT / "docs/output.md").read_text(encoding="utf-8")
    missing = []
    for name, definition in schema()["$defs"].items():
        for field in definition.get("properties", {}):
            if f"`{field}`" not in doc:
                missing.append(f"{name}.{field}")
    assert not missing, f"docs/output.md does not document: {missing}"


def test_lists_are_lists_of_their_kind() -> None:
    assert document("Incident", []) == {
        "apiVersion": API_VERSION,
        "kind": "IncidentList",
        "items": [],
    }
    _valid(document("Incident", []))


def test_yaml_and_name_output_from_the_cli() -> None:
    run = [sys.executable, "-m", "gpu_triage.cli"]
    common = ["--snapshot", str(DEMO)]
    out = subprocess.run(
        [*run, "pending", "-A", *common, "-o", "yaml"], capture_output=True, text=True, check=True
    )
    assert out.stdout.startswith(f"apiVersion: {API_VERSION}\nkind: Sweep\n")
    names = subprocess.run(
        [*run, "why-pending", "team-vision/resnet-train-0", *common, "-o", "name"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert names.stdout == "pod/resnet-train-0\n"
    nodes = subprocess.run(
        [*run, "verify-nodes", *common, "-l", "nvidia.com/gpu.product in (NVIDIA-H100-80GB-HBM3)", "-o", "name"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert nodes.stdout.splitlines() == ["node/gpu-h100-01", "node/gpu-h100-02", "node/gpu-h100-03"]
