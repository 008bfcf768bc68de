"""The fleet view: every stuck workload grouped by its root cause, largest GPU wait first,
and what a tenant sees of it."""

from __future__ import annotations

import gc
import importlib
import threading
from pathlib import Path

import pytest

from triage import load_snapshot, triage
from triage.cluster.source import ForbiddenError
from triage.engine import verdict
from triage.fleet import Sweep, SweepSource, stuck_workloads, sweep
from triage.model import Layer, PodRef, TriageVerdict, shared_fields

FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.fixture(scope="module")
def fleet() -> Sweep:
    return sweep(load_snapshot(FIXTURES / "fleet-many-causes.yaml"))


def names(group: object) -> set[str]:
    return {f"{m.namespace}/{m.name}" for m in group.members}  # type: ignore[attr-defined]


def test_workloads_with_one_cause_form_one_group_across_tenants(fleet: Sweep) -> None:
    by_cause = {(g.layer, g.code): g for g in fleet.groups}
    driver = by_cause[(Layer.DRIVER, "driver.pod-failing")]
    tenants = {m for m in names(driver) if not m.startswith("gpu-operator/")}
    assert tenants == {
        "team-vision/resnet-train", "research/fold-a100", "team-vision/vit-sweep",
        "research/md-sim", "team-vision/notebook-ana",
    }  # fmt: skip
    # the operator's own pods wait for the same driver: listed once per DaemonSet, no GPUs
    operands = [m for m in driver.members if m.namespace == "gpu-operator"]
    assert {m.kind for m in operands} == {"DaemonSet"} and len(operands) == 6
    assert {m.name for m in operands} >= {"nvidia-driver-daemonset", "nvidia-operator-validator"}
    assert sum(m.gpus for m in operands) == 0
    assert driver.blocking == [
        "pool gpu-triage.io/node-pool=a100", "node gpu-a100-01", "node gpu-a100-02"
    ]  # fmt: skip
    assert driver.gpus == 2 + 4 + 2 * 1 + 2 + 1
    assert driver.owner is not None and driver.owner.team == "gpu-infrastructure"
    full = by_cause[(Layer.SCHEDULING, "scheduling.insufficient")]
    assert names(full) == {"team-nlp/llm-sft-a", "team-nlp/llm-sft-b", "research/h100-probe"}
    assert full.blocking == ["pool gpu-triage.io/node-pool=h100"]
    # Tenants of two teams share the cause: it goes to the layer's owner, not one tenant's.
    assert full.owner is not None and full.owner.team == "workload-owner"
    kueue = by_cause[(Layer.QUOTA, "quota.kueue-pending")]
    assert names(kueue) == {"team-vision/sweep-42", "research/sweep-43"}
    assert kueue.blocking == ["ClusterQueue vision-cq"]
    rq = by_cause[(Layer.QUOTA, "quota.resourcequota-exceeded")]
    assert names(rq) == {"team-nlp/pretrain-13b", "team-nlp/pretrain-7b"}
    assert rq.blocking == ["ResourceQuota team-nlp/gpu-quota"]
    label = by_cause[(Layer.SCHEDULING, "scheduling.selector-mismatch")]
    assert label.blocking == ["label nvidia.com/gpu.product=NVIDIA-H200-141GB"]
    assert len(fleet.groups) == 6  # and the CPU-only pod's


def test_groups_sort_by_gpus_waiting_and_name_no_workload_in_the_cause(fleet: Sweep) -> None:
    gpus = [g.gpus for g in fleet.groups]
    assert gpus == sorted(gpus, reverse=True)
    assert fleet.groups[0].layer == Layer.DRIVER
    every_name = {m.name for g in fleet.groups for m in g.members}
    for g in fleet.groups:
        assert not any(n in g.cause for n in every_name), g.cause
    assert fleet.workloads == 20 and fleet.gpus == sum(gpus)


