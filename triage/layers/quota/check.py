"""Check 3, the quota layer: every quota check in turn for the pod or its workload."""

from __future__ import annotations

from triage.layers.base import CheckResult, Context
from triage.layers.quota.admission import (
    check_injected,
    check_limit_ranges,
    namespace_labels,
    pod_webhooks,
)
from triage.layers.quota.base import QuotaInput
from triage.layers.quota.kueue import check_kueue
from triage.layers.quota.quotas import check_failed_create, check_priority, check_resource_quotas
from triage.layers.quota.volcano import check_volcano
from triage.model import Layer
from triage.signals import Signal


def check(ctx: Context) -> CheckResult:
    """ResourceQuotas, Kueue, Volcano and priority, for the pod or its workload."""
    t = ctx.target
    inp = QuotaInput(
        namespace=t.namespace,
        pod=t.pod,
        template=t.template,
        workloads=t.workloads,
        workload_events=ctx.workload_events,
        read=lambda kind, ns: ctx.source.objects(kind, namespace=ns),
        sides=not ctx.verdict_only,
    )
    run_quota_checks(inp)
    ctx.unknowns.extend(inp.unknowns)
    return CheckResult(signals=inp.signals)


def run_quota_checks(inp: QuotaInput) -> None:
    check_resource_quotas(inp)
    if inp.pod is None:
        check_failed_create(inp)
    else:
        check_injected(inp)
    check_kueue(inp)
    check_volcano(inp)
    check_priority(inp)
    check_limit_ranges(inp)  # only for pods never created that nothing above explains
    if inp.pod is None and inp.template is not None and not inp.signals:
        _unexplained(inp)


def _unexplained(inp: QuotaInput) -> None:
    """A workload that created no pod, with nothing left to say why: the admission webhooks
    that could have refused its pods are what could not be judged (their refusals live only
    in FailedCreate events, which expire)."""
    if any(e.reason == "FailedCreate" for e in inp.workload_events):
        return
    hooks = pod_webhooks(inp, namespace_labels(inp))
    if not hooks:
        return
    owner = next(
        (f"{w.get('kind')}/{w.get('metadata', {}).get('name')}" for w in inp.workloads[-1:]),
        "the workload",
    )
    inp.signals.append(Signal(
        Layer.QUOTA, "quota.admission-unjudged",
        f"{owner} has no pods and no event says why (FailedCreate events expire after about an "
        f"hour): {len(hooks)} admission webhook(s) that see pod creation in namespace "
        f"{inp.namespace} could be refusing them",
        blocking=False, evidence=[f"validating webhook {h}, failurePolicy Fail" for h in hooks[:5]],
    ))  # fmt: skip
