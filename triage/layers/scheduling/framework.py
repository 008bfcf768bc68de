"""What a scheduler filter declares, as kube-scheduler's framework has its plugins declare it.

A filter is one module: its `PLUGIN` says its name (the kube-scheduler plugin it stands
for), its phase (before, at or after the resource fit), the reason codes it reports with the
headline each takes, the words of kube-scheduler's `FailedScheduling` messages it corresponds
to, the pod fields it reads, when it applies to a pod, and how it judges: a node the pod could
never use (`exclude`, once per node class) or a filter over other objects (`make`, per node).
`registry.FILTERS` lists them in the order the engine runs them; every table that depends on
the filters (the summaries, the after-fit codes, the scheduler's categories, the reasons this
engine judges from objects, the exclusion codes) is derived from it. A new filter is a new
module and one line in the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple

from triage.cluster.objects import Obj

if TYPE_CHECKING:
    from triage.layers.node import NodeHealth
    from triage.layers.scheduling.filters.view import Filter, FilterView


class Phase(StrEnum):
    """Where a filter runs relative to NodeResourcesFit. A node refused after the fit has room
    for the pod: its reason leads over the nodes that are only full."""

    BEFORE_FIT = "before-fit"
    FIT = "fit"
    AFTER_FIT = "after-fit"


class Exclusion(NamedTuple):
    """Why the pod could never use a node: its category (the excluded list it goes to; "" when
    it is no exclusion), the line that explains it (built only when shown), and whether the
    node only lacks labels GPU feature discovery has not written."""

    category: str
    why: Callable[[], str] | None = None
    gfd_missing: bool = False


# exclude(pod, node, health, requests, wants_gpu): an Exclusion, or None for a node that passes
Exclude = Callable[[Obj, Obj, "NodeHealth", Mapping[str, int], bool], Exclusion | None]


def always(pod: Obj) -> bool:
    return True


@dataclass(frozen=True)
class FilterPlugin:
    name: str  # the kube-scheduler plugin it stands for
    phase: Phase
    category: str  # what the report calls the reasons kube-scheduler gives for it
    reasons: Mapping[str, str] = field(default_factory=dict)  # code -> headline template
    scheduler_says: tuple[str, ...] = ()  # parts of its reasons in a FailedScheduling message
    pod_fields: tuple[str, ...] = ()  # what it reads of the pod ("spec.volumes[].name")
    applies: Callable[[Obj], bool] = always  # whether it can refuse a node for this pod
    modelled: bool = True  # judged from objects (else only the scheduler's words are shown)
    exclude: Exclude | None = None
    make: Callable[[FilterView], Filter] | None = None
    # exclusion category (or its first words) -> the code when no node passes it
    exclusion_codes: Mapping[str, str] = field(default_factory=dict)
