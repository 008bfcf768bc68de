"""The layer interface: what a layer check receives and what it returns.

A layer check is a function `check(ctx: Context) -> Outcome`. The engine runs the checks in
layer order (`triage.engine.CHECKS`) and then applies the root-cause rule across their
outcomes; a check never decides the verdict on its own.

`Context` is everything a check may use: the resolved target, the clock, the engine config,
and reads of the cluster that turn a missing permission into an `Unknown` for the layer that
needed it (so a forbidden kind makes a layer "unknown", never a crash). It also carries the
two views every layer shares: the cluster's GPU stacks and the health of each node.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from triage.cluster.events import Event, sorted_events
from triage.cluster.memo import IdentityMemo
from triage.cluster.objects import Obj, labels, name_of
from triage.cluster.source import ClusterSource, ForbiddenError
from triage.config import EngineConfig
from triage.layers.health import NodeHealths
from triage.layers.stacks.view import StackView, load_view
from triage.model import Layer
from triage.signals import Signal, Unknown
from triage.target import Target


@dataclass
class Outcome:
    """What one layer check found."""

    signals: list[Signal] = field(default_factory=list)
    # The report's headline when nothing blocks (a finished pod, a pod waiting for a node).
    headline: str | None = None
    # The line a passing layer shows instead of its default "ok" text.
    ok: dict[Layer, str] = field(default_factory=dict)


class Context:
    """One triage's access to the cluster, shared by every layer check."""

    def __init__(
        self, *, source: ClusterSource, config: EngineConfig, target: Target, now: datetime
    ) -> None:
        self.source, self.config, self.target, self.now = source, config, target, now
        memo = getattr(source, "memo", None)
        self.memo: IdentityMemo = memo if isinstance(memo, IdentityMemo) else IdentityMemo()
        self.unknowns: list[Unknown] = []
        self.notes: list[str] = []
        self.healths = NodeHealths(self.memo, now=now, grace_minutes=config.node_join_grace_minutes)
        # Work shared by the triages of one fleet sweep, which see one state of the cluster
        # (`triage.fleet.SweepSource`); None for a triage of its own.
        self.shared: dict[Hashable, Any] | None = getattr(source, "sweep_memo", None)

    # --- reads that never raise for a missing permission ------------------------------------

    def read(self, kind: str, namespace: str | None, *, layer: Layer) -> list[Obj]:
        try:
            return self.source.objects(kind, namespace=namespace)
        except ForbiddenError as e:
            self.unknown(layer, str(e))
            return []

    def get(self, kind: str, name: str, namespace: str | None, *, layer: Layer) -> Obj | None:
        try:
            return self.source.get(kind, name, namespace=namespace)
        except ForbiddenError as e:
            self.unknown(layer, str(e))
            return None

    def reader(self, layer: Layer) -> Callable[[str, str | None], list[Obj]]:
        """`read` bound to a layer, for checks that take a plain reader."""
        return lambda kind, namespace: self.read(kind, namespace, layer=layer)

    def getter(self, layer: Layer) -> Callable[[str, str, str | None], Obj | None]:
        """`get` bound to a layer."""
        return lambda kind, name, namespace: self.get(kind, name, namespace, layer=layer)

    def events(self, kind: str, name: str) -> list[Event]:
        """Events about an object in the target's namespace, newest first."""
        try:
            raw = self.source.events_for(namespace=self.target.namespace, kind=kind, name=name)
        except ForbiddenError as e:
            self.note(f"events not read ({e})")
            return []
        return sorted_events(raw)

    def unknown(self, layer: Layer, reason: str) -> None:
        if all(u.reason != reason for u in self.unknowns):
            self.unknowns.append(Unknown(layer, reason))

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def node_labels(self, node: str) -> dict[str, str]:
        try:
            obj = self.source.get("Node", node)
        except ForbiddenError:
            return {}
        return labels(obj) if obj else {}

    # --- what every layer shares --------------------------------------------------------

    @cached_property
    def pod_events(self) -> list[Event]:
        pod = self.target.pod
        return self.events("Pod", name_of(pod)) if pod is not None else []

    @cached_property
    def workload_events(self) -> list[Event]:
        """Events of the workloads that own the target, when it has no pod."""
        if self.target.pod is not None:
            return []
        return [
            e for w in self.target.workloads for e in self.events(str(w.get("kind")), name_of(w))
        ]

    @cached_property
    def view(self) -> StackView:
        """The cluster's GPU stacks, remembered until a GPU component or its pods change."""

        if self.shared is not None and "stack-view" in self.shared:
            view, unknowns = self.shared["stack-view"]
            self.unknowns.extend(unknowns)
            return view  # type: ignore[no-any-return]
        missing: list[Unknown] = []

        def read(kind: str, namespace: str | None) -> list[Obj] | None:
            try:
                return self.source.objects(kind, namespace=namespace)
            except ForbiddenError as e:
                missing.append(Unknown(Layer.DRIVER, str(e)))
                return None

        view = load_view(read, override=self.config.operator_namespace, memo=self.memo)
        self.unknowns.extend(missing)
        if self.shared is not None:
            self.shared["stack-view"] = (view, missing)
        return view


LayerCheck = Callable[[Context], Outcome]