def test_running_workloads_are_not_stuck_and_a_blocked_cpu_pod_is(fleet: Sweep) -> None:
    listed = {m.name for g in fleet.groups for m in g.members} | {m.name for m in fleet.waiting}
    assert "protein-fold" not in listed
    # why-pending calls the CPU-only pod blocked (200 cpu on 32-cpu nodes): so does the sweep
    cpu = next(g for g in fleet.groups if names(g) == {"research/etl-cpu"})
    assert cpu.code == "scheduling.request-too-large" and cpu.gpus == 0
    assert fleet.groups[-1] is cpu  # no GPU waits on it: it sorts last
    assert not fleet.errors


def test_oldest_wait_is_the_oldest_member(fleet: Sweep) -> None:
    for g in fleet.groups:
        assert g.oldest == min(m.since for m in g.members if m.since)


def test_a_tenant_sees_only_their_members_and_counts_but_the_platform_cause(fleet: Sweep) -> None:
    mine = fleet.only(lambda ns: ns == "research")
    driver = next(g for g in mine.groups if g.layer == Layer.DRIVER)
    assert names(driver) == {"research/fold-a100", "research/md-sim"}
    assert driver.workloads == 2 and driver.gpus == 6
    assert "gpu-a100-01" in driver.cause  # a platform object: the cause stays whole
    assert all(m.namespace == "research" for g in mine.groups for m in g.members)
    assert not any(g.code == "quota.resourcequota-exceeded" for g in mine.groups)
    assert "team-vision" not in mine.model_dump_json() and "team-nlp" not in mine.model_dump_json()


def test_a_namespace_scope_reads_only_that_namespace() -> None:
    source = load_snapshot(FIXTURES / "fleet-many-causes.yaml")
    found = stuck_workloads(source, ["team-nlp"])
    assert {s.name for s in found} == {"llm-sft-a", "llm-sft-b", "pretrain-13b", "pretrain-7b"}
    podless = next(s for s in found if s.name == "pretrain-13b")
    assert (podless.kind, podless.pods, podless.gpus) == ("Job", 1, 4)


def test_group_keys_are_stable_across_sweeps_and_differ_by_cause(fleet: Sweep) -> None:
    again = sweep(load_snapshot(FIXTURES / "fleet-many-causes.yaml"))
    assert [g.key for g in again.groups] == [g.key for g in fleet.groups]
    assert len({g.key for g in fleet.groups}) == len(fleet.groups)


class Counting:
    def __init__(self, inner: object) -> None:
        self.inner, self.event_lists, self.events_for_calls = inner, 0, 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def objects(self, kind: str, *, namespace: str | None = None) -> list[dict]:
        if kind == "Event":
            self.event_lists += 1
        return self.inner.objects(kind, namespace=namespace)  # type: ignore[attr-defined]

    def events_for(self, **kw: str) -> list[dict]:
        self.events_for_calls += 1
        return self.inner.events_for(**kw)  # type: ignore[attr-defined]


def test_a_sweep_lists_events_once_for_all_its_triages() -> None:
    source = Counting(load_snapshot(FIXTURES / "fleet-many-causes.yaml"))
    result = sweep(source)  # type: ignore[arg-type]
    assert result.workloads == 20
    assert source.event_lists == 1 and source.events_for_calls == 0
    # and the events still reach the reports: FailedCreate is the evidence of a rejected Job
    rq = next(g for g in result.groups if g.code == "quota.resourcequota-exceeded")
    assert rq.blocking == ["ResourceQuota team-nlp/gpu-quota"]
    assert isinstance(SweepSource(source).cluster_name, str)  # type: ignore[arg-type]


