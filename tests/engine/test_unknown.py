"""A read that failed is said, never judged: the layers that needed it are unknown, the failing
layer is never named past an unknown layer below it, and no finding rests on a list that could
not be read ("RuntimeClass missing", "claim does not exist", "PVC does not exist")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.builders import cluster, event, node, operator_pods, pod
from triage import ForbiddenError, MemorySource, load_snapshot, triage
from triage.cluster.objects import name_of, ns_of
from triage.cluster.source import SourceError, UnavailableError
from triage.engine import verdict
from triage.fleet import sweep
from triage.model import Answer, Layer, Status, TriageReport, TriageVerdict

Obj = dict[str, Any]


class Refusing(MemorySource):
    """A cluster whose API refuses (403) or fails (503) to serve some kinds."""

    def __init__(
        self, src: MemorySource, *, forbidden: frozenset[str] | set[str] = frozenset(),
        down: frozenset[str] | set[str] = frozenset(),
    ) -> None:  # fmt: skip
        kinds = ("Node", "Pod", "Namespace", "Event", "DaemonSet", "ResourceClaim",
                 "DeviceClass", "ResourceSlice", "PersistentVolumeClaim", "RuntimeClass",
                 "ResourceQuota", "Job")  # fmt: skip
        super().__init__([o for k in kinds for o in src.objects(k)], cluster_name="mini")
        self.forbidden, self.down = forbidden, down

    def _fail(self, kind: str, verb: str, namespace: str | None) -> None:
        if kind in self.forbidden:
            raise ForbiddenError(verb=verb, resource=kind.lower() + "s", namespace=namespace)
        if kind in self.down:
            raise UnavailableError(f"the API answered 503 to {verb} {kind}", verb=verb,
                                   resource=kind.lower() + "s", namespace=namespace)  # fmt: skip

    def objects(self, kind: str, *, namespace: str | None = None) -> list[Obj]:
        self._fail(kind, "list", namespace)
        return super().objects(kind, namespace=namespace)

    def get(self, kind: str, name: str, *, namespace: str | None = None) -> Obj | None:
        if kind != "Pod":  # the pod itself is readable: the triage can start
            self._fail(kind, "get", namespace)
        return super().get(kind, name, namespace=namespace)

    def events_for(self, *, namespace: str, kind: str, name: str) -> list[Obj]:
        self._fail("Event", "list", namespace)
        return super().events_for(namespace=namespace, kind=kind, name=name)

    def node_usage(self) -> Any:
        self._fail("Pod", "list", None)
        return super().node_usage()


def run(src: MemorySource, name: str = "train") -> TriageReport:
    return triage(src, namespace="team-a", name=name)


def test_nodes_that_cannot_be_read_are_no_gpu_nodes_at_all() -> None:
    src = Refusing(cluster(node("a1"), operator_pods("a1"), pod("train")), forbidden={"Node"})
    r = run(src)
    assert r.answer == Answer.UNKNOWN and r.failing_layer is None
    assert r.unknown_layers == [Layer.DRIVER, Layer.DEVICE_PLUGIN, Layer.SCHEDULING]
    assert "no-gpu-nodes" not in str(r.model_dump())
    assert r.headline.startswith("unknown: driver, device-plugin, scheduling could not be judged")
    assert r.fingerprint != run(cluster(node("a1"), operator_pods("a1"), pod("train"))).fingerprint


def test_a_blocking_layer_above_an_unknown_one_is_known_but_not_the_answer() -> None:
    gated = pod("train", extra_spec={"schedulingGates": [{"name": "example.com/wait"}]})
    src = Refusing(cluster(node("a1"), operator_pods("a1"), gated), down={"DaemonSet"})
    r = run(src)
    # The stack view could not be read: every node's driver is unknown, below the gate.
    assert r.answer == Answer.UNKNOWN and r.failing_layer is None
    assert r.finding(Layer.SCHEDULING).status == Status.FAIL
    assert "above it, scheduling:" in r.headline


def test_a_blocking_layer_below_the_unknown_one_is_the_answer() -> None:
    src = Refusing(cluster(node("a1", allocatable=0), operator_pods("a1"), pod("train")),
                   forbidden={"ResourceQuota"})  # fmt: skip
    r = run(src)
    assert r.answer == Answer.BLOCKED and r.failing_layer is not None
    assert r.failing_layer.rank < Layer.QUOTA.rank
    assert r.unknown_layers == [Layer.QUOTA]
    [unread] = r.unread
    assert unread.grant == "list on resourcequotas in team-a" and unread.layers == [Layer.QUOTA]


def test_a_verdict_alone_reads_the_quotas_a_report_reads() -> None:
    """The verdict a sweep takes leaves out the quota layer's side findings on a pod that
    exists, not the read of its quotas: quotas that cannot be read leave the answer unknown
    as they leave the report's."""
    src = Refusing(cluster(node("a1"), operator_pods("a1"), pod("train")),
                   forbidden={"ResourceQuota"})  # fmt: skip
    r, v = run(src), verdict(src, namespace="team-a", name="train")
    assert r.answer == v.answer == Answer.UNKNOWN
    assert r.unknown_layers == v.unknown_layers == [Layer.QUOTA]
    assert v.unread == r.unread and v.unread[0].grant == "list on resourcequotas in team-a"


