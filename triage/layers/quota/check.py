"""Check 3, the quota layer: every quota check in turn for the pod or its workload."""

from __future__ import annotations

from triage.layers.base import CheckResult, Context
from triage.layers.quota.base import QuotaInput
from triage.layers.quota.kueue import check_kueue
from triage.layers.quota.quotas import check_failed_create, check_priority, check_resource_quotas
from triage.layers.quota.volcano import check_volcano


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
    )
    run_quota_checks(inp)
    ctx.unknowns.extend(inp.unknowns)
    return CheckResult(signals=inp.signals)


def run_quota_checks(inp: QuotaInput) -> None:
    check_resource_quotas(inp)
    if inp.pod is None:
        check_failed_create(inp)
    check_kueue(inp)
    check_volcano(inp)
    check_priority(inp)