def test_a_sweep_reads_the_events_while_it_still_looks_for_stuck_workloads() -> None:
    """Once a sweep has found a stuck pod, its events list (a request per 500 events, the
    first triage's wait) is read on a thread of its own while the search goes on: here the
    search for Jobs without pods waits until the list has started. A list that fails is
    said as before."""
    started = threading.Event()
    waited: list[bool] = []

    class Searching(Counting):
        def objects(self, kind: str, *, namespace: str | None = None) -> list[dict]:
            if kind == "Event":
                started.set()
            return super().objects(kind, namespace=namespace)

        def unmatched(self, *args: str) -> object:
            waited.append(started.wait(10))  # the search's last step, after the pods
            return self.inner.unmatched(*args)  # type: ignore[attr-defined]

    source = Searching(load_snapshot(FIXTURES / "fleet-many-causes.yaml"))
    result = sweep(source)  # type: ignore[arg-type]
    assert waited and all(waited) and source.event_lists == 1
    assert [g.key for g in result.groups] == [g.key for g in sweep(source.inner).groups]  # type: ignore[arg-type]
    rq = next(g for g in result.groups if g.code == "quota.resourcequota-exceeded")
    assert rq.blocking == ["ResourceQuota team-nlp/gpu-quota"]  # a FailedCreate event's

    class Refused(Counting):
        def objects(self, kind: str, *, namespace: str | None = None) -> list[dict]:
            if kind == "Event":
                raise ForbiddenError(verb="list", resource="events", namespace=namespace)
            return super().objects(kind, namespace=namespace)

    refused = sweep(Refused(load_snapshot(FIXTURES / "fleet-many-causes.yaml")))  # type: ignore[arg-type]
    assert refused.workloads == 20
    assert [line for line in refused.unread if "events" in line] == [
        "cannot list events at cluster scope: grant list on events: events are not used as "
        "evidence",
        "cannot list events at cluster scope: grant list on events for 26 workload(s)",
    ]


def test_a_sweep_pauses_the_cyclic_gc_and_gives_it_back_even_when_it_fails() -> None:
    """A sweep's thousands of triages run with the collector off (each full collection would
    walk the whole cache); a bot whose collector stayed off after one would grow without
    bound."""
    seen: list[bool] = []

    class Watching(Counting):
        def objects(self, kind: str, *, namespace: str | None = None) -> list[dict]:
            seen.append(gc.isenabled())
            return super().objects(kind, namespace=namespace)

    assert gc.isenabled()
    sweep(Watching(load_snapshot(FIXTURES / "fleet-many-causes.yaml")))  # type: ignore[arg-type]
    assert seen and not any(seen) and gc.isenabled()

    class Failing(Counting):
        def objects(self, kind: str, *, namespace: str | None = None) -> list[dict]:
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        sweep(Failing(load_snapshot(FIXTURES / "fleet-many-causes.yaml")))  # type: ignore[arg-type]
    assert gc.isenabled()


def test_a_sweep_without_a_memo_holds_the_verdicts_of_its_groups_firsts_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A full sweep that held every verdict until it grouped them held 18 MB of them at
    20,000 nodes (11,308 workloads); it keeps, of each group, its first verdict, and of the
    others only what the group says of them all (the same groups as before)."""
    # the package's `sweep` is its function, not this module
    fleet_sweep = importlib.import_module("triage.fleet.sweep")
    alive: list[int] = []
    key_of = fleet_sweep._cause_key

    def counting(verdict: TriageVerdict, *args: object) -> str:
        alive.append(sum(isinstance(o, TriageVerdict) for o in gc.get_objects()))
        return str(key_of(verdict, *args))

    monkeypatch.setattr(fleet_sweep, "_cause_key", counting)
    result = sweep(load_snapshot(FIXTURES / "fleet-many-causes.yaml"))
    grouped = sum(len(g.members) for g in result.groups)
    assert len(alive) >= grouped > len(result.groups) + 1
    # the groups' first verdicts, the one being grouped (a workload may count twice)
    assert max(alive) <= len(result.groups) + 1


def test_the_demo_cluster_groups_every_stuck_workload() -> None:
    demo = sweep(load_snapshot(Path(__file__).parents[2] / "gpu_triage/demo/cluster.yaml"))
    assert not demo.errors
    tenants = [m for g in demo.groups for m in g.members if m.namespace != "gpu-operator"]
    assert len(tenants) == 7 and {g.layer for g in demo.groups} == set(Layer)
    # the operator's own pods on the broken nodes are listed under their DaemonSets, at the
    # layer that stops them: the crashing driver, the node whose plugin advertises nothing
    operands = {(g.code, m.name) for g in demo.groups for m in g.members} - {
        (g.code, m.name) for g in demo.groups for m in tenants if m in g.members
    }
    assert ("driver.pod-failing", "nvidia-operator-validator") in operands
    assert ("device-plugin.no-gpu-resource", "nvidia-device-plugin-daemonset") in operands


@pytest.mark.parametrize(
    "path",
    sorted(p for p in FIXTURES.glob("*.y*ml") if p.name != "expected.yaml"),
    ids=lambda p: p.stem,
)
def test_the_verdict_a_sweep_takes_is_the_full_reports_verdict(path: Path) -> None:
    """The sweep asks the engine for verdicts only (no evidence, steps or other layers):
    for every workload of every fixture, they are exactly the full report's."""
    src = load_snapshot(path)
    for kind in ("Pod", "Job", "Deployment", "StatefulSet", "ReplicaSet"):
        for obj in src.objects(kind):
            ns, name = obj["metadata"].get("namespace", "default"), obj["metadata"]["name"]
            report = triage(src, namespace=ns, name=name)
            assert verdict(src, namespace=ns, name=name) == TriageVerdict(
                cluster=report.cluster,
                pod=report.pod,
                failing_layer=report.failing_layer,
                headline=report.headline,
                cause=report.cause,
                owner=report.owner,
                answer=report.answer,
                unknown_layers=report.unknown_layers,
                unread=report.unread,
            )


