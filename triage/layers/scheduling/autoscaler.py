"""What the node autoscaler and the scheduler's preemption say about a pod that fits nowhere.

On EKS, GKE and AKS most GPU capacity arrives through node autoscaling, so "no node has room"
is only half an answer: is a node on its way, or can none come? cluster-autoscaler writes
events on the pod (`TriggeredScaleUp`: "pod triggered scale-up: [{group 1->2 (max: 4)}]";
`NotTriggerScaleUp`: "pod didn't trigger scale-up: 2 max node group size reached, 1 in
backoff after failed scale-up, …"); Karpenter writes `Nominated` ("Pod should schedule on:
nodeclaim/…") and its own `FailedScheduling` ("Failed to schedule pod, incompatible with
nodepool …, no instance type satisfied resources …" or "all available instance types exceed
limits for nodepool: …"). The scheduler sets `status.nominatedNodeName` while it preempts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from triage.cluster.bounded import loads_yaml
from triage.cluster.events import Event, parse_time
from triage.cluster.objects import Obj
from triage.cluster.quantities import amount
from triage.model import Layer
from triage.signals import Signal

KARPENTER_PREFIX = "Failed to schedule pod"
# A scale-up this old with the pod still pending has stalled (a GPU node joins in minutes).
SCALE_UP_GRACE = timedelta(minutes=15)
_CA_NOT = re.compile(
    r"pod didn't trigger scale-up(?: \(it wouldn't fit if a new node is added\))?:?\s*(.*)"
)
_CA_GROUPS = re.compile(r"\{(\S+) (\d+)->(\d+) \(max: (\d+)\)\}")
_POOL = re.compile(r'nodepool[:]? "?([\w.-]+)"?')


def _age(ev: Event, now: datetime) -> str:
    if ev.last_seen is None:
        return ""
    minutes = max(0, int((now - ev.last_seen).total_seconds() // 60))
    return f" ({minutes} min ago)" if minutes else " (just now)"


_EPOCH = datetime.min.replace(tzinfo=UTC)


def _newest(events: list[Event], *reasons: str) -> Event | None:
    found = [e for e in events if e.reason in reasons and e.message]
    return max(found, key=lambda e: e.last_seen or _EPOCH, default=None)


class ScalingReads(NamedTuple):
    """What the autoscaler checks may read beyond the pod's events, each asked only when its
    answer is needed. (A tuple: a sweep makes one per pod waiting for a node.)"""

    # terminating lower-priority pods on the nominated node: (text a tenant may read,
    # operator-only name)
    victims: Sequence[tuple[str, str]] = ()
    # the node autoscalers running in the cluster; None: the pod's silence is not judged
    autoscalers: Callable[[], list[str]] | None = None
    karpenter: Callable[[str], list[Obj]] | None = None  # NodePools, NodeClaims by kind
    ca_status: Callable[[], Obj | None] | None = None  # cluster-autoscaler's status ConfigMap
    # told when the answer rests on the clock (how long ago the autoscaler spoke), so a sweep
    # that keeps answers triages the pod again next time
    dated: Callable[[], None] | None = None


NO_READS = ScalingReads()


def autoscaler_signals(
    pod: Obj,
    events: list[Event],
    *,
    now: datetime,
    reads: ScalingReads = NO_READS,
    silence: bool = True,
) -> list[Signal]:
    """Signals for a pod no node can take now: a node on its way (scale-up triggered, a
    NodeClaim nominated, a preemption under way), or why the autoscaler adds none.

    `reads` is what may be looked at beyond the pod's events; `silence` False: the
    autoscalers' silence about the pod is not judged (it matters only for a pod waiting for
    room)."""
    status = pod.get("status") or {}
    nominated = status.get("nominatedNodeName")
    if nominated:
        return [_preempting(str(nominated), reads.victims)]
    ca = _newest(events, "TriggeredScaleUp", "NotTriggerScaleUp")
    said = [e for e in events if e.reason == "Nominated" or (
        e.reason == "FailedScheduling" and e.message.startswith(KARPENTER_PREFIX))]  # fmt: skip
    kp = _newest(said, "Nominated", "FailedScheduling")
    out: list[Signal] = []
    if ca is not None and ca.reason == "TriggeredScaleUp":
        groups = [f"{g} {a}->{b} (max {m})" for g, a, b, m in _CA_GROUPS.findall(ca.message)]
        where = ", ".join(groups) or "a node group"
        if ca.last_seen is not None and now - ca.last_seen > SCALE_UP_GRACE:
            out.append(Signal(Layer.SCHEDULING, "scheduling.scale-up-stalled",
                              f"cluster-autoscaler scaled up {where}{_age(ca, now)} but no node "
                              "has taken the pod since", evidence=[str(ca)]))  # fmt: skip
        else:
            out.append(Signal(Layer.SCHEDULING, "scheduling.scale-up-in-progress",
                              f"waiting for a new node: cluster-autoscaler is scaling up {where}"
                              f"{_age(ca, now)}", evidence=[str(ca)]))  # fmt: skip
    elif ca is not None:
        status = CaStatus.read(reads.ca_status() if reads.ca_status else None)
        out.append(_not_triggered(ca, now, status))
        out[-1] = out[-1].with_evidence(then=status.groups() if status else [])
    failed = _newest(events, "FailedScaleUp")
    if failed is not None and (ca is None or ca.reason != "NotTriggerScaleUp"):
        status = CaStatus.read(reads.ca_status() if reads.ca_status else None)
        out.append(_scale_up_failed(failed, now, status))
    if kp is not None and kp.reason == "Nominated":
        claim = kp.message.rsplit(":", 1)[-1].strip()
        out.append(_nominated(claim, kp, now, reads.karpenter))
    elif kp is not None:
        pool = _POOL.search(kp.message)
        name = f"NodePool {pool.group(1)}" if pool else "any NodePool"
        evidence = [str(kp)]
        if "exceed limits" in kp.message:
            code = "scheduling.karpenter-limits"
            summary = f"Karpenter cannot add a node: {name} has reached its limits"
            for np in reads.karpenter("NodePool") if reads.karpenter and pool else ():
                if (np.get("metadata") or {}).get("name") == pool.group(1):  # type: ignore[union-attr]
                    evidence.append(_limits(np))
        else:
            code = "scheduling.karpenter-no-instance-type"
            summary = f"Karpenter cannot add a node: no instance type of {name} fits the pod"
            for np in reads.karpenter("NodePool") if reads.karpenter and pool else ():
                if (np.get("metadata") or {}).get("name") == pool.group(1):  # type: ignore[union-attr]
                    evidence.append(_offers(np))
        out.append(Signal(Layer.SCHEDULING, code, summary + _age(kp, now), evidence=evidence))
    if ca is None and kp is None and silence and reads.autoscalers is not None:
        silent = _silence(pod, now, reads.autoscalers, reads.ca_status)
        out.extend([silent] if silent else [])
    return out


def _silence(
    pod: Obj,
    now: datetime,
    autoscalers: Callable[[], list[str]],
    ca_status: Callable[[], Obj | None] | None,
) -> Signal | None:
    """Neither autoscaler wrote about a pod waiting for room: is one down, or ignoring it?"""
    waited = _pending_for(pod, now)
    if waited is None or waited < SILENCE:
        return None
    running = autoscalers()
    status = CaStatus.read(ca_status() if ca_status else None)
    where = f"ConfigMap {STATUS_NS}/{STATUS_NAME}"
    if status is not None and status.age(now) > SILENCE:
        code = "scheduling.autoscaler-down"
        summary = (
            f"cluster-autoscaler last updated its status {_minutes(status.age(now))} min ago: "
            "it is not running, so no node will be added for the pod"
        )
        evidence = [f"{where}: time {status.time}"]
    elif running or status is not None:
        running = running or [f"cluster-autoscaler ({where} is current)"]
        code = "scheduling.autoscaler-silent"
        summary = (
            f"{running[0]} runs but has said nothing about this pod in {_minutes(waited)} min: "
            "it is not acting on it (no scale-up, no reason why not)"
        )
        evidence = [
            "no TriggeredScaleUp, NotTriggerScaleUp or Karpenter event on the pod; "
            f"autoscaler: {', '.join(running)}"
        ]
    else:
        return None
    return Signal(Layer.SCHEDULING, code, summary, evidence=evidence)


def _minutes(span: timedelta) -> int:
    return int(span.total_seconds() // 60)


# Autoscalers answer a pending pod within a scan or two (10 s by default); events expire
# after an hour, and cluster-autoscaler re-emits NotTriggerScaleUp while the pod waits.
SILENCE = timedelta(minutes=10)


def _pending_for(pod: Obj, now: datetime) -> timedelta | None:
    """How long the pod has been unschedulable: the PodScheduled condition's age."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            since = parse_time(cond.get("lastTransitionTime"))
            return now - since if since else None
    return None