def test_a_report_counts_the_stack_view_it_read_after_the_checks() -> None:
    """A pod bound to a node that is gone: no check reads the stack view, the report does (to
    describe the GPU stack); when it cannot be read, the node's driver and device plugin are
    unknown, and so is the answer, never "clear" beside unknown layers; a sweep's verdict
    says the same."""
    stuck = pod("train", node_name="gone", phase="Pending",
                status={"containerStatuses": [{"name": "main", "ready": False,
                        "state": {"waiting": {"reason": "ContainerCreating"}}}]})  # fmt: skip
    src = Refusing(cluster(node("a1"), operator_pods("a1"), stuck), down={"DaemonSet"})
    r, v = run(src), verdict(src, namespace="team-a", name="train")
    assert r.unknown_layers == v.unknown_layers == [Layer.DRIVER, Layer.DEVICE_PLUGIN]
    assert r.answer == v.answer == Answer.UNKNOWN
    assert r.headline == v.headline and r.headline.startswith("unknown: driver, device-plugin")


def test_a_running_pod_is_clear_whatever_could_not_be_read() -> None:
    running = pod("train", node_name="a1", phase="Running")
    src = Refusing(cluster(node("a1"), operator_pods("a1"), running), forbidden={"ResourceQuota"})
    r = run(src)
    assert r.answer == Answer.CLEAR and r.finding(Layer.QUOTA).status == Status.UNKNOWN


def test_runtime_classes_that_cannot_be_read_are_not_missing() -> None:
    stuck = pod("train", node_name="a1", extra_spec={"runtimeClassName": "nvidia"},
                status={"containerStatuses": [{"name": "main", "ready": False,
                        "state": {"waiting": {"reason": "ContainerCreating"}}}]})  # fmt: skip
    src = Refusing(cluster(node("a1"), operator_pods("a1"), stuck), forbidden={"RuntimeClass"})
    r = run(src)
    assert "driver.runtimeclass-missing" not in r.finding(Layer.DRIVER).codes
    assert r.answer == Answer.UNKNOWN and Layer.DRIVER in r.unknown_layers


def test_claims_that_cannot_be_read_do_not_exist_only_in_a_guess() -> None:
    p = pod("train", gpus=0, selector={})
    p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "my-gpu"}]
    src = Refusing(cluster(node("a1"), operator_pods("a1"), p), forbidden={"ResourceClaim"})
    r = run(src)
    assert "scheduling.dra-claim-missing" not in r.finding(Layer.SCHEDULING).codes
    assert r.answer == Answer.UNKNOWN


def test_a_volume_claim_that_cannot_be_read_is_not_missing() -> None:
    p = pod("train", extra_spec={
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "cache"}}]})  # fmt: skip
    src = Refusing(cluster(node("a1"), operator_pods("a1"), p), down={"PersistentVolumeClaim"})
    r = run(src)
    assert "scheduling.pvc-missing" not in r.finding(Layer.SCHEDULING).codes
    assert r.answer == Answer.UNKNOWN and Layer.SCHEDULING in r.unknown_layers


def test_events_that_cannot_be_read_are_a_note_and_the_objects_decide() -> None:
    full = node("a1", allocatable=0)  # the plugin advertises no GPU: no events needed
    said = event(kind="Pod", name="train", reason="FailedScheduling", message="0/1 nodes")
    plain = run(cluster(full, operator_pods("a1"), pod("train"), said))
    src = Refusing(cluster(full, operator_pods("a1"), pod("train"), said), down={"Event"})
    r = run(src)
    assert r.failing_layer == plain.failing_layer and r.answer == Answer.BLOCKED
    assert any(n.startswith("events not read") for n in r.notes)
    assert [u.resource for u in r.unread] == ["events"]


