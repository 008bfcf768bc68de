"""What every quota check receives (`QuotaInput`) and the helpers they share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from triage.cluster.events import Event
from triage.cluster.objects import Obj, condition, meta
from triage.cluster.source import ReadFailedError
from triage.model import Layer
from triage.signals import Signal, Unknown

Reader = Callable[[str, str | None], list[Obj]]


@dataclass
class QuotaInput:
    namespace: str
    pod: Obj | None  # the pod examined (None when the workload created none)
    template: Obj | None  # a pod-shaped object for a workload's pods yet to be created
    workloads: list[Obj]  # the owner chain, outermost first (Deployment, ReplicaSet) or [Job]
    workload_events: list[Event]
    read: Reader  # read(kind, namespace) raising ReadFailedError
    # False: findings that never block are left out (a verdict alone needs none of them)
    sides: bool = True
    signals: list[Signal] = field(default_factory=list)
    unknowns: list[Unknown] = field(default_factory=list)

    def could_not(self, e: ReadFailedError) -> None:
        """A read failed: the quota layer is unknown."""
        self.unknowns.append(Unknown(Layer.QUOTA, str(e), e))


def find_owned(objs: list[Obj], owners: list[tuple[str, str]]) -> Obj | None:
    for obj in objs:
        for ref in meta(obj).get("ownerReferences") or []:
            if (ref.get("kind"), ref.get("name")) in owners:
                return obj
    return None


def condition_false(obj: Obj, ctype: str) -> bool:
    c = condition(obj, ctype)
    return c is not None and c.get("status") == "False"