STATUS_NS, STATUS_NAME = "kube-system", "cluster-autoscaler-status"
_GO_TIME = re.compile(r"(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)")


class CaStatus:
    """cluster-autoscaler's status ConfigMap: `data.status` is YAML since 1.30 (time,
    autoscalerStatus, clusterWide, nodeGroups[].health/scaleUp), plain text before."""

    def __init__(self, text: str, doc: dict[str, Any]) -> None:
        self.doc = doc
        found = _GO_TIME.search(str(doc.get("time") or text))
        self.time = f"{found.group(1)} {found.group(2)} UTC" if found else ""
        self._at = (
            datetime.fromisoformat(f"{found.group(1)}T{found.group(2)}+00:00") if found else None
        )

    @classmethod
    def read(cls, configmap: Obj | None) -> CaStatus | None:
        text = str(((configmap or {}).get("data") or {}).get("status") or "")
        if not text:
            return None
        try:  # YAML from the cluster: parsed within the same bounds as a snapshot
            doc = loads_yaml(text[:_MAX_STATUS])
        except (ValueError, UnicodeError):
            doc = None  # the plain-text status of older versions, or unreadable: the text
        return cls(text, doc if isinstance(doc, dict) else {})

    def age(self, now: datetime) -> timedelta:
        return now - self._at if self._at else timedelta(0)

    def _groups(self) -> Iterator[tuple[str, dict[str, Any], dict[str, Any], bool]]:
        """Each node group of the status: its name, health, scale-up state and whether its
        cloud provider's target reached its maximum size."""
        groups = self.doc.get("nodeGroups")
        for g in groups if isinstance(groups, list) else []:
            if not isinstance(g, dict):
                continue
            health, up = _mapping(g.get("health")), _mapping(g.get("scaleUp"))
            target, top = health.get("cloudProviderTarget"), health.get("maxSize")
            at_max = isinstance(target, int) and isinstance(top, int) and target >= top
            yield str(g.get("name", "?")).rsplit("/", 1)[-1], health, up, at_max

    def named(self, which: str) -> list[str]:
        """The node groups at their maximum ("max") or in backoff ("backoff"), each as
        "name (target/max)" or "name (errorCode)"."""
        out = []
        for name, health, up, at_max in self._groups():
            if which == "max" and at_max:
                out.append(f"{name} ({health['cloudProviderTarget']}/{health['maxSize']} nodes)")
            elif which == "backoff" and up.get("status") == "Backoff":
                info = _mapping(up.get("backoffInfo"))
                out.append(f"{name} ({info.get('errorCode', 'backoff')})")
        return out[:5]

    def groups(self, limit: int = 5) -> list[str]:
        """Node groups at their maximum, in backoff or unhealthy, one line each."""
        out = []
        for name, health, up, at_max in self._groups():
            notes = []
            if at_max:
                target, top = health["cloudProviderTarget"], health["maxSize"]
                notes.append(f"at its maximum ({target}/{top} nodes)")
            if up.get("status") == "Backoff":
                info = _mapping(up.get("backoffInfo"))
                notes.append(
                    f"in backoff: {info.get('errorCode', '?')} {info.get('errorMessage', '')}".rstrip()
                )
            if health.get("status") not in (None, "Healthy"):
                notes.append(f"health {health.get('status')}")
            if notes:
                out.append(f"node group {name}: " + "; ".join(notes))
        if len(out) > limit:
            out = [*out[:limit], f"… and {len(out) - limit} more node group(s)"]
        return [f"cluster-autoscaler-status ({self.time}): " + o for o in out]


