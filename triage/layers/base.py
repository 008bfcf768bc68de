"""The layer interface: what a layer check receives and what it returns.

A layer check is a function `check(ctx: Context) -> CheckResult`. The engine runs the checks in
layer order (`triage.engine.CHECKS`) and then applies the root-cause rule across their
outcomes; a check never decides the verdict on its own.

`Context` is everything a check may use: the resolved target, the clock, the engine config,
and reads of the cluster that turn a missing permission into an `Unknown` for the layer that
needed it (so a forbidden kind makes a layer "unknown", never a crash). It also carries the
two views every layer shares: the cluster's GPU stacks and the health of each node.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from triage.cluster.events import Event, sorted_events
from triage.cluster.lazy import cached_property
from triage.cluster.memo import IdentityMemo
from triage.cluster.objects import Obj, labels, name_of
from triage.cluster.reads import LABELS, ReadLog, SweepState
from triage.cluster.source import ClusterSource, ReadFailedError
from triage.config import EngineConfig
from triage.layers.health import NodeHealths
from triage.layers.stacks.view import StackView, load_view
from triage.model import Layer, NodeEntry
from triage.signals import Signal, Unknown
from triage.target import Target


@dataclass
class CheckResult:
    """What one layer check found."""

    signals: list[Signal] = field(default_factory=list)
    # The report's headline when nothing blocks (a finished pod, a pod waiting for a node).
    headline: str | None = None
    # The line a passing layer shows instead of its default "ok" text.
    ok: dict[Layer, str] = field(default_factory=dict)
    # Every node judged for the pod, for the report's `nodes` list (built only when asked).
    nodes: Callable[[], list[NodeEntry]] | None = None


class Context:
    """One triage's access to the cluster, shared by every layer check."""

    def __init__(
        self,
        *,
        source: ClusterSource,
        config: EngineConfig,
        target: Target,
        now: datetime,
        sweep: SweepState | None = None,
        verdict_only: bool = False,
    ) -> None:
        self.source, self.config, self.target, self.now = source, config, target, now
        # The caller takes the verdict alone (`engine.verdict`): a check may leave out side
        # findings, which never decide it.
        self.verdict_only = verdict_only
        self.memo: IdentityMemo = source.memo
        self.unknowns: list[Unknown] = list(target.unknowns)
        self.notes: list[str] = []
        self.unread: list[ReadFailedError] = []  # reads that failed without a layer to blame
        # Work shared by the triages of one fleet sweep, which see one state of the cluster;
        # None for a triage of its own.
        self.shared: dict[Hashable, Any] | None = sweep.shared if sweep is not None else None
        # What this triage read, when a sweep keeps answers between sweeps (`ReadLog`).
        self.log: ReadLog | None = sweep.log if sweep is not None else None

    # --- what the answer depends on, for a sweep that keeps answers -------------------------

    def depend(self, key: tuple[Any, ...], value: Any, *, shared: bool = False) -> None:
        """The answer depends on `value` under `key`. A `shared` key names work the sweep's
        triages share (its value a digest of that work): later triages of the sweep, and the
        next sweep, compare against it."""
        if self.log is not None:
            self.log.note(key, value)
        if shared and self.shared is not None:
            self.shared[("digest", key)] = value

    def aside(self) -> AbstractContextManager[None]:
        """Reads for work a `depend` digest stands for."""
        return self.log.aside() if self.log is not None else nullcontext()

    def volatile(self) -> None:
        """The answer depends on the clock: a later sweep must triage again."""
        if self.log is not None:
            self.log.volatile = True

    # --- reads that never raise for a read that failed ------------------------------------

    def read(self, kind: str, namespace: str | None, *, layer: Layer) -> list[Obj]:
        """The objects, or [] when the read failed (`layer` is then unknown). For reads whose
        absence concludes nothing; where "none exist" would be a finding, use `try_read`."""
        found = self.try_read(kind, namespace, layers=(layer,))
        return [] if found is None else found

    def try_read(
        self, kind: str, namespace: str | None, *, layers: tuple[Layer, ...]
    ) -> list[Obj] | None:
        """The objects, or None when the read failed: `layers` are then unknown."""
        try:
            return self.source.objects(kind, namespace=namespace)
        except ReadFailedError as e:
            self.could_not(e, *layers)
            return None

    def get(self, kind: str, name: str, namespace: str | None, *, layer: Layer) -> Obj | None:
        try:
            return self.source.get(kind, name, namespace=namespace)
        except ReadFailedError as e:
            self.could_not(e, layer)
            return None

    def reader(self, layer: Layer) -> Callable[[str, str | None], list[Obj]]:
        """`read` bound to a layer, for checks that take a plain reader."""
        return lambda kind, namespace: self.read(kind, namespace, layer=layer)

    def getter(self, layer: Layer) -> Callable[[str, str, str | None], Obj | None]:
        """`get` bound to a layer."""
        return lambda kind, name, namespace: self.get(kind, name, namespace, layer=layer)

    def events(self, kind: str, name: str) -> list[Event]:
        """Events about an object in the target's namespace, newest first. Events are
        evidence, never the only ground of a verdict: one that cannot be read is a note."""
        try:
            raw = self.source.events_for(namespace=self.target.namespace, kind=kind, name=name)
        except ReadFailedError as e:
            self.note(f"events not read ({e})")
            self.unread.append(e)
            return []
        return sorted_events(raw)

    def could_not(self, e: ReadFailedError, *layers: Layer) -> None:
        """A read failed: the layers that needed it are unknown."""
        for layer in layers:
            self.unknown(layer, str(e), error=e)

    def unknown(self, layer: Layer, reason: str, *, error: ReadFailedError | None = None) -> None:
        if all(u.reason != reason or u.layer != layer for u in self.unknowns):
            self.unknowns.append(Unknown(layer, reason, error))

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def node_labels(self, node: str) -> dict[str, str]:
        with self.aside():  # the labels count, not the node's heartbeat
            try:
                obj = self.source.get("Node", node)
            except ReadFailedError:
                obj = None
        found = labels(obj) if obj else {}
        self.depend((LABELS, node), found)
        return found

    # --- what every layer shares --------------------------------------------------------

    @cached_property
    def healths(self) -> NodeHealths:
        """Every node's driver and device-plugin verdict, remembered across triages."""
        return NodeHealths(
            self.memo, now=self.now, grace_minutes=self.config.node_join_grace_minutes
        )

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
        """The cluster's GPU stacks, remembered until a GPU component or its pods change.

        Its digest (`StackView.digest`) is what a triage depends on: a node's health, which
        also rests on its own component pods, is covered by the digest of the work that
        judged the node. A check that reads the view's pods itself depends on the exact view
        (`VIEW_EXACT`)."""
        if self.shared is not None and "stack-view" in self.shared:
            view, unknowns = self.shared["stack-view"]
            self.unknowns.extend(unknowns)
        else:
            with self.aside():
                view, unknowns = self._load_view()
            self.unknowns.extend(unknowns)
            if self.shared is not None:
                self.shared["stack-view"] = (view, unknowns)
        self.depend(VIEW, view.digest, shared=True)
        if self.shared is not None:
            self.shared[("digest", VIEW_EXACT)] = view
        return view  # type: ignore[no-any-return]

    def _load_view(self) -> tuple[StackView, list[Unknown]]:
        missing: list[Unknown] = []

        def read(kind: str, namespace: str | None) -> list[Obj] | None:
            try:
                return self.source.objects(kind, namespace=namespace)
            except ReadFailedError as e:
                # The stack view judges the driver and the device plugin of every node.
                missing.extend(Unknown(la, str(e), e) for la in (Layer.DRIVER, Layer.DEVICE_PLUGIN))
                return None

        view = load_view(read, override=self.config.operator_namespace, memo=self.memo)
        return view, missing


# Keys of the shared work a triage may depend on (`Context.depend`).
VIEW = ("view",)  # the stack view's digest
VIEW_EXACT = ("view", "exact")  # the stack view itself: any GPU component pod changed

LayerCheck = Callable[[Context], CheckResult]
