"""Running the scheduler's filters that look past the node itself for one pod: host ports,
volumes, topology spread and pod (anti-)affinity, judged per node from the objects they read.

kube-scheduler runs NodePorts before NodeResourcesFit and VolumeRestrictions, NodeVolumeLimits,
VolumeBinding, VolumeZone, PodTopologySpread and InterPodAffinity after it; for one node the
first failing filter is its reason, as in the scheduler's FitError. Failures that hold on
every node are the plugins' PreFilter: they become pod-level signals. The filters are built
only for a pod that has such constraints (`registry.needs_filters`) or when the scheduler
reports existing pods' anti-affinity, so an ordinary GPU pod keeps the placement fast path.
"""

from __future__ import annotations

from collections.abc import Callable

from triage.cluster.objects import Obj
from triage.cluster.source import ReadFailedError
from triage.layers.scheduling.filters.view import Filter, FilterView, Refusal
from triage.layers.scheduling.framework import FilterPlugin
from triage.layers.scheduling.registry import AFTER_FIT, BEFORE_FIT
from triage.signals import Signal

Unread = Callable[[ReadFailedError], None]


def _raise(e: ReadFailedError) -> None:
    raise e


def _guarded(plugin: FilterPlugin, view: FilterView, unread: Unread) -> Filter:
    make = plugin.make
    assert make is not None
    return _Guarded(lambda: make(view), unread)


class _Guarded:
    """A filter that stops judging once a read it needs fails: its reasons would rest on a
    list or object it never saw ("claim X does not exist"). `unread` says what failed."""

    def __init__(self, make: Callable[[], Filter], unread: Unread) -> None:
        self._unread = unread
        self._inner: Filter | None = None
        try:
            self._inner = make()
        except ReadFailedError as e:
            unread(e)

    def pre_filter(self) -> list[Signal]:
        if self._inner is None:
            return []
        try:
            return self._inner.pre_filter()
        except ReadFailedError as e:
            self._fail(e)
            return []

    def filter(self, node: str, obj: Obj) -> Refusal | None:
        if self._inner is None:
            return None
        try:
            return self._inner.filter(node, obj)
        except ReadFailedError as e:
            self._fail(e)
            return None

    def _fail(self, e: ReadFailedError) -> None:
        self._inner = None
        self._unread(e)


class PodFilters:
    """The filters for one pod, over one view of the cluster, in the registry's order. A
    filter whose reads fail says so through `unread` and judges no further (by default the
    failure is raised)."""

    def __init__(self, view: FilterView, *, unread: Unread = _raise) -> None:
        self.view = view
        self.before: tuple[Filter, ...] = tuple(_guarded(p, view, unread) for p in BEFORE_FIT)
        self.after: tuple[Filter, ...] = tuple(_guarded(p, view, unread) for p in AFTER_FIT)

    def pod_level(self) -> list[Signal]:
        """Reasons that stop the pod on every node (the plugins' PreFilter)."""
        return [s for f in (*self.before, *self.after) for s in f.pre_filter()]

    def before_fit(self, node: str) -> Refusal | None:
        """The filters before NodeResourcesFit."""
        obj = self.view.nodes.get(node) or {}
        return next((r for f in self.before if (r := f.filter(node, obj)) is not None), None)

    def after_fit(self, node: str) -> Refusal | None:
        """The filters after NodeResourcesFit, in the scheduler's order."""
        obj = self.view.nodes.get(node)
        if obj is None:
            return None
        return next((r for f in self.after if (r := f.filter(node, obj)) is not None), None)
