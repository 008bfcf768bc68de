"""Admission policy that refuses a pod before it exists: LimitRanges, ResourceQuota scopes,
and admission webhooks.

A refused pod never exists, so the trace is the owner's `FailedCreate` event, whose message is
the API server's: the LimitRanger's "maximum nvidia.com/gpu usage per Container is 2, but
limit is 4" (also "minimum … but request is …" and "… max limit to request ratio per …"),
the quota's "exceeded quota: NAME, requested: …", a webhook's "admission webhook "NAME" denied
the request: …" or "failed calling webhook "NAME": …". Events expire within the hour; then
the template is judged against the LimitRanges themselves, and the webhooks that see pod
creation in the namespace are named as what could not be judged.

A ResourceQuota with scopes counts only the pods its scopes select (`scope_matches`): a
PriorityClass `scopeSelector`, Terminating / NotTerminating (activeDeadlineSeconds),
BestEffort / NotBestEffort (the pod's QoS).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from triage.cluster.objects import LIMIT_RANGER, Obj, annotations_of, labels, name_of
from triage.cluster.quantities import amount, fmt_amount, resources
from triage.cluster.selectors import label_selector_matches
from triage.cluster.source import ReadFailedError
from triage.layers.quota.base import QuotaInput
from triage.model import Layer
from triage.signals import Signal
from triage.vendors import is_accelerator

_LIMITRANGE = re.compile(
    r"(?:maximum|minimum) \S+ usage per (?:Container|Pod) is|"
    r"\S+ max limit to request ratio per (?:Container|Pod) is"
)
_WEBHOOK_DENIED = re.compile(r'admission webhook "([^"]+)" denied the request:?\s*(.*)')
_WEBHOOK_FAILED = re.compile(r'failed calling webhook "([^"]+)":?\s*(.*)')


def failed_create_signal(inp: QuotaInput, kind: str, name: str, message: str, line: str
                         ) -> Signal | None:  # fmt: skip
    """The admission-policy refusal a FailedCreate message names, if it is one of these."""
    if _LIMITRANGE.search(message):
        ranges = _limit_ranges(inp, needed=False) or []
        named = [f"LimitRange {inp.namespace}/{name_of(r)}" for r in ranges]
        which = f" ({', '.join(named)})" if named else ""
        return Signal(
            Layer.QUOTA, "quota.limitrange-violated",
            f"pods of {kind}/{name} are rejected at creation: a LimitRange of namespace "
            f"{inp.namespace}{which} refuses their requests: {_limitrange_words(message)}",
            evidence=[line, *(why for r in ranges for why in _explain(r, inp))],
            objects=named[:1],
        )  # fmt: skip
    denied = _WEBHOOK_DENIED.search(message)
    if denied:
        return Signal(
            Layer.QUOTA, "quota.webhook-denied",
            f"pods of {kind}/{name} are rejected at creation: admission webhook "
            f"{denied.group(1)} denied them: {denied.group(2)[:300]}",
            evidence=[line], objects=[f"admission webhook {denied.group(1)}"],
            values={"webhook": denied.group(1)},
        )  # fmt: skip
    failed = _WEBHOOK_FAILED.search(message)
    if failed:
        return Signal(
            Layer.QUOTA, "quota.webhook-unavailable",
            f"pods of {kind}/{name} are rejected at creation: the API server cannot call "
            f"admission webhook {failed.group(1)} and its failurePolicy is Fail",
            evidence=[line], objects=[f"admission webhook {failed.group(1)}"],
            values={"webhook": failed.group(1)},
        )  # fmt: skip
    return None


def _limitrange_words(message: str) -> str:
    found = _LIMITRANGE.search(message)
    text = message[found.start() :] if found else message
    return text.rstrip("]. ")[:300]


def _limit_ranges(inp: QuotaInput, *, needed: bool = True) -> list[Obj] | None:
    """The namespace's LimitRanges; a read that fails makes the layer unknown only where they
    are `needed` (the only possible explanation), not where they would add detail."""
    try:
        return inp.read("LimitRange", inp.namespace)
    except ReadFailedError as e:
        if needed:
            inp.could_not(e)
        return None


def check_limit_ranges(inp: QuotaInput) -> None:
    """For a workload whose pods were never created (and no event left to say why): its pod
    template judged against the namespace's LimitRanges, as the LimitRanger would judge it."""
    if inp.pod is not None or inp.template is None:
        return
    if any(s.blocking for s in inp.signals):
        return  # already explained (a FailedCreate, a full quota, a queue holding it)
    ranges = _limit_ranges(inp)
    for lr in ranges or []:
        why = _explain(lr, inp)
        if why:
            ref = f"LimitRange {inp.namespace}/{name_of(lr)}"
            owner = next(
                (f"{w.get('kind')}/{name_of(w)}" for w in inp.workloads[-1:]), "the workload"
            )
            inp.signals.append(Signal(
                Layer.QUOTA, "quota.limitrange-violated",
                f"pods of {owner} would be rejected at creation: {ref} refuses their "
                f"requests ({why[0].split(': ', 1)[-1]})",
                evidence=why, objects=[ref],
            ))  # fmt: skip
            return


