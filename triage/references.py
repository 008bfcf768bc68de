"""The objects an evidence sentence names, as `ObjectRef`s: what `-o json` gives scripts
beside each sentence, so nobody parses our wording.

The checks write their evidence in a few fixed shapes ("node X: …", "pod ns/name on node: …",
"ResourceQuota q: requests.nvidia.com/gpu used 8/8", "Job/x event FailedCreate …"), so the
references of every existing finding are read back from those shapes here, in one table,
rather than threaded through every check. A check that knows more (a field no shape carries)
gives its own references with its signal (`Signal.refs`); they come first.

A shape not in the table gives no reference, never a wrong one: a sentence with no refs is
still the sentence.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache

from triage.model import EvidenceItem, ObjectRef

_NAME = r"[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?"
_NS_NAME = rf"(?P<ns>{_NAME})/(?P<name>{_NAME})"


@dataclass(frozen=True, slots=True)
class Scope:
    """What a sentence's bare names mean: the triaged pod's namespace and name."""

    namespace: str
    pod: str | None


Rule = Callable[[re.Match[str], Scope], list[ObjectRef]]


def _node(m: re.Match[str], _: Scope) -> list[ObjectRef]:
    return [ObjectRef(kind="Node", name=m["node"])]


def _node_field(field: str, value: str) -> Rule:
    """The node the sentence names, at `field` (a template over the match's groups)."""

    def rule(m: re.Match[str], _: Scope) -> list[ObjectRef]:
        f = field.format_map(m.groupdict())
        return [ObjectRef(kind="Node", name=m["node"], field=f, value=m[value])]

    return rule


def _pod_ns(m: re.Match[str], _: Scope) -> list[ObjectRef]:
    return [ObjectRef(kind="Pod", namespace=m["ns"], name=m["name"])]


def _component(m: re.Match[str], _: Scope) -> list[ObjectRef]:
    refs = [ObjectRef(kind="Pod", namespace=m["ns"], name=m["name"])]
    if m["node"]:
        refs.append(ObjectRef(kind="Node", name=m["node"]))
    if m["container"]:
        refs[0] = refs[0].model_copy(
            update={
                "field": f"status.containerStatuses[{m['container']}].state",
                "value": m["state"],
            }
        )
    return refs


def _runs(m: re.Match[str], _: Scope) -> list[ObjectRef]:
    refs = [ObjectRef(kind="Node", name=m["node"])]
    for item in m["pods"].split(", "):
        ns, _sep, name = item.partition("/")
        if _sep and re.fullmatch(_NAME, ns) and re.fullmatch(_NAME, name):
            refs.append(
                ObjectRef(
                    kind="Pod", namespace=ns, name=name, field="spec.nodeName", value=m["node"]
                )
            )
    return refs


def _own_pod(field: str, value: str) -> Rule:
    def rule(m: re.Match[str], scope: Scope) -> list[ObjectRef]:
        if scope.pod is None:
            return []
        f = field.format_map(m.groupdict())
        return [
            ObjectRef(
                kind="Pod", namespace=scope.namespace, name=scope.pod, field=f, value=m[value]
            )
        ]

    return rule


def _named(
    kind: str, *, namespaced: bool, field: str | None = None, value: str | None = None
) -> Rule:
    def rule(m: re.Match[str], scope: Scope) -> list[ObjectRef]:
        groups = m.groupdict()
        ns = groups.get("ns") or (scope.namespace if namespaced else None)
        f = field.format_map(groups) if field else None
        return [
            ObjectRef(
                kind=kind, namespace=ns, name=m["name"], field=f, value=m[value] if value else None
            )
        ]

    return rule


def _event(m: re.Match[str], scope: Scope) -> list[ObjectRef]:
    return [
        ObjectRef(
            kind=m["kind"],
            namespace=scope.namespace,
            name=m["name"],
            field="event",
            value=m["reason"],
        )
    ]


def _scheduler(m: re.Match[str], scope: Scope) -> list[ObjectRef]:
    if scope.pod is None:
        return []
    field, value = (
        ("status.conditions[PodScheduled]", "False") if m["cond"] else ("event", m["reason"])
    )
    return [
        ObjectRef(kind="Pod", namespace=scope.namespace, name=scope.pod, field=field, value=value)
    ]


def _local_queue(m: re.Match[str], scope: Scope) -> list[ObjectRef]:
    return [
        ObjectRef(kind="LocalQueue", namespace=m["ns"], name=m["name"]),
        ObjectRef(kind="ClusterQueue", name=m["cq"]),
    ]


# (pattern, rule): every pattern is tried on every sentence; matches add up, in order.
@cache
def _rules() -> tuple[tuple[re.Pattern[str], Rule], ...]:
    """The table, compiled on first use (not at import: `--help` and the sweep never use it)."""
    return tuple((re.compile(p), r) for p, r in _TABLE)


_TABLE: tuple[tuple[str, Rule], ...] = (
    (
        rf"^(?:once created: )?node (?P<node>{_NAME}) is cordoned",
        _node_field("spec.unschedulable", "node"),
    ),
    (
        rf"^(?:once created: )?node (?P<node>{_NAME}) is not Ready: Ready=(?P<state>\w+)",
        _node_field("status.conditions[Ready].status", "state"),
    ),
    (
        rf"^(?:once created: )?node (?P<node>{_NAME}): untolerated taint (?P<taint>\S+)",
        _node_field("spec.taints", "taint"),
    ),
    (
        rf"^(?:once created: )?node (?P<node>{_NAME}): nodeSelector/affinity (?P<key>[^=\s]+)=\S+ \(node has (?P<has>[^)]*)\)",
        _node_field("metadata.labels[{key}]", "has"),
    ),
    (
        rf"^(?:once created: )?node (?P<node>{_NAME}): \d+/(?P<alloc>[0-9.]+[a-zA-Z]*) (?P<res>\S+) allocated",
        _node_field("status.allocatable[{res}]", "alloc"),
    ),
    (rf"^(?P<node>{_NAME}) runs: (?P<pods>.+)$", _runs),
    (rf"^node (?P<node>{_NAME}) runs: (?P<pods>.+)$", _runs),
    (
        rf"^(?:once created: |side finding \(does not block this pod\): |device plugin: |driver: )?node (?P<node>{_NAME})\b(?! runs: )",
        _node,
    ),
    (
        rf"^pod {_NS_NAME}(?: on (?P<node>{_NAME}))?: (?:container (?P<container>\S+) (?P<state>\w+))?",
        _component,
    ),
    (rf"^victim on (?P<node>{_NAME}): {_NS_NAME}", lambda m, s: [*_node(m, s), *_pod_ns(m, s)]),
    (
        r"^the pod asks (?P<what>.+?) \(container (?P<container>[^)]+)\)",
        _own_pod("spec.containers[{container}].resources.requests", "what"),
    ),
    (r"^pod spec\.runtimeClassName: (?P<rc>\S+);", _own_pod("spec.runtimeClassName", "rc")),
    (
        rf"^pod status\.nominatedNodeName=(?P<node>{_NAME})",
        _own_pod("status.nominatedNodeName", "node"),
    ),
    (r"^pod status (?P<reason>\w[\w./-]*):", _own_pod("status.reason", "reason")),
    (
        r"^container (?P<container>\S+) (?P<reason>[A-Z]\w+):",
        _own_pod("status.containerStatuses[{container}].state", "reason"),
    ),
    (r"^scheduler \((?:event (?P<reason>\w+)|(?P<cond>PodScheduled) condition)", _scheduler),
    (rf"^(?P<kind>[A-Z][A-Za-z]+)/(?P<name>{_NAME}) event (?P<reason>\w+)", _event),
    (
        rf"^ResourceQuota (?P<name>{_NAME}): (?P<item>\S+) used (?P<used>\S+)",
        _named("ResourceQuota", namespaced=True, field="status.used[{item}]", value="used"),
    ),
    (rf"\bquota (?P<name>{_NAME}) is exhausted", _named("ResourceQuota", namespaced=True)),
    (rf"^LocalQueue {_NS_NAME} → ClusterQueue (?P<cq>{_NAME})", _local_queue),
    (
        rf"^ClusterQueue (?P<name>{_NAME}) flavor (?P<flavor>{_NAME}): (?P<res>\S+) in use (?P<used>\S+)",
        _named(
            "ClusterQueue",
            namespaced=False,
            field="status.flavorsUsage[{flavor}][{res}]",
            value="used",
        ),
    ),
    (
        rf"^Workload (?P<name>{_NAME}): (?P<cond>\w+)=(?P<state>\w+)",
        _named(
            "Workload", namespaced=True, field="status.conditions[{cond}].status", value="state"
        ),
    ),
    (
        rf"^Job (?P<name>{_NAME}) is suspended",
        _named("Job", namespaced=True, field="spec.suspend"),
    ),
    (
        rf"^pod (?P<name>{_NAME}) is gated by Kueue",
        _named("Pod", namespaced=True, field="spec.schedulingGates"),
    ),
    (
        rf"^PodGroup (?P<name>{_NAME}):? (?:phase (?P<phase>\w+))?",
        _named("PodGroup", namespaced=True, field="status.phase", value="phase"),
    ),
    (
        rf"^Queue (?P<name>{_NAME}): state (?P<state>\w+)",
        _named("Queue", namespaced=False, field="status.state", value="state"),
    ),
    (
        rf"^NodeClaim (?P<name>{_NAME}) (?P<cond>\w+)=(?P<state>\w+)",
        _named(
            "NodeClaim",
            namespaced=False,
            field="status.conditions[{cond}].status",
            value="state",
        ),
    ),
    (
        rf"^NodePool (?P<name>{_NAME}) limits",
        _named("NodePool", namespaced=False, field="spec.limits"),
    ),
    (rf"^ConfigMap {_NS_NAME}", _named("ConfigMap", namespaced=True)),
    (rf"^ResourceClaim (?P<name>{_NAME})", _named("ResourceClaim", namespaced=True)),
    (
        rf"^claim (?P<name>{_NAME}): phase (?P<phase>\w+)",
        _named("PersistentVolumeClaim", namespaced=True, field="status.phase", value="phase"),
    ),
)


def refs_in(text: str, scope: Scope) -> list[ObjectRef]:
    """The objects `text` names, in the order it names them, each once."""
    found: list[ObjectRef] = []
    for pattern, rule in _rules():
        m = pattern.search(text)
        if m is not None:
            found.extend(rule(m, scope))
    return _unique(found)


def items(
    lines: Sequence[str], scope: Scope, given: Mapping[str, Sequence[ObjectRef]] | None = None
) -> list[EvidenceItem]:
    """One item per line: the references a check gave for it first, then those read from it."""
    given = given or {}
    return [
        EvidenceItem(text=line, refs=_unique([*given.get(line, ()), *refs_in(line, scope)]))
        for line in lines
    ]


def _unique(refs: Iterable[ObjectRef]) -> list[ObjectRef]:
    out: list[ObjectRef] = []
    seen: set[tuple[str, str | None, str]] = set()
    for r in refs:
        key = (r.kind, r.namespace, r.name)
        if key in seen:
            # the same object twice: keep the one that says more
            if r.field is not None:
                out = [
                    r if (o.kind, o.namespace, o.name) == key and o.field is None else o
                    for o in out
                ]
            continue
        seen.add(key)
        out.append(r)
    return out
