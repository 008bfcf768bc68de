"""The four checks `ask` can run, with the caller's access policy enforced inside each one.

These are plain functions over typed (pydantic) arguments, so the deterministic intent matcher
and the langchain tools (`assist.tools`) share one implementation and one access rule: a tenant
asking about a namespace outside their grant gets exactly the answer a missing pod gets, and
operator-only `detail` never leaves this module for a tenant. Outputs are small JSON-shaped
dicts derived from reports, never raw cluster objects, and every string in them is on one line
(`flat`): a termination message or an annotation cannot start a line of its own in the
model's input or in an answer built from a check. A cluster error reaches a tenant as its kind
only; its text (server addresses) is for operators.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from triage import (
    Audience,
    ClusterSource,
    ForbiddenError,
    InvalidNameError,
    NotFoundError,
    SourceError,
    TriageReport,
    UnavailableError,
    validate_name,
    validate_namespace,
)
from triage.cluster.objects import labels, name_of
from triage.cluster.quantities import GPU, MIG_PREFIX, resources
from triage.layers.stacks.state import gpu_resources, is_gpu_node
from triage.render import one_line
from triage.verify.node import NodeVerification

Result = dict[str, Any]
PRODUCT_LABEL = "nvidia.com/gpu.product"


class Caller(Protocol):
    """Who is asking. `bot.core.policy.Viewer` satisfies it; so does `LocalOperator` for the CLI."""

    @property
    def operator(self) -> bool: ...

    def may_see(self, namespace: str) -> bool: ...


@dataclass(frozen=True)
class LocalOperator:
    """The CLI user: whoever holds the kubeconfig (or the snapshot) already sees everything."""

    operator: bool = True

    def may_see(self, namespace: str) -> bool:
        return True


class Backend(Protocol):
    """Where the checks read, one cluster per call: the `TriageService` the bot and the CLI
    share (`gpu_triage.service`), so `ask` reads the cluster it was asked about, with the
    engine settings everything else uses."""

    def report(self, *, cluster: str | None, namespace: str, name: str) -> TriageReport: ...

    def verify(self, *, cluster: str | None, node: str) -> NodeVerification: ...

    def source(self, cluster: str | None) -> ClusterSource: ...


# --- typed arguments (the tools' args_schema) ------------------------------------------------


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WhyPendingArgs(_Args):
    namespace: str = Field(description="the pod's namespace (a DNS-1123 label)")
    name: str = Field(description="pod name, or a Job/Deployment/StatefulSet/ReplicaSet name")


class VerifyNodeArgs(_Args):
    node: str = Field(description="node name")


class QuotaStatusArgs(_Args):
    namespace: str = Field(description="namespace whose GPU quota and queues to show")


class CapacityArgs(_Args):
    product: str | None = Field(
        default=None, description="GPU product label value (nvidia.com/gpu.product); None for all"
    )


# --- the checks ------------------------------------------------------------------------------


def not_found(*, namespace: str, name: str) -> Result:
    """The one answer for "no such pod", "no such namespace" and "not yours to see"."""
    return {"error": "not_found", "message": f"no pod or workload {name} in namespace {namespace}"}


def _error(kind: str, message: str) -> Result:
    return {"error": kind, "message": message}


def fault_kind(e: SourceError) -> str:
    """What kind of cluster fault `e` is, in words that name no server, user or file."""
    if isinstance(e, UnavailableError):
        return "unreachable or not answering"
    if isinstance(e, ForbiddenError):
        return "the bot lacks a permission"
    return "the operators have the details"


def flat(value: Any) -> Any:
    """`value` with every string in it on one line."""
    if isinstance(value, str):
        return one_line(value)
    if isinstance(value, dict):
        return {k: flat(v) for k, v in value.items()}
    if isinstance(value, list):
        return [flat(v) for v in value]
    return value


A = TypeVar("A")


def _flat(check: Callable[[Checks, A], Result]) -> Callable[[Checks, A], Result]:
    """A check whose result is `flat`."""

    @functools.wraps(check)
    def flattened(self: Checks, args: A) -> Result:
        result: Result = flat(check(self, args))
        return result

    return flattened


class Checks:
    """The checks for one caller in one cluster (None: the backend's default). Each returns a
    compact dict; none raises for user errors."""

    def __init__(self, *, caller: Caller, backend: Backend, cluster: str | None = None) -> None:
        self.caller, self.backend, self.cluster = caller, backend, cluster
        self.reports: list[TriageReport] = []  # every report produced, for the answer guard

    def _cluster_error(self, e: SourceError) -> Result:
        if self.caller.operator:
            return _error("cluster", str(e))
        return _error("cluster", f"the cluster could not be read ({fault_kind(e)})")

    @_flat
    def why_pending(self, args: WhyPendingArgs) -> Result:
        report = self.why_pending_report(args)
        if isinstance(report, dict):
            return report
        return report_digest(report, operator=self.caller.operator)

    def why_pending_report(self, args: WhyPendingArgs) -> TriageReport | Result:
        """The report itself (the CLI and Slack render it), or an error dict."""
        try:
            validate_namespace(args.namespace)
            validate_name(args.name, what="pod or workload name")
        except InvalidNameError as e:
            return _error("invalid_name", str(e))
        # Policy before the cluster: a foreign namespace is never even read.
        if not self.caller.may_see(args.namespace):
            return not_found(namespace=args.namespace, name=args.name)
        try:
            report = self.backend.report(
                cluster=self.cluster, namespace=args.namespace, name=args.name
            )
        except NotFoundError:
            return not_found(namespace=args.namespace, name=args.name)
        except SourceError as e:
            return self._cluster_error(e)
        self.reports.append(report)
        return report

    @_flat
    def verify_node(self, args: VerifyNodeArgs) -> Result:
        if not self.caller.operator:
            return _error("operator_only", "only operators can verify nodes")
        try:
            result = self.backend.verify(cluster=self.cluster, node=args.node)
        except InvalidNameError as e:
            return _error("invalid_name", str(e))
        except NotFoundError:
            return _error("not_found", f"no node named {args.node}")
        except SourceError as e:
            return self._cluster_error(e)
        return {
            "node": result.node,
            "passed": result.passed,
            "failing_layer": None if result.failing_layer is None else result.failing_layer.value,
            "driver_strategy": result.driver_strategy,
            "owner": None if result.owner is None else result.owner.team,
            "checks": [
                {"name": c.name, "status": c.status.value, "summary": c.summary}
                for c in result.checks
            ],
        }

    @_flat
    def quota_status(self, args: QuotaStatusArgs) -> Result:
        try:
            validate_namespace(args.namespace)
        except InvalidNameError as e:
            return _error("invalid_name", str(e))
        missing = {"error": "not_found", "message": f"no namespace {args.namespace}"}
        if not self.caller.may_see(args.namespace):
            return missing
        try:
            source = self.backend.source(self.cluster)
            if source.get("Namespace", args.namespace) is None:
                return missing
            quotas = source.objects("ResourceQuota", namespace=args.namespace)
            queues = source.objects("LocalQueue", namespace=args.namespace)
        except SourceError as e:
            return self._cluster_error(e)
        return {
            "namespace": args.namespace,
            "quotas": [_quota(q) for q in quotas],
            "local_queues": [
                {
                    "name": name_of(q),
                    "cluster_queue": (q.get("spec") or {}).get("clusterQueue"),
                    "pending": (q.get("status") or {}).get("pendingWorkloads"),
                    "admitted": (q.get("status") or {}).get("admittedWorkloads"),
                }
                for q in queues
            ],
        }

    @_flat
    def capacity(self, args: CapacityArgs) -> Result:
        """GPUs per product: capacity, allocatable, requested. Node names for operators only."""
        try:
            source = self.backend.source(self.cluster)
            nodes = [n for n in source.objects("Node") if is_gpu_node(n)]
            usage = source.node_usage()
        except SourceError as e:
            return self._cluster_error(e)
        rows: dict[str, Result] = {}
        for node in sorted(nodes, key=name_of):
            product = labels(node).get(PRODUCT_LABEL, "unknown")
            if args.product and args.product.lower() not in product.lower():
                continue
            row = rows.setdefault(
                product,
                {"product": product, "nodes": 0, "capacity": 0, "allocatable": 0, "requested": 0},
            )
            cap, alloc = gpu_resources(node, key="capacity"), gpu_resources(node)
            u = usage.get(name_of(node))
            used = u.requests if u is not None else {}
            row["nodes"] += 1
            row["capacity"] += _gpus(cap)
            row["allocatable"] += _gpus(alloc)
            row["requested"] += _gpus(used)
            if self.caller.operator:
                row.setdefault("node_names", []).append(name_of(node))
        for row in rows.values():
            row["free"] = max(0, row["allocatable"] - row["requested"])
        return {"products": list(rows.values())}


def _gpus(amounts: dict[str, int]) -> int:
    return sum(v for k, v in amounts.items() if k == GPU or k.startswith(MIG_PREFIX))


def _quota(q: dict[str, Any]) -> Result:
    status = q.get("status") or {}
    hard, used = resources(status.get("hard")), resources(status.get("used"))
    keep = sorted(k for k in hard if "nvidia.com/" in k or k in ("pods", "limits.memory"))
    return {
        "name": name_of(q),
        "items": {k: {"hard": hard[k], "used": used.get(k, 0)} for k in keep},
        "exhausted": [k for k in keep if used.get(k, 0) >= hard[k]],
    }


def report_digest(report: TriageReport, *, operator: bool) -> Result:
    """The report as compact JSON for a model or a tool caller, as much of it as the caller may
    read (`TriageReport.for_audience`: `detail` and operator steps only for operators)."""
    report = report.for_audience(Audience.of(operator=operator))
    out: Result = {
        "pod": f"{report.pod.namespace}/{report.pod.name}",
        "failing_layer": None if report.failing_layer is None else report.failing_layer.value,
        "headline": report.headline,
        "findings": [
            {
                "layer": f.layer.value,
                "status": f.status.value,
                "summary": f.summary,
                "evidence": list(f.evidence),
                **({"detail": list(f.detail)} if f.detail else {}),
            }
            for f in report.findings
        ],
        "owner": None if report.owner is None else report.owner.team,
        "remediation": list(report.operator_steps) + list(report.remediation),
    }
    if report.pod.node:
        out["node"] = report.pod.node
    if report.notes:
        out["notes"] = list(report.notes)
    flattened: Result = flat(out)
    return flattened