def _containers(template: Obj) -> Iterator[tuple[str, dict[str, int], dict[str, int]]]:
    spec = template.get("spec") or {}
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        yield str(c.get("name")), resources(res.get("requests")), resources(res.get("limits"))


def _explain(lr: Obj, inp: QuotaInput) -> list[str]:
    """What the LimitRange refuses of the workload's pod template, one line per violation,
    each naming the field (spec.limits[i].max …) and the container."""
    template = inp.template or inp.pod
    if template is None:
        return []
    out = []
    ref = f"LimitRange {name_of(lr)}"
    for i, item in enumerate((lr.get("spec") or {}).get("limits") or []):
        kind = item.get("type")
        if kind == "Container":
            subjects = [(f"container {n}", r, lim) for n, r, lim in _containers(template)]
        elif kind == "Pod":
            req: dict[str, int] = {}
            lim_sum: dict[str, int] = {}
            for _, r, lim in _containers(template):
                for k, v in r.items():
                    req[k] = req.get(k, 0) + v
                for k, v in lim.items():
                    lim_sum[k] = lim_sum.get(k, 0) + v
            subjects = [("the pod", req, lim_sum)]
        else:
            continue
        field = f"{ref} spec.limits[{i}] (type {kind})"
        for res, raw in (item.get("max") or {}).items():
            cap = _amount(res, raw)
            for who, r, lim in subjects:
                have = lim.get(res, r.get(res))
                if cap is not None and have is not None and have > cap:
                    out.append(f"{field} max {res} {raw}: {who} asks {fmt_amount(res, have)}")
        for res, raw in (item.get("min") or {}).items():
            floor = _amount(res, raw)
            for who, r, lim in subjects:
                have = r.get(res, lim.get(res))
                if floor is not None and (have is None or have < floor):
                    shown = "none" if have is None else fmt_amount(res, have)
                    out.append(f"{field} min {res} {raw}: {who} requests {shown}")
        for res, raw in (item.get("maxLimitRequestRatio") or {}).items():
            ratio = _amount(res, raw)
            for who, r, lim in subjects:
                if ratio is None or res not in lim:
                    continue
                want = r.get(res, lim[res])
                if want and lim[res] / want > ratio:
                    out.append(f"{field} maxLimitRequestRatio {res} {raw}: {who} has limit "
                               f"{fmt_amount(res, lim[res])}, request {fmt_amount(res, want)}")  # fmt: skip
    return out


def _amount(res: str, raw: object) -> int | None:
    try:
        return amount(res, raw)
    except ValueError:
        return None


def injected_gpus(pod: Obj) -> str | None:
    """The LimitRanger's own note that it set an accelerator request or limit on the pod
    (annotation kubernetes.io/limit-ranger), when it did: a GPU the pod's author never asked
    for."""
    note = annotations_of(pod).get(LIMIT_RANGER)
    if not note:  # most pods: asked of every stuck workload a sweep triages
        return None
    parts = [p.strip() for p in str(note).removeprefix("LimitRanger plugin set:").split(";")]
    found = [p for p in parts if any(is_accelerator(w) for w in p.split())]
    return "; ".join(found) or None