def test_workloads_blocked_alike_share_one_cause_and_owner() -> None:
    """A sweep (and the bot's memo of its answers) holds thousands of verdicts: those blocked
    by one cause hold one cause and one owner route, not a copy each."""
    src = SweepSource(load_snapshot(FIXTURES / "fleet-many-causes.yaml"))
    found = [
        verdict(src, namespace=i.namespace, name=i.key[1], sweep=src.state)
        for i in stuck_workloads(src)
    ]
    by_cause: dict[tuple[object, ...], list[TriageVerdict]] = {}
    for v in found:
        if (c := v.cause) is not None:
            key = (c.layer, c.code, tuple(c.objects), c.vendor, tuple(c.nodes))
            by_cause.setdefault(key, []).append(v)
    alike = [vs for vs in by_cause.values() if len(vs) > 1]
    assert alike
    for vs in alike:
        assert len({id(v.cause) for v in vs}) == 1
        assert len({id(v.owner) for v in vs if v.owner == vs[0].owner}) == 1


def test_verdicts_and_members_share_the_names_of_their_given_fields(fleet: Sweep) -> None:
    """Pydantic keeps a set of the given fields' names per model (728 bytes from five
    names): the thousands of verdicts and members of a sweep share one per distinct set, and
    a copy that changes a field changes its own set only."""
    src = SweepSource(load_snapshot(FIXTURES / "fleet-many-causes.yaml"))
    found = [
        verdict(src, namespace=i.namespace, name=i.key[1], sweep=src.state)
        for i in stuck_workloads(src)
    ]
    assert len(found) > 1
    for part in (lambda v: v, lambda v: v.pod, lambda v: v.pod.workload):
        assert len({id(part(v).__pydantic_fields_set__) for v in found}) == 1
    members = [m for g in fleet.groups for m in g.members]
    assert len(members) > 1 and len({id(m.__pydantic_fields_set__) for m in members}) == 1

    a, b = (shared_fields(PodRef(namespace="team-a", name=n)) for n in ("p1", "p2"))
    assert a.__pydantic_fields_set__ is b.__pydantic_fields_set__
    changed = a.model_copy(update={"node": "a1"})
    assert changed.model_fields_set == {"namespace", "name", "node"}
    assert b.model_fields_set == {"namespace", "name"}
    assert b.model_dump(exclude_unset=True) == {"namespace": "team-a", "name": "p2"}
    assert a == PodRef(namespace="team-a", name="p1")
