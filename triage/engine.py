"""The triage engine: runs the layer checks for one pod and applies the root-cause rule.

Root-cause rule (design brief): the failing layer is the lowest layer that explains why *this*
pod is not running on the nodes it could otherwise use. Problems on nodes the pod could never
use are side findings. Object state decides; events add evidence when they still exist.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from functools import partial
from itertools import compress, count
from operator import is_not

from triage.cluster.events import Event, parse_time, sorted_events
from triage.cluster.memo import IdentityMemo
from triage.cluster.objects import Obj, labels, meta, name_of, ns_of
from triage.cluster.quantities import gpu_requests, pod_requests
from triage.cluster.source import ClusterSource, ForbiddenError, SourceError
from triage.cluster.usage import NodeUsage
from triage.config import EngineConfig
from triage.layers.bound import check_scheduled_pod, terminal_headline
from triage.layers.node import NodeHealth, assess_node
from triage.layers.quota import QuotaInput, run_quota_checks
from triage.layers.scheduling.autoscaler import STATUS_NAME, STATUS_NS, ScalingReads
from triage.layers.scheduling.dra import (
    DraView,
    devices_of,
    node_block,
    pod_claims,
    requests_of,
    reserved_for_others,
)
from triage.layers.scheduling.filters import PodFilters, needs_filters, pods_on
from triage.layers.scheduling.placement import DraCheck, Placement
from triage.layers.scheduling.reasons import WAITING, placement_summary, scheduling_signals
from triage.layers.scheduling.scheduler import latest_failed_scheduling
from triage.layers.stacks.view import StackView, load_view
from triage.model import Layer, TriageReport
from triage.names import validate_name, validate_namespace
from triage.playbooks import Playbook, load_playbook
from triage.signals import Signal, Unknown
from triage.target import Target, resolve
from triage.verdict import assemble


def triage(
    source: ClusterSource,
    *,
    namespace: str,
    name: str,
    config: EngineConfig | None = None,
    playbook: Playbook | None = None,
    now: datetime | None = None,
) -> TriageReport:
    """Explain why the pod (or workload) `namespace/name` is not running.

    Raises `InvalidNameError` for names Kubernetes would reject, `NotFoundError` when neither a
    pod nor a workload of that name exists (or the namespace does not), and other
    `SourceError`s when the cluster cannot be read at all.
    """
    validate_namespace(namespace)
    validate_name(name, what="pod or workload name")
    config = config or EngineConfig()
    playbook = playbook or load_playbook()
    target = resolve(source, namespace=namespace, name=name)
    as_of = now or getattr(source, "as_of", None) or datetime.now(UTC)
    run = _Run(source=source, config=config, target=target, now=as_of)
    return run.report(playbook=playbook, now=now)


class _Run:
    def __init__(
        self, *, source: ClusterSource, config: EngineConfig, target: Target, now: datetime
    ) -> None:
        self.source, self.config, self.target, self.now = source, config, target, now
        memo = getattr(source, "memo", None)
        self.memo: IdentityMemo = memo if isinstance(memo, IdentityMemo) else IdentityMemo()
        self._minute = int(now.timestamp() // 60)
        self._signatures = self.memo.table("node-signatures", limit=10_000)
        self._health_table = self.memo.table(f"node-health/{config.node_join_grace_minutes}")
        self._last_nodes = self.memo.table(f"node-list/{config.node_join_grace_minutes}")
        self.signals: list[Signal] = []
        self.unknowns: list[Unknown] = []
        self.notes: list[str] = []
        self.headline: str | None = None
        self.ok_summaries: dict[Layer, str] = {}
        self._view: StackView | None = None

    # --- reading, with a missing permission turning into an 'unknown' layer ---------------

    def read(self, kind: str, namespace: str | None, *, layer: Layer) -> list[Obj]:
        try:
            return self.source.objects(kind, namespace=namespace)
        except ForbiddenError as e:
            self._unknown(layer, str(e))
            return []

    def get(self, kind: str, name: str, namespace: str | None, *, layer: Layer) -> Obj | None:
        try:
            return self.source.get(kind, name, namespace=namespace)
        except ForbiddenError as e:
            self._unknown(layer, str(e))
            return None

    def _unknown(self, layer: Layer, reason: str) -> None:
        if all(u.reason != reason for u in self.unknowns):
            self.unknowns.append(Unknown(layer, reason))

    def events(self, kind: str, name: str) -> list[Event]:
        try:
            raw = self.source.events_for(namespace=self.target.namespace, kind=kind, name=name)
        except ForbiddenError as e:
            note = f"events not read ({e})"
            if note not in self.notes:
                self.notes.append(note)
            return []
        return sorted_events(raw)

    # --- the run ----------------------------------------------------------------------------

    def report(self, *, playbook: Playbook, now: datetime | None) -> TriageReport:
        t = self.target
        pod = t.pod
        pod_events = self.events("Pod", name_of(pod)) if pod is not None else []
        workload_events: list[Event] = []
        if pod is None:
            for w in t.workloads:
                workload_events.extend(self.events(str(w.get("kind")), name_of(w)))
        subject = t.subject
        phase = ((pod or {}).get("status") or {}).get("phase")

        if pod is not None and phase in ("Succeeded", "Failed") and not self._failed_admission(pod):
            self.headline = terminal_headline(pod)
        elif pod is not None and (pod.get("spec") or {}).get("nodeName"):
            self._scheduled(pod, pod_events)
        elif subject is not None:
            self._unscheduled(subject, pod_events, blocking=pod is not None)

        quota = QuotaInput(
            namespace=t.namespace,
            pod=pod,
            template=t.template,
            workloads=t.workloads,
            workload_events=workload_events,
            read=lambda kind, ns: self.source.objects(kind, namespace=ns),
        )
        run_quota_checks(quota)
        if any(s.blocking for s in quota.signals):
            # A queue holding the pod explains the scheduler's refusal (Volcano reports its
            # queue decisions as FailedScheduling): that message is evidence, not a cause.
            for s in self.signals:
                if s.code == "scheduling.scheduler-reported":
                    s.blocking = False
        self.signals.extend(quota.signals)
        self.unknowns.extend(quota.unknowns)
        if pod is None:
            self._podless_headline()
        elif not any(s.blocking for s in self.signals):
            joining = next(
                (s for s in self.signals if s.code in ("device-plugin.node-joining", *WAITING)),
                None,
            )
            if joining is not None:
                what = joining.summary
                what = what if what.startswith("waiting") else f"waiting: {what}"
                self.headline = f"not blocked, {what}{self._waited(pod)}"
        view = self._stack_view()
        return assemble(
            source=self.source,
            target=t,
            signals=self.signals,
            unknowns=self.unknowns,
            notes=self.notes,
            headline=self.headline,
            playbook=playbook,
            config=self.config,
            node_labels=self._node_labels,
            ok_summaries=self.ok_summaries,
            now=now,
            gpu_stack=view.describe(),
            operator_namespace=view.namespace,
            stack_values=view.playbook_values(),
        )

    def _waited(self, pod: Obj) -> str:
        """How long the pod has waited, to set beside how long its node has been coming up."""
        created = parse_time(meta(pod).get("creationTimestamp"))
        if created is None:
            return ""
        minutes = max(0, int((self.now - created).total_seconds() // 60))
        return f"; the pod has waited {minutes} min"

    def _failed_admission(self, pod: Obj) -> bool:
        return (pod.get("status") or {}).get("reason") == "UnexpectedAdmissionError"

    def _stack_view(self) -> StackView:
        """The cluster's GPU stacks, remembered until a GPU component or its pods change."""
        if self._view is None:

            def read(kind: str, namespace: str | None) -> list[Obj] | None:
                try:
                    return self.source.objects(kind, namespace=namespace)
                except ForbiddenError as e:
                    self.unknowns.append(Unknown(Layer.DRIVER, str(e)))
                    return None

            self._view = load_view(read, override=self.config.operator_namespace, memo=self.memo)
        return self._view

    def _assess(self, node: Obj, view: StackView, *, name: str | None = None) -> NodeHealth:
        """Node health, remembered while the node and the operator view are the same objects.

        The operator view is itself remembered until an operator pod or the ClusterPolicy
        changes. The minute is part of the check for the few nodes whose verdict depends on
        the clock (a GPU node without GPUs: joining, or late).
        This runs for every node on every triage, hence the hand-written identity check.
        """
        minute = self._minute
        table = self._health_table
        name = name or name_of(node)
        hit = table.get(name)
        if hit is not None and hit[0] is node and (hit[2] == minute or not hit[3].clock):
            if hit[1] is view:
                return hit[3]  # type: ignore[no-any-return]
            # Some operator pod somewhere changed (a new view): this node's verdict still
            # holds if its own operator pods and the cluster-wide flags did not change.
            pods = view.node_pods(name)
            if hit[1].flags == view.flags and _same(hit[4], pods):
                table[name] = (node, view, minute, hit[3], pods)
                return hit[3]  # type: ignore[no-any-return]
        health = assess_node(
            node, view, now=self.now, grace_minutes=self.config.node_join_grace_minutes
        )
        # Equal signatures become one object, so a node pool's nodes match by identity.
        health.signature = self._signatures.setdefault(health.signature, health.signature)
        table[name] = (node, view, minute, health, view.node_pods(name))
        return health

    def _healths(self, nodes: list[Obj], view: StackView) -> list[NodeHealth]:
        """The health of every node, in order: the per-triage pass over the whole cluster.

        A watch replaces a changed node's object and leaves the others, so when the list has
        the same length as last time, comparing it with the last one by identity (in C, no
        node is touched) finds the few nodes to reassess.
        """
        last = self._last_nodes.get("last")
        minute = self._minute
        if last is not None and last[2] is view and len(last[0]) == len(nodes):
            healths: list[NodeHealth] = list(last[1])
            changed = set(compress(count(), map(is_not, last[0], nodes)))
            if last[3] != minute:
                changed.update(i for i, h in enumerate(healths) if h.clock)
            for i in changed:
                healths[i] = self._assess(nodes[i], view)
        else:
            # The memo check of `_assess` inlined for the common case.
            table, assess = self._health_table, self._assess
            healths = []
            for node in nodes:
                name = node["metadata"]["name"]
                hit = table.get(name)
                if (
                    hit is not None
                    and hit[0] is node
                    and hit[1] is view
                    and (hit[2] == minute or not hit[3].clock)
                ):
                    healths.append(hit[3])
                else:
                    healths.append(assess(node, view, name=name))
        self._last_nodes["last"] = (nodes, healths, view, minute)
        return healths

    def _node_labels(self, node: str) -> dict[str, str]:
        try:
            obj = self.source.get("Node", node)
        except ForbiddenError:
            return {}
        return labels(obj) if obj else {}

    def _scheduled(self, pod: Obj, events: list[Event]) -> None:
        node_name = str((pod.get("spec") or {}).get("nodeName"))
        node = self.get("Node", node_name, None, layer=Layer.DRIVER)
        health: NodeHealth | None = None
        if node is not None:
            health = self._assess(node, self._stack_view())
        runtime_classes: list[Obj] | None = None
        if (pod.get("spec") or {}).get("runtimeClassName"):
            runtime_classes = self.read("RuntimeClass", None, layer=Layer.DRIVER)
        self.signals.extend(
            check_scheduled_pod(
                pod=pod, events=events, health=health, runtime_classes=runtime_classes
            )
        )
        if not any(s.blocking for s in self.signals):
            self.headline = terminal_headline(pod)

    def _unscheduled(self, pod: Obj, events: list[Event], *, blocking: bool) -> None:
        requests = pod_requests(pod)
        nodes = self.read("Node", None, layer=Layer.SCHEDULING)
        try:
            usage = self.source.node_usage()
        except ForbiddenError as e:
            self.unknowns.append(Unknown(Layer.SCHEDULING, str(e)))
            usage = {}
        view = self._stack_view()
        healths = self._healths(nodes, view)
        dra_check, dra_nodes = self._dra(pod, view)
        if dra_nodes is not None:
            # A node whose DRA kubelet plugin is down publishes nothing, yet the pod could use
            # it: it stays a candidate, and its missing ResourceSlice is the device-plugin layer.
            dra_nodes |= {n for n, roles in view.pods_by_node.items() if "dra-plugin" in roles}
        filters = self._filters(pod, events, nodes, usage)
        pod_level = filters.pod_level() if filters is not None else []
        placement = Placement(
            pod=pod, requests=requests, dra=dra_check, only_nodes=dra_nodes, filters=filters
        )
        evaluation = placement.evaluate(nodes, healths, usage)
        signals = pod_level + scheduling_signals(
            pod=pod,
            placement=placement,
            nodes=evaluation,
            gpu=gpu_requests(pod),
            events=events,
            now=self.now,
            reads=ScalingReads(
                victims=self._victims(pod, usage),
                autoscalers=self._autoscalers,
                karpenter=lambda kind: self.read(kind, None, layer=Layer.SCHEDULING),
                ca_status=self._ca_status,
            ),
        )
        if pod_level:  # it explains the scheduler's refusal: the message is evidence, not a cause
            signals = [s for s in signals if s.code != "scheduling.scheduler-reported"]
        summary = placement_summary(evaluation)
        if summary and not pod_level:
            self.ok_summaries[Layer.SCHEDULING] = summary
        if not blocking:  # no pod exists yet: admission decides; placement is a look-ahead
            for s in signals:
                s.blocking = False
                s.summary = f"once created: {s.summary}"
        self.signals.extend(signals)

    def _filters(
        self, pod: Obj, events: list[Event], nodes: list[Obj], usage: Mapping[str, NodeUsage]
    ) -> PodFilters | None:
        """The volume, port, spread and pod-affinity filters, when any applies to the pod.
        Running pods' anti-affinity is looked for (a scan of every pod) only when the
        scheduler reports it."""
        sched = latest_failed_scheduling(pod, events)
        existing = sched is not None and "existing pods anti-affinity" in sched[0]
        if not existing and not needs_filters(pod):
            return None
        return PodFilters(
            pod,
            get=partial(self.get, layer=Layer.SCHEDULING),
            read=lambda kind, ns: self.read(kind, ns, layer=Layer.SCHEDULING),
            events=self.events,
            nodes=nodes,
            usage=usage,
            existing_anti_affinity=existing,
        )

    def _victims(self, pod: Obj, usage: Mapping[str, NodeUsage]) -> list[tuple[str, str]]:
        """Terminating lower-priority pods on the node the scheduler nominated for `pod`, as
        (what a tenant may read, operator-only name)."""
        node = (pod.get("status") or {}).get("nominatedNodeName")
        if not node:
            return []
        mine = int((pod.get("spec") or {}).get("priority") or 0)
        out = []
        for p in pods_on(str(node), usage, partial(self.get, layer=Layer.SCHEDULING)):
            if int((p.get("spec") or {}).get("priority") or 0) < mine and meta(p).get(
                "deletionTimestamp"
            ):
                ref = f"{ns_of(p)}/{name_of(p)}"
                mine_ns = ns_of(p) == self.target.namespace
                out.append((ref, "") if mine_ns else ("a pod in another namespace", ref))
        return out

    def _ca_status(self) -> Obj | None:
        """cluster-autoscaler's status ConfigMap, if it exists and may be read."""
        try:
            return self.source.get("ConfigMap", STATUS_NAME, namespace=STATUS_NS)
        except SourceError as e:
            self.notes.append(f"cluster-autoscaler status not read ({e})")
            return None

    def _autoscalers(self) -> list[str]:
        """Node autoscalers running in the cluster, as namespace/Deployment."""
        return [
            f"{meta(d).get('namespace')}/{name_of(d)}"
            for d in self.read("Deployment", None, layer=Layer.SCHEDULING)
            if any(k in name_of(d) for k in ("cluster-autoscaler", "karpenter"))
            and ((d.get("status") or {}).get("readyReplicas") or 0) > 0
        ]

    def _dra(self, pod: Obj, view: StackView) -> tuple[DraCheck | None, set[str] | None]:
        """A per-node check of the pod's unallocated ResourceClaims, and the nodes that publish
        devices for them (None: no restriction). (None, None) for a pod without claims."""
        if not (pod.get("spec") or {}).get("resourceClaims"):
            return None, None
        ns = self.target.namespace
        claims_here = self.read("ResourceClaim", ns, layer=Layer.SCHEDULING)
        dra = DraView(
            classes={
                name_of(c): c for c in self.read("DeviceClass", None, layer=Layer.DEVICE_PLUGIN)
            },
            devices=devices_of(self.read("ResourceSlice", None, layer=Layer.DEVICE_PLUGIN)),
            claims=self.read("ResourceClaim", None, layer=Layer.SCHEDULING),
        )
        for node, roles in view.pods_by_node.items():
            if "dra-plugin" in roles:
                dra.plugin_pods[node] = roles["dra-plugin"]
        requests = []
        for ref, claim, how in pod_claims(pod, claims_here):
            if claim is None:
                self.signals.append(
                    Signal(
                        Layer.SCHEDULING,
                        "scheduling.dra-claim-missing",
                        f"the pod's ResourceClaim {ref} ({how}) does not exist yet",
                        evidence=[f"pod spec.resourceClaims names {how}"],
                    )
                )
                continue
            others = reserved_for_others(claim, pod)
            allocation = (claim.get("status") or {}).get("allocation")
            if allocation:
                results = ((allocation.get("devices") or {}).get("results")) or []
                devs = ", ".join(f"{r.get('pool')}/{r.get('device')}" for r in results)
                line = f"ResourceClaim {ref} is allocated ({devs or 'no devices listed'})"
                if others:
                    self.signals.append(
                        Signal(
                            Layer.SCHEDULING,
                            "scheduling.dra-claim-in-use",
                            f"ResourceClaim {ref} is allocated and reserved for pod(s) {', '.join(others)}",
                            evidence=[line],
                        )
                    )
                continue
            requests.extend(requests_of(claim))
        if not requests:
            return None, None
        allocated = dra.allocated
        return (lambda node: node_block(node, requests, dra, allocated)), dra.nodes_with_devices(
            requests
        )

    def _podless_headline(self) -> None:
        t = self.target
        if any(s.blocking for s in self.signals):
            return
        top = t.workloads[-1] if t.workloads else {}
        spec = top.get("spec") or {}
        if spec.get("replicas") == 0:
            self.headline = f"{t.kind} {t.name} is scaled to zero replicas: nothing to schedule"
        elif t.kind == "Job" and _job_done(top):
            self.headline = f"Job {t.name} has finished: no pods are needed"
        else:
            self.headline = (
                f"{t.kind} {t.name} has no pods and no blocking signal was found; "
                "check its controller's events"
            )


def _job_done(job: Obj) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def _same(a: tuple[Obj, ...], b: tuple[Obj, ...]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