def check_injected(inp: QuotaInput) -> None:
    """A pod that asks for accelerators only because a LimitRange default gave them to it."""
    pod = inp.pod
    said = injected_gpus(pod) if pod is not None else None
    if pod is None or said is None:
        return
    ranges = _limit_ranges(inp, needed=False) or []
    defaults = [
        f"LimitRange {name_of(lr)} spec.limits[{i}].{key} {res}={value}"
        for lr in ranges
        for i, item in enumerate((lr.get("spec") or {}).get("limits") or [])
        for key in ("default", "defaultRequest")
        for res, value in (item.get(key) or {}).items()
        if is_accelerator(res)
    ]
    inp.signals.append(Signal(
        Layer.QUOTA, "quota.limitrange-default-gpu",
        f"the pod asks for GPUs because a LimitRange of namespace {inp.namespace} set them "
        f"({said}): its author asked for none",
        blocking=False,
        evidence=[f"pod annotation kubernetes.io/limit-ranger: {said}", *defaults[:3]],
        objects=[d.split(" spec.")[0] for d in defaults[:1]],
    ))  # fmt: skip


# --- ResourceQuota scopes ------------------------------------------------------------------


def scope_matches(quota: Obj, pod: Obj) -> tuple[bool, str]:
    """Whether a ResourceQuota's scopes select the pod, and the scopes in words ("" for a
    quota without scopes)."""
    spec = quota.get("spec") or {}
    words = []
    ok = True
    for scope in spec.get("scopes") or []:
        words.append(str(scope))
        ok = ok and _scope(str(scope), "Exists", [], pod)
    for expr in (spec.get("scopeSelector") or {}).get("matchExpressions") or []:
        name, op = str(expr.get("scopeName")), str(expr.get("operator"))
        values = [str(v) for v in expr.get("values") or []]
        words.append(f"{name} {op}" + (f" [{', '.join(values)}]" if values else ""))
        ok = ok and _scope(name, op, values, pod)
    return ok, "; ".join(words)


def _scope(name: str, op: str, values: list[str], pod: Obj) -> bool:
    spec = pod.get("spec") or {}
    if name == "PriorityClass":
        pc = spec.get("priorityClassName")
        if op == "Exists":
            return bool(pc)
        if op == "DoesNotExist":
            return not pc
        inside = pc in values
        return inside if op == "In" else not inside
    if name in ("Terminating", "NotTerminating"):
        terminating = spec.get("activeDeadlineSeconds") is not None
        return terminating if name == "Terminating" else not terminating
    if name in ("BestEffort", "NotBestEffort"):
        best = not any(
            (c.get("resources") or {}).get(k) for c in spec.get("containers") or []
            for k in ("requests", "limits")
        )  # fmt: skip
        return best if name == "BestEffort" else not best
    # CrossNamespacePodAffinity selects pods with namespaced pod-affinity terms, rare for GPU
    # jobs; a scope this engine does not know counts the pod, as before.
    return name != "CrossNamespacePodAffinity"


# --- webhooks -------------------------------------------------------------------------------


def pod_webhooks(inp: QuotaInput, namespace_labels: dict[str, str]) -> list[str] | None:
    """The validating webhooks that see pod creation in the namespace with failurePolicy
    Fail (those that could refuse the pods), or None when they could not be read."""
    try:
        configs = inp.read("ValidatingWebhookConfiguration", None)
    except ReadFailedError:
        return None
    out = []
    for cfg in configs:
        for hook in cfg.get("webhooks") or []:
            if hook.get("failurePolicy", "Fail") != "Fail":
                continue
            sel = hook.get("namespaceSelector")
            if sel and not label_selector_matches(sel, namespace_labels):
                continue
            if any(_sees_pod_create(rule) for rule in hook.get("rules") or []):
                out.append(f"{hook.get('name')} (ValidatingWebhookConfiguration {name_of(cfg)})")
    return out


def _sees_pod_create(rule: Obj) -> bool:
    ops = rule.get("operations") or []
    res = rule.get("resources") or []
    groups = rule.get("apiGroups") or []
    return (
        any(o in ("CREATE", "*") for o in ops)
        and any(r in ("pods", "*", "*/*") for r in res)
        and any(g in ("", "*") for g in groups)
    )


def namespace_labels(inp: QuotaInput) -> dict[str, str]:
    try:
        found = [n for n in inp.read("Namespace", None) if name_of(n) == inp.namespace]
    except ReadFailedError:
        found = []
    return labels(found[0]) if found else {"kubernetes.io/metadata.name": inp.namespace}
