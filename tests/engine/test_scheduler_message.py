"""kube-scheduler's FailedScheduling text is parsed into counts per reason."""

from __future__ import annotations

from triage.layers.scheduling.scheduler import category, parse

MSG = (
    "0/9 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
    "3 node(s) didn't match Pod's node affinity/selector, 5 Insufficient nvidia.com/gpu. "
    "preemption: 0/9 nodes are available: 4 Preemption is not helpful for scheduling, "
    "5 No preemption victims found for incoming pod."
)


def test_parse_counts_reasons_and_preemption() -> None:
    p = parse(MSG)
    assert p is not None
    assert (p.available, p.total) == (0, 9)
    assert p.reasons["Insufficient nvidia.com/gpu"] == 5
    assert p.reasons["node(s) didn't match Pod's node affinity/selector"] == 3
    assert sum(p.reasons.values()) == 9
    assert p.preemption["No preemption victims found for incoming pod"] == 5
    assert p.categories() == {"taint", "selector", "insufficient"}


def test_unrelated_text_is_not_parsed() -> None:
    assert parse("pod has unbound immediate PersistentVolumeClaims") is None


def test_categories_cover_plugins_we_do_not_evaluate() -> None:
    assert category("node(s) didn't match pod topology spread constraints") == "topology spread"
    assert category("node(s) had volume node affinity conflict") == "volume"
    assert category("node(s) were unschedulable") == "cordoned"
    assert category("Too many pods") == "insufficient"
