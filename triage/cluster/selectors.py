"""Matching as the control plane matches: taints against tolerations, label selectors, node
selector terms and required node affinity. Each function mirrors a documented Kubernetes rule,
so the engine's own evaluation of a node agrees with the scheduler's.
"""

from __future__ import annotations

from collections.abc import Iterable

from triage.cluster.objects import Obj, labels, name_of


def tolerates(tolerations: Iterable[Obj], taint: Obj) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        op = t.get("operator") or "Equal"
        if not t.get("key"):
            if op == "Exists":
                return True
            continue
        if t.get("key") != taint.get("key"):
            continue
        if op == "Exists" or (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def untolerated_taints(pod: Obj, node: Obj, *, ignore: Iterable[str] = ()) -> list[Obj]:
    """Taints with NoSchedule/NoExecute effect the pod does not tolerate."""
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    skip = set(ignore)
    return [
        t
        for t in (node.get("spec") or {}).get("taints") or []
        if t.get("effect") in ("NoSchedule", "NoExecute")
        and t.get("key") not in skip
        and not tolerates(tolerations, t)
    ]


def taint_str(t: Obj) -> str:
    value = f"={t['value']}" if t.get("value") else ""
    return f"{t.get('key')}{value}:{t.get('effect')}"


def match_expression(expr: Obj, values: dict[str, str]) -> bool:
    k, op, want = expr.get("key", ""), expr.get("operator"), expr.get("values") or []
    have = values.get(k)
    if op == "In":
        return have is not None and have in want
    if op == "NotIn":
        return have is None or have not in want
    if op == "Exists":
        return have is not None
    if op == "DoesNotExist":
        return have is None
    if op in ("Gt", "Lt") and have is not None and want:
        try:
            a, b = int(have), int(want[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def label_selector_matches(selector: Obj | None, values: dict[str, str]) -> bool:
    """A metav1.LabelSelector against labels: None matches nothing, {} everything."""
    if selector is None:
        return False
    if any(values.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(match_expression(e, values) for e in selector.get("matchExpressions") or [])


def selector_str(selector: Obj | None) -> str:
    """A label selector the way kubectl's -l takes it: app=web,tier in (a,b)."""
    if not selector:
        return "everything" if selector is not None else "nothing"
    parts = [f"{k}={v}" for k, v in (selector.get("matchLabels") or {}).items()]
    for e in selector.get("matchExpressions") or []:
        op, key, vals = e.get("operator"), e.get("key", ""), ",".join(e.get("values") or [])
        parts.append(
            {"In": f"{key} in ({vals})", "NotIn": f"{key} notin ({vals})", "Exists": key}.get(
                str(op), f"!{key}"
            )
        )
    return ",".join(parts)


def node_selector_term_matches(term: Obj, node: Obj) -> bool:
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False  # an empty term matches nothing
    lab = labels(node)
    if not all(match_expression(e, lab) for e in exprs):
        return False
    return all(match_expression(f, {"metadata.name": name_of(node)}) for f in fields)


def required_affinity_terms(pod: Obj) -> list[Obj] | None:
    aff = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    req = aff.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = req.get("nodeSelectorTerms")
    return terms if terms else None


def selector_mismatch(pod: Obj, node: Obj) -> list[str]:
    """Which nodeSelector keys (or 'node affinity') exclude the node, empty if it matches."""
    spec = pod.get("spec") or {}
    selector = spec.get("nodeSelector")
    if not selector and not spec.get("affinity"):
        return []
    lab = labels(node)
    out = [
        f"{k}={v}" + (f" (node has {lab[k]})" if k in lab else " (node lacks label)")
        for k, v in (selector or {}).items()
        if lab.get(k) != v
    ]
    terms = required_affinity_terms(pod)
    if terms is not None and not any(node_selector_term_matches(t, node) for t in terms):
        out.append("required node affinity")
    return out