_MAX_STATUS = 1 << 20  # a ConfigMap holds at most 1 MiB


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _limits(pool: Obj) -> str:
    """A NodePool's spec.limits against its status.resources: "nvidia.com/gpu 16/16"."""
    limits = (pool.get("spec") or {}).get("limits") or {}
    used = (pool.get("status") or {}).get("resources") or {}
    parts = []
    for res, cap in sorted(limits.items()):
        have = used.get(res, "0")
        try:
            full = amount(res, have) >= amount(res, cap)
        except ValueError:
            full = False
        parts.append(f"{res} {have}/{cap}" + (" (reached)" if full else ""))
    name = (pool.get("metadata") or {}).get("name")
    return f"NodePool {name} limits (in use/limit): " + (", ".join(parts) or "none set")


def _nominated(
    claim: str, ev: Event, now: datetime, karpenter: Callable[[str], list[Obj]] | None
) -> Signal:
    """Karpenter nominated a NodeClaim for the pod: on its way, failed to launch, or stuck
    before it registered as a node."""
    name = claim.removeprefix("nodeclaim/")
    obj = next(
        (c for c in (karpenter("NodeClaim") if karpenter else ()) if (c.get("metadata") or {}).get("name") == name),
        None,
    )  # fmt: skip
    conds = {c.get("type"): c for c in ((obj or {}).get("status") or {}).get("conditions") or []}
    launched, registered = conds.get("Launched") or {}, conds.get("Registered") or {}
    evidence = [str(ev)] + [
        f"NodeClaim {name} {t}={c.get('status')}"
        + (f" ({c.get('reason')}: {c.get('message')})" if c.get("message") else "")
        for t, c in conds.items()
        if t in ("Launched", "Registered", "Initialized")
    ]
    if launched.get("status") == "False" and launched.get("message"):
        return Signal(Layer.SCHEDULING, "scheduling.karpenter-launch-failed",
                      f"Karpenter could not launch NodeClaim {name} for the pod: "
                      f"{launched.get('message')}", evidence=evidence)  # fmt: skip
    since = parse_time(launched.get("lastTransitionTime"))
    if (
        launched.get("status") == "True"
        and registered.get("status") != "True"
        and since is not None
        and now - since > SCALE_UP_GRACE
    ):
        minutes = int((now - since).total_seconds() // 60)
        return Signal(Layer.SCHEDULING, "scheduling.scale-up-stalled",
                      f"Karpenter launched NodeClaim {name} {minutes} min ago but it has not "
                      "registered as a node", evidence=evidence)  # fmt: skip
    return Signal(Layer.SCHEDULING, "scheduling.scale-up-in-progress",
                  f"waiting for a new node: Karpenter launched {claim} for it{_age(ev, now)}",
                  evidence=evidence)  # fmt: skip


def _preempting(node: str, victims: Sequence[tuple[str, str]]) -> Signal:
    if victims:
        mine = [text for text, detail in victims if not detail]
        others = len(victims) - len(mine)
        named = ", ".join(mine[:5]) + (f" and {len(mine) - 5} more" if len(mine) > 5 else "")
        parts = [p for p in (named, f"{others} pod(s) in other namespaces" if others else "") if p]
        return Signal(
            Layer.SCHEDULING,
            "scheduling.preempting",
            f"waiting for {len(victims)} lower-priority pod(s) to leave node {node}: the "
            "scheduler is preempting them for this pod",
            evidence=[f"pod status.nominatedNodeName={node}", "terminating: " + "; ".join(parts)],
            detail=[f"victim on {node}: {d}" for _, d in victims if d],
            nodes=[node],
        )
    return Signal(
        Layer.SCHEDULING,
        "scheduling.preempting",
        f"waiting for node {node}: the scheduler nominated it for this pod; no lower-priority "
        "pod there is terminating yet",
        evidence=[f"pod status.nominatedNodeName={node}"],
        nodes=[node],
    )


def _offers(pool: Obj) -> str:
    """What instance types a NodePool may launch, from its requirements."""
    reqs = (((pool.get("spec") or {}).get("template") or {}).get("spec") or {}).get("requirements")
    parts = [
        f"{r.get('key')} {r.get('operator')} [{', '.join(map(str, r.get('values') or []))}]"
        for r in reqs or []
        if isinstance(r, dict) and "instance" in str(r.get("key"))
    ]
    name = (pool.get("metadata") or {}).get("name")
    return f"NodePool {name} spec.template.spec.requirements: " + (
        "; ".join(parts) or "no instance-type requirement (any type its NodeClass allows)"
    )


def _named(groups: list[str], status: CaStatus | None, what: str) -> str:
    """The node groups a cluster-autoscaler answer is about: "node group gpu-a100 (4/4)"."""
    if groups:
        return f"node group(s) {', '.join(groups)}"
    if status is None:
        return (f"node groups {what} (the event names none; ConfigMap {STATUS_NS}/{STATUS_NAME} "
                "not read)")  # fmt: skip
    return f"node groups {what} (none named in {STATUS_NS}/{STATUS_NAME})"


def _scale_up_failed(ev: Event, now: datetime, status: CaStatus | None) -> Signal:
    groups = [g for g, *_ in _CA_GROUPS.findall(ev.message)] or (
        status.named("backoff") if status else []
    )
    where = _named(groups, status, "it tried")
    return Signal(Layer.SCHEDULING, "scheduling.autoscaler-backoff",
                  f"cluster-autoscaler's scale-up of {where} failed{_age(ev, now)}: "
                  f"{ev.message[:200]}", evidence=[str(ev)], objects=[f"node group {g}" for g in groups])  # fmt: skip


def _not_triggered(ev: Event, now: datetime, status: CaStatus | None = None) -> Signal:
    m = _CA_NOT.match(ev.message)
    reasons = [r.strip() for r in (m.group(1) if m else ev.message).split(",") if r.strip()]
    max_size = [r for r in reasons if "max node group size reached" in r]
    backoff = [r for r in reasons if "backoff" in r]
    groups: list[str] = []
    if max_size:
        code = "scheduling.autoscaler-max-size"
        groups = status.named("max") if status else []
        head = f"cluster-autoscaler cannot add a node: {_named(groups, status, 'that fit')} at their maximum size"
    elif backoff:
        code = "scheduling.autoscaler-backoff"
        groups = status.named("backoff") if status else []
        head = f"cluster-autoscaler cannot add a node: {_named(groups, status, 'that fit')} in backoff after a failed scale-up"
    else:
        code = "scheduling.autoscaler-no-fit"
        head = "cluster-autoscaler cannot add a node: a new node of any group would not fit the pod either"
    detail = f" ({'; '.join(reasons)})" if reasons else ""
    return Signal(Layer.SCHEDULING, code, head + detail + _age(ev, now), evidence=[str(ev)],
                  objects=[f"node group {g.split(' ')[0]}" for g in groups])  # fmt: skip