def test_a_sweep_keeps_unknown_workloads_apart_and_is_not_complete() -> None:
    src = Refusing(cluster(node("a1"), operator_pods("a1"), pod("train")), forbidden={"Node"})
    result = sweep(src)
    assert result.groups == [] and result.waiting == []
    assert [m.name for m in result.unknown] == ["train"]
    assert result.partial and not result.complete
    assert any("cannot list nodes" in line for line in result.unread)


def test_a_sweep_that_cannot_read_jobs_says_what_it_may_miss() -> None:
    src = Refusing(cluster(node("a1"), operator_pods("a1"), pod("train")), forbidden={"Job"})
    result = sweep(src)
    assert result.listing_failed and result.partial
    assert any("Jobs whose pods were never created" in line for line in result.unread)


class Failing:
    """Any source, with one kind it cannot read (403 or 503): every read of that kind fails,
    and it is not indexed."""

    def __init__(self, src: Any, kind: str, *, forbidden: bool) -> None:
        self._src, self._kind, self._forbidden = src, kind, forbidden

    def __getattr__(self, name: str) -> Any:
        return getattr(self._src, name)

    def _fail(self, kind: str, verb: str, namespace: str | None) -> None:
        if kind != self._kind:
            return
        resource = kind.lower() + "s"
        if self._forbidden:
            raise ForbiddenError(verb=verb, resource=resource, namespace=namespace)
        raise UnavailableError(f"the API answered 503 to {verb} {kind}", verb=verb,
                               resource=resource, namespace=namespace)  # fmt: skip

    def objects(self, kind: str, *, namespace: str | None = None) -> list[Obj]:
        self._fail(kind, "list", namespace)
        return self._src.objects(kind, namespace=namespace)  # type: ignore[no-any-return]

    def get(self, kind: str, name: str, *, namespace: str | None = None) -> Obj | None:
        self._fail(kind, "get", namespace)
        return self._src.get(kind, name, namespace=namespace)  # type: ignore[no-any-return]

    def events_for(self, *, namespace: str, kind: str, name: str) -> list[Obj]:
        self._fail("Event", "list", namespace)
        return self._src.events_for(namespace=namespace, kind=kind, name=name)  # type: ignore[no-any-return]

    def node_usage(self) -> Any:
        self._fail("Pod", "list", None)
        return self._src.node_usage()

    def indexed(self, kind: str, index: str, key: Any) -> list[Obj] | None:
        return None if kind == self._kind else self._src.indexed(kind, index, key)  # type: ignore[no-any-return]

    def filed(self, kind: str, index: str, keys: Any) -> list[bool] | None:
        return None if kind == self._kind else self._src.filed(kind, index, keys)  # type: ignore[no-any-return]

    def unmatched(self, kind: str, index: str, other_kind: str, other_index: str) -> Any:
        if self._kind in (kind, other_kind):
            return None
        return self._src.unmatched(kind, index, other_kind, other_index)


FIXTURES = Path(__file__).parents[1] / "fixtures"
FAULTS = [("Node", True), ("DaemonSet", False), ("ResourceQuota", True), ("Event", False),
          ("Namespace", True), ("Job", True), ("ClusterPolicy", False)]  # fmt: skip


def _answer_of(run: Any, src: Any, ns: str, name: str) -> Any:
    """What a triage answers (its verdict's fields), or the error it raises, by type and text."""
    try:
        found = run(src, namespace=ns, name=name)
    except SourceError as e:
        return type(e).__name__, str(e)
    return found.model_dump(include=set(TriageVerdict.model_fields))


@pytest.mark.parametrize(
    "path",
    sorted(p for p in FIXTURES.glob("*.y*ml") if p.name != "expected.yaml"),
    ids=lambda p: p.stem,
)
def test_a_sweeps_verdict_is_the_reports_whatever_cannot_be_read(path: Path) -> None:
    """With any one kind unreadable (refused or failing), the verdict a sweep takes of each
    workload is still exactly the full report's: the same answer, failing layer, unknown
    layers and failed reads, or the same error."""
    loaded = load_snapshot(path)
    names = [(ns_of(o) or "default", name_of(o)) for k in ("Pod", "Job", "Deployment")
             for o in loaded.objects(k)]  # fmt: skip
    for kind, forbidden in FAULTS:
        alone = Failing(load_snapshot(path), kind, forbidden=forbidden)
        report = Failing(load_snapshot(path), kind, forbidden=forbidden)
        for ns, name in names:
            assert _answer_of(verdict, alone, ns, name) == _answer_of(triage, report, ns, name), (
                f"{kind} {'refused' if forbidden else 'failing'}: {ns}/{name}"
            )
