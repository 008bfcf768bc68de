"""The triage report: one value that the CLI, Slack and the incident store all render or keep.

It knows nothing about Block Kit, terminals or databases. Its JSON form is a public contract
(see the design brief): `failing_layer`, one finding per layer, `owner`, `remediation`, `pod`.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Layer(StrEnum):
    """The four layers, lowest first. Their order is the order of diagnosis."""

    DRIVER = "driver"
    DEVICE_PLUGIN = "device-plugin"
    SCHEDULING = "scheduling"
    QUOTA = "quota"

    @property
    def rank(self) -> int:
        return _RANK[self]

    @property
    def label(self) -> str:
        return LAYER_TITLES[self]


LAYER_ORDER: tuple[Layer, ...] = (Layer.DRIVER, Layer.DEVICE_PLUGIN, Layer.SCHEDULING, Layer.QUOTA)
_RANK = {layer: i for i, layer in enumerate(LAYER_ORDER)}

LAYER_TITLES: dict[Layer, str] = {
    Layer.DRIVER: "GPU driver / container runtime",
    Layer.DEVICE_PLUGIN: "Device plugin (GPUs advertised to kubelet)",
    Layer.SCHEDULING: "Scheduling (placement on a GPU node)",
    Layer.QUOTA: "Quota / queue (tenant allowed to use GPUs now)",
}


class Status(StrEnum):
    """What a layer means for *this* pod.

    `fail` blocks the pod; `warn` is a problem that does not block it (a side finding, e.g. a
    crashing driver on a node the pod could never use); `unknown` means we could not look
    (usually a missing permission); `skipped` means the layer does not apply.
    """

    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    UNKNOWN = "unknown"
    SKIPPED = "skipped"


class Answer(StrEnum):
    """What a triage could tell. `blocked`: a layer blocks the pod (`failing_layer`), with
    nothing unknown below it; `clear`: nothing blocks it and every layer was looked at;
    `unknown`: a layer that could explain the pod could not be judged (a read failed), so no
    failing layer is named past it."""

    BLOCKED = "blocked"
    CLEAR = "clear"
    UNKNOWN = "unknown"


class Audience(StrEnum):
    """Who a report is shown to. An operator may read all of it; a tenant (the pod's own team,
    or a channel anyone may read) what `TriageReport.for_audience` leaves them."""

    OPERATOR = "operator"
    TENANT = "tenant"

    @classmethod
    def of(cls, *, operator: bool) -> Audience:
        return cls.OPERATOR if operator else cls.TENANT


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


FrozenT = TypeVar("FrozenT", bound=Frozen)

# Pydantic gives each instance a set of the names of the fields it was given: 728 bytes from
# five names, more than a PodRef's values, and a sweep holds a verdict (with its PodRef and
# WorkloadRef) and a member per stuck workload. The models made by the thousand share one set
# per distinct set of names instead: a frozen model's set is never changed in place
# (`model_copy` changes a copy of it).
_FIELD_SETS: dict[tuple[type, int], set[str]] = {}  # (class, how many names) -> the set


def shared_fields(model: FrozenT) -> FrozenT:
    """`model`, holding the set of its given fields' names that models given the same names
    share (the first of its class with as many; any other set is kept as it is)."""
    given = model.__pydantic_fields_set__
    key = (type(model), len(given))
    shared = _FIELD_SETS.get(key)
    if shared is None:
        if len(_FIELD_SETS) < 256:
            _FIELD_SETS[key] = given
    elif shared is not given and shared == given:
        object.__setattr__(model, "__pydantic_fields_set__", shared)
    return model


class _Answered(Frozen):
    @model_validator(mode="before")
    @classmethod
    def _answer_from_layer(cls, data: Any) -> Any:
        """A verdict made (or stored, before there were answers) without `answer`: blocked
        when a layer fails, else clear."""
        if isinstance(data, dict) and "answer" not in data:
            answer = Answer.BLOCKED if data.get("failing_layer") else Answer.CLEAR
            return {**data, "answer": answer}
        return data


class ObjectRef(Frozen):
    """A Kubernetes object an evidence sentence names, and the field of it that says so."""

    kind: str = Field(description="the object's kind: Node, Pod, ResourceQuota, ClusterQueue, …")
    namespace: str | None = Field(default=None, description="None: a cluster-scoped object")
    name: str
    field: str | None = Field(
        default=None, description="the field that shows it, as a path: spec.taints, status.phase"
    )
    value: str | None = Field(default=None, description="that field's value, as read")


class EvidenceItem(Frozen):
    """One evidence sentence and the objects it names, for scripts."""

    text: str = Field(description="the sentence, as in `evidence` (or `detail`)")
    refs: list[ObjectRef] = Field(default_factory=list)


class Finding(Frozen):
    """One layer's verdict for the pod.

    `evidence` is safe to show to the pod's own tenant (it names their objects and aggregated
    cluster facts). `detail` is operator-only: other tenants' pods, node internals.
    `evidence_items` and `detail_items` are the same sentences, one item each in the same
    order, with the objects each names (`ObjectRef`): what scripts read instead of parsing.
    """

    layer: Layer
    status: Status
    summary: str
    evidence: list[str] = Field(default_factory=list)
    detail: list[str] = Field(default_factory=list)
    codes: list[str] = Field(default_factory=list, description="machine-readable signal ids")
    evidence_items: list[EvidenceItem] = Field(default_factory=list)
    detail_items: list[EvidenceItem] = Field(default_factory=list)


class Unread(Frozen):
    """A read the triage could not make, and the layers it left unjudged."""

    verb: str = Field(description="list, get, watch")
    resource: str = Field(description="as RBAC names it: nodes, workloads.kueue.x-k8s.io")
    namespace: str | None = Field(default=None, description="None: at cluster scope")
    fault: str = Field(
        description="forbidden, unauthorized, unavailable, tls, credentials, not-kubernetes, "
        "expired, not-in-snapshot"
    )
    message: str
    grant: str | None = Field(default=None, description="the RBAC grant to add, when refused")
    layers: list[Layer] = Field(default_factory=list, description="the layers it left unknown")


class OwnerRoute(Frozen):
    """Who to route the failing layer to."""

    team: str
    channel: str | None = None
    usergroup: str | None = None
    source: str = Field(default="default", description="which rule chose this route")


class WorkloadRef(Frozen):
    """The workload a pod belongs to: its outermost owner that exists."""

    kind: str = Field(description="Deployment, StatefulSet, Job, ReplicaSet, DaemonSet or Pod")
    name: str


class PodRef(Frozen):
    """What was triaged. `kind` is Pod, or the workload kind when the name was a workload."""

    namespace: str
    name: str
    kind: str = "Pod"
    pod: str | None = Field(default=None, description="the pod actually examined, if any")
    node: str | None = None
    phase: str | None = None
    workload: WorkloadRef | None = Field(
        default=None,
        description="the workload it resolves to, whatever was typed (a pod, its owner): its "
        "outermost owner that exists (a Deployment over its ReplicaSet), else the pod itself; "
        "the incident store's key",
    )

    @property
    def key(self) -> tuple[str, str]:
        """(kind, name) of the workload it resolves to (what was typed, when not resolved)."""
        if self.workload is not None:
            return self.workload.kind, self.workload.name
        return self.kind, self.name


class Cause(Frozen):
    """The root cause in machine form: what the fleet view groups stuck workloads by."""

    layer: Layer
    code: str = Field(description="the leading signal of the failing layer")
    nodes: list[str] = Field(default_factory=list, description="nodes where it blocks the pod")
    objects: list[str] = Field(
        default_factory=list,
        description="shared objects that block it: 'ResourceQuota ns/name', 'ClusterQueue cq', …",
    )
    vendor: str | None = Field(
        default=None, description="the accelerator vendor whose stack it is about ('AMD'), if one"
    )


class TriageVerdict(_Answered):
    """A triage's answer without its evidence: the failing layer (None when nothing blocks),
    the headline, the owner to route to and the cause. What the fleet view groups by."""

    cluster: str
    pod: PodRef
    failing_layer: Layer | None
    headline: str
    cause: Cause | None = None
    owner: OwnerRoute | None = None
    answer: Answer = Answer.CLEAR
    unknown_layers: list[Layer] = Field(default_factory=list)
    unread: list[Unread] = Field(default_factory=list)


class NodeResource(Frozen):
    """One resource a node lacks for the pod, in Kubernetes quantities."""

    resource: str
    asked: str = Field(description="what the pod asks (its effective request)")
    free: str = Field(description="allocatable minus what the pods bound there request")
    allocatable: str


class NodeEntry(Frozen):
    """What one node means for the pod: whether it could take the pod now, and if not why,
    as codes and objects a script can use."""

    name: str
    usable: bool = Field(
        description="the pod could be placed there now as far as the node goes (pod-level "
        "causes, a claim that never binds, a gate, a quota, are in the findings)"
    )
    eligible: bool = Field(
        description="the pod's own selector, affinity and tolerations and the node's size "
        "allow it (false: the pod could never use the node as things are)"
    )
    layer: Layer | None = Field(default=None, description="the layer that stops the pod there")
    reason: str | None = Field(default=None, description="the reason code (as in `codes`)")
    detail: str | None = Field(default=None, description="the reason, one line")
    blocking: str | None = Field(
        default=None,
        description="the object that stops the pod there: a component pod (namespace/name), "
        "the node itself (cordoned), or the kind of exclusion (an untolerated taint's key)",
    )
    resources: list[NodeResource] = Field(
        default_factory=list, description="the resources short there: asked versus free"
    )


class TriageReport(_Answered):
    """The engine's answer. `failing_layer` is None when nothing blocks the pod."""

    pod: PodRef
    cluster: str = "default"
    failing_layer: Layer | None
    headline: str
    findings: list[Finding]
    owner: OwnerRoute | None = None
    remediation: list[str] = Field(default_factory=list)
    operator_steps: list[str] = Field(
        default_factory=list,
        description="operator-only steps naming GPU component pods; they go before `remediation`",
    )
    verification: list[str] = Field(default_factory=list)
    generated_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    notes: list[str] = Field(
        default_factory=list, description="limits of this triage (unreadable events, stale cache)"
    )
    gpu_stack: list[str] = Field(
        default_factory=list,
        description="the GPU stacks found (where their components run, and what told us)",
    )
    data_age_note: str | None = Field(
        default=None, description="set when the data may be stale (old snapshot, lagging cache)"
    )
    cause: Cause | None = Field(default=None, description="the failing layer's cause, for grouping")
    answer: Answer = Field(
        default=Answer.CLEAR,
        description="blocked (failing_layer set), clear (nothing blocks it) or unknown (a "
        "layer that could explain it could not be judged: see unknown_layers and unread)",
    )
    unknown_layers: list[Layer] = Field(
        default_factory=list, description="layers that could not be judged, lowest first"
    )
    unread: list[Unread] = Field(
        default_factory=list, description="reads that failed: what, why, and what to grant"
    )
    nodes: list[NodeEntry] | None = Field(
        default=None,
        description="every node judged for the pod, by name, none left out (the pod's own "
        "node once it is bound); present in JSON/YAML output, null where not computed",
    )

    @property
    def complete(self) -> bool:
        """Whether every read the triage made succeeded and every layer was judged."""
        return not self.unknown_layers and not self.unread

    def for_audience(self, audience: Audience) -> TriageReport:
        """The report as `audience` may see it: the one rule every renderer (text, Block Kit,
        the language model's digest) applies, so what a tenant reads is decided here only.

        An operator sees all of it. A tenant sees the verdict, the evidence, the owner and the
        steps anyone may take; not a finding's `detail` (other tenants' pods, node internals),
        the `operator_steps` naming GPU component pods, the `gpu_stack`, the `verification`
        commands (operator tooling), nor the operator part of the data-age note."""
        if audience is Audience.OPERATOR:
            return self
        return self.model_copy(
            update={
                "findings": [
                    f.model_copy(update={"detail": [], "detail_items": []}) for f in self.findings
                ],
                "operator_steps": [],
                "gpu_stack": [],
                "verification": [],
                "data_age_note": _tenant_age_note(self.data_age_note),
            }
        )

    def finding(self, layer: Layer) -> Finding:
        return next(f for f in self.findings if f.layer == layer)

    @property
    def blocked(self) -> bool:
        return self.failing_layer is not None

    @property
    def fingerprint(self) -> str:
        """Stable id of the cause: the same pod blocked for the same reason hashes the same.

        It ignores wording and timestamps: only the failing layer and its signal codes count.
        """
        if self.answer == Answer.UNKNOWN:
            codes: list[str] = ["unknown", *self.unknown_layers]
        elif self.failing_layer is None:
            codes = ["running"]
        else:
            codes = sorted(set(self.finding(self.failing_layer).codes))
        raw = "|".join([str(self.failing_layer), *codes])
        return hashlib.sha256(raw.encode()).hexdigest()[:16]


# A live cache's note on a lost watch ends with the watch's error in parentheses, which may name
# the API server (`kube.cache.CachedSource.staleness_note`): a tenant reads the note without it.
_LOST_WATCH = ": lost the watch on "


def _tenant_age_note(note: str | None) -> str | None:
    if note and _LOST_WATCH in note:
        return note.split(" (", 1)[0]
    return note
