"""The warm-up a bot runs once its cache has synced (`triage.prepare`): it judges every node
and evaluates the nodes once per shape of the pods waiting for one, and never changes an
answer."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from datetime import UTC, datetime

import pytest

from tests.builders import cluster, node, operator_pods, pod
from triage import ForbiddenError, MemorySource, Prepared, prepare, triage
from triage.cluster.objects import Obj
from triage.layers.scheduling import by_class

NOW = datetime(2026, 12, 2, 14, 0, tzinfo=UTC)


def _objects() -> list[Obj]:
    nodes = [node(f"n{i}") for i in range(4)]
    operands = [
        p for i in range(4) for p in operator_pods(f"n{i}", driver="crash" if i == 3 else "ok")
    ]
    waiting = [
        pod("train-a", gpus=8),
        pod("train-b", gpus=8),  # the same shape as train-a
        pod("infer", gpus=2, selector={}),  # another shape
        pod(  # a host port: the port filter applies, it is evaluated per triage
            "exporter",
            gpus=1,
            extra_spec={"containers": [{"name": "x", "ports": [{"hostPort": 9400}]}]},
        ),
        pod("claims", gpus=0, extra_spec={"resourceClaims": [{"name": "gpu"}]}),
        pod("bound", gpus=1, node_name="n1"),  # bound: waits for its node, not for one
    ]
    running = [pod(f"run-{i}", gpus=8, node_name=f"n{i}", phase="Running") for i in range(3)]
    return [*nodes, *operands, *waiting, *running]


WAITING = ("train-a", "train-b", "infer", "exporter", "claims", "bound")


def _reports(source: MemorySource) -> list[str]:
    return [
        triage(source, namespace="team-a", name=name, now=NOW).model_dump_json(
            exclude={"generated_at"}
        )
        for name in WAITING
    ]


def test_the_warm_up_evaluates_each_waiting_shape_once_and_changes_no_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cold = _reports(cluster(_objects()))
    grouped: list[tuple[str, ...]] = []
    groups = by_class.node_groups
    monkeypatch.setattr(
        by_class,
        "node_groups",
        lambda nodes, healths, keys: grouped.append(keys) or groups(nodes, healths, keys),  # type: ignore[func-returns-value]
    )
    warm = cluster(_objects())
    done = prepare(warm)
    # train-a and train-b are one shape, infer another; the exporter's host port and the
    # claims pod are judged per triage; the bound pod waits for its own node
    assert done == Prepared(nodes=4, shapes=2)
    made = len(grouped)
    assert made == 2  # the two shapes' selectors differ: one node classing each
    assert _reports(warm) == cold
    assert len(grouped) == made  # no waiting pod of those shapes classed the nodes again


class _Forbidden(MemorySource):
    def __init__(self, objs: list[Obj], kind: str) -> None:
        super().__init__(objs, cluster_name="mini")
        self.kind = kind

    def objects(self, kind: str, *, namespace: str | None = None) -> list[Obj]:
        if kind == self.kind:
            raise ForbiddenError(verb="list", resource=kind.lower() + "s", namespace=namespace)
        return super().objects(kind, namespace=namespace)

    def indexed(self, kind: str, index: str, key: Hashable) -> list[Obj] | None:  # type: ignore[override]
        return None if kind == self.kind else super().indexed(kind, index, key)

    def filed(self, kind: str, index: str, keys: Sequence[Hashable]) -> list[bool] | None:  # type: ignore[override]
        return None if kind == self.kind else super().filed(kind, index, keys)

    def unmatched(  # type: ignore[override]
        self, kind: str, index: str, other_kind: str, other_index: str
    ) -> list[Obj] | None:
        if self.kind in (kind, other_kind):
            return None
        return super().unmatched(kind, index, other_kind, other_index)


def test_what_the_warm_up_cannot_read_it_leaves_for_the_first_triage_to_say() -> None:
    objs = [*_objects(), *cluster().objects("Namespace")]
    assert prepare(_Forbidden(objs, "Node")) == Prepared(nodes=0, shapes=0)
    # the waiting pods cannot be listed: every node is judged, no shape evaluated
    assert prepare(_Forbidden(objs, "Pod")) == Prepared(nodes=4, shapes=0)
