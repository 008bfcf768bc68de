"""Issue 34's recognitions at their edges: what the upgrade controller's states hold off a node
and what they do not, the runtime's words for each cause, kubelet's Allocate words, quota
scopes and LimitRange fields."""

from __future__ import annotations

from pathlib import Path

import pytest

from triage import load_snapshot, triage
from triage.layers.kubelet import allocate_cause
from triage.layers.quota.admission import scope_matches
from triage.layers.runtime import cause_of
from triage.layers.upgrade import selector_matches, upgrade_verdict
from triage.model import Layer
from triage.vendors import NVIDIA

FIXTURES = Path(__file__).parents[1] / "fixtures"
STATE = "nvidia.com/gpu-driver-upgrade-state"


def node(state: str | None, *, cordoned: bool) -> dict:  # type: ignore[type-arg]
    lab = {"nvidia.com/gpu.present": "true"} | ({STATE: state} if state else {})
    spec: dict = {"unschedulable": True} if cordoned else {}  # type: ignore[type-arg]
    return {"metadata": {"name": "n1", "labels": lab}, "spec": spec}


@pytest.mark.parametrize("state", ["upgrade-required", "upgrade-done", None])
def test_states_that_hold_nothing_off_are_no_verdict(state: str | None) -> None:
    assert upgrade_verdict(node(state, cordoned=False), has_gpus=True, driver=None) is None


def test_a_cordoned_node_mid_upgrade_is_the_driver_layer_with_its_state() -> None:
    v = upgrade_verdict(node("pod-restart-required", cordoned=True), has_gpus=True, driver=None)
    assert v is not None and v.code == "driver.upgrade-in-progress"
    assert "nvidia.com/gpu-driver-upgrade-state=pod-restart-required" in v.text


def test_an_uncordoned_node_in_an_upgrade_state_with_its_gpus_is_not_held() -> None:
    assert (
        upgrade_verdict(node("drain-required", cordoned=False), has_gpus=True, driver=None) is None
    )


def test_a_failed_upgrade_is_a_driver_failure_even_uncordoned() -> None:
    v = upgrade_verdict(node("upgrade-failed", cordoned=False), has_gpus=True, driver=None)
    assert v is not None and v.code == "driver.upgrade-failed" and not v.ok


def test_an_ordinary_cordon_stays_a_scheduling_cordon() -> None:
    r = triage(load_snapshot(FIXTURES / "cordoned.yaml"), namespace="team-vision",
               name=_pending(FIXTURES / "cordoned.yaml"))  # fmt: skip
    assert r.failing_layer == Layer.SCHEDULING
    assert "driver.upgrade-in-progress" not in [c for f in r.findings for c in f.codes]


def _pending(path: Path) -> str:
    from triage.cluster.snapshot import load_objects

    for o in load_objects(path):
        if o["kind"] == "Pod" and o["status"].get("phase") == "Pending":
            return str(o["metadata"]["name"])
    raise AssertionError(f"no pending pod in {path.name}")


@pytest.mark.parametrize(("text", "cause"), [
    ("failed to inject CDI devices: unresolvable CDI devices nvidia.com/gpu=all: unknown", "cdi"),
    ("CDI device injection failed: unresolvable CDI devices nvidia.com/gpu=GPU-1", "cdi"),
    ("nvidia-container-cli: initialization error: nvml error: driver/library version mismatch",
     "version-mismatch"),
    ("nvidia-container-cli: initialization error: nvml error: driver not loaded", "runtime-init"),
    ("load library failed: libnvidia-ml.so.1: cannot open shared object file", "runtime-init"),
    ("exec format error", None),
])  # fmt: skip
def test_each_runtime_cause_is_told_apart(text: str, cause: str | None) -> None:
    assert cause_of(NVIDIA, [text]) == cause


@pytest.mark.parametrize(("message", "says"), [
    ("Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. "
     "Requested: 2, Available: 1, which is unexpected", "had 1 healthy nvidia.com/gpu left where the pod asked 2"),
    ("Allocate failed due to cannot allocate unregistered device nvidia.com/gpu, which is "
     "unexpected", "no device plugin is registered for nvidia.com/gpu"),
    ("Allocate failed due to rpc error: code = Unknown desc = device busy, which is unexpected",
     "Allocate call failed"),
])  # fmt: skip
def test_kubelet_allocate_words(message: str, says: str) -> None:
    assert says in allocate_cause(message)[0]


def pod(*, pc: str | None = None, deadline: int | None = None, requests: bool = True) -> dict:  # type: ignore[type-arg]
    res = {"requests": {"nvidia.com/gpu": "1"}} if requests else {}
    spec: dict = {"containers": [{"name": "c", "resources": res}]}  # type: ignore[type-arg]
    if pc:
        spec["priorityClassName"] = pc
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    return {"spec": spec}


def quota(**spec: object) -> dict:  # type: ignore[type-arg]
    return {"spec": spec}


def test_quota_scopes_select_the_pods_they_count() -> None:
    prod = quota(scopeSelector={"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["gpu-prod"]}]})  # fmt: skip
    assert scope_matches(prod, pod(pc="gpu-prod")) == (True, "PriorityClass In [gpu-prod]")
    assert scope_matches(prod, pod(pc="gpu-batch"))[0] is False
    assert scope_matches(prod, pod())[0] is False
    assert scope_matches(quota(scopes=["Terminating"]), pod(deadline=600))[0] is True
    assert scope_matches(quota(scopes=["NotTerminating"]), pod(deadline=600))[0] is False
    assert scope_matches(quota(scopes=["BestEffort"]), pod())[0] is False
    assert scope_matches(quota(scopes=["BestEffort"]), pod(requests=False))[0] is True
    assert scope_matches(quota(hard={}), pod()) == (True, "")


def test_the_upgrade_selector_reads_the_string_form() -> None:
    assert selector_matches("app=train,tier!=web", {"app": "train"}) is True
    assert selector_matches("app=train", {"app": "serve"}) is False
    assert selector_matches("job-name", {"job-name": "x"}) is True
    assert selector_matches("!canary", {"canary": "1"}) is False
    assert selector_matches("env in (a,b)", {"env": "a"}) is None
