"""What a report adds about the few nodes that block a pod, read when the pod is triaged.

A node's verdict is judged from the node and its stack's pods alone, and remembered while
they are unchanged; some answers need more, and only for the handful of nodes that block
this pod: the pods a driver upgrade waits for on the node (which jobs must finish first),
and, for a device plugin that runs but offers nothing, whether kubelet restarted after the
plugin started (its `Starting` event). Each is read for at most `SHOWN` nodes of a signal.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from triage.cluster.events import parse_time, sorted_events
from triage.cluster.objects import Obj, labels, name_of, ns_of, owner
from triage.cluster.quantities import pod_requests, wants_gpu
from triage.cluster.source import ReadFailedError
from triage.layers.base import Context
from triage.layers.upgrade import WAITS_FOR_PODS, selector_matches, upgrade_state
from triage.model import Layer
from triage.signals import Signal

SHOWN = 3
UPGRADE, UNREGISTERED = "driver.upgrade-in-progress", "device-plugin.not-registered"


def explain_nodes(ctx: Context, signals: list[Signal]) -> list[Signal]:
    """The signals, those about an upgrading node or an unregistered plugin with what holds
    them (evidence a tenant may read, names from other namespaces as operator detail)."""
    if not any(s.blocking and s.code in (UPGRADE, UNREGISTERED) for s in signals):
        return signals
    out = []
    for s in signals:
        if s.blocking and s.code in (UPGRADE, UNREGISTERED):
            evidence: list[str] = []
            detail: list[str] = []
            for node in list(s.nodes)[:SHOWN]:
                found = (
                    _upgrade_waits(ctx, node) if s.code == UPGRADE else _kubelet_restart(ctx, node)
                )
                evidence += found[0]
                detail += found[1]
            if evidence or detail:
                s = replace(s, evidence=(*s.evidence, *evidence), detail=(*s.detail, *detail))
        out.append(s)
    return out


def _node(ctx: Context, name: str) -> Obj | None:
    try:
        return ctx.source.get("Node", name)
    except ReadFailedError:
        return None


def _upgrade_waits(ctx: Context, node_name: str) -> tuple[list[str], list[str]]:
    """The pods a driver upgrade still waits for on the node: those its policy's selector
    picks (wait-for-jobs), or the GPU pods still there (pod deletion, drain)."""
    node = _node(ctx, node_name)
    state = upgrade_state(node) if node is not None else None
    up = state.vendor.driver_upgrade if state is not None else None
    if state is None or up is None or state.state not in WAITS_FOR_PODS:
        return [], []
    selector = _policy_selector(ctx, up.policy_kind, up.wait_selector)
    try:
        usage = ctx.source.node_usage()
    except ReadFailedError as e:
        ctx.note(f"pods on node {node_name} not read ({e})")
        return [], []
    use = usage.get(node_name)
    pods = []
    for ref in use.pods if use else ():
        ns, _, name = ref.partition("/")
        try:
            pod = ctx.source.get("Pod", name, namespace=ns)
        except ReadFailedError:
            pod = None
        if pod is not None and (pod.get("status") or {}).get("phase") in ("Running", "Pending"):
            pods.append(pod)
    if state.state == "wait-for-jobs-required" and selector:
        picked = [p for p in pods if selector_matches(selector, labels(p)) is not False]
        why = f"{up.policy}.waitForCompletion.podSelector {selector}"
    else:
        picked = [p for p in pods if wants_gpu(p, pod_requests(p))]
        why = "pods using its GPUs"
    if not picked:
        return [f"node {node_name}: no pod the upgrade waits for is left on it ({why})"], []
    evidence, detail = [], []
    mine = [p for p in picked if ns_of(p) == ctx.target.namespace]
    for p in mine[:SHOWN]:
        evidence.append(f"node {node_name}: the upgrade waits for {_workload(p)} to finish ({why})")
    others = [p for p in picked if ns_of(p) != ctx.target.namespace]
    if others:
        evidence.append(
            f"node {node_name}: the upgrade waits for {len(others)} pod(s) of other namespaces "
            f"to finish ({why})"
        )
        detail += [f"node {node_name}: upgrade waits for {_workload(p)}" for p in others[:SHOWN]]
    return evidence, detail


def _workload(pod: Obj) -> str:
    ref = owner(pod)
    kind, name = ref if ref is not None else ("Pod", name_of(pod))
    if kind == "Pod":
        return f"pod {ns_of(pod)}/{name_of(pod)}"
    return f"{kind} {ns_of(pod)}/{name} (pod {name_of(pod)})"


def _policy_selector(ctx: Context, kind: str, path: tuple[str, ...]) -> str:
    if not kind or not path:
        return ""
    for policy in ctx.read(kind, None, layer=Layer.DRIVER):
        if ((policy.get("status") or {}).get("state")) == "ignored":
            continue
        value: object = policy
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return str(value or "")
    return ""


def _kubelet_restart(ctx: Context, node_name: str) -> tuple[list[str], list[str]]:
    """When kubelet last started on the node (its `Starting` event), against when the plugin
    pod started: a plugin started before it must register again, and has not."""
    try:
        raw = ctx.source.events_for(namespace="default", kind="Node", name=node_name)
    except ReadFailedError as e:
        ctx.note(f"events of node {node_name} not read ({e})")
        return [], []
    starts = [e for e in sorted_events(raw) if e.reason == "Starting" and "kubelet" in e.message]
    if not starts or starts[0].last_seen is None:
        return [
            f"node {node_name}: no kubelet Starting event left (events expire after about an "
            "hour): when kubelet last restarted is not known"
        ], []
    at = starts[0].last_seen
    started = _plugin_started(ctx, node_name)
    when = at.strftime("%Y-%m-%d %H:%M:%S UTC")
    if started is not None and started < at:
        return [
            f"node {node_name}: kubelet restarted at {when} (event Starting: "
            f"{starts[0].message}), after the device plugin started "
            f"({started.strftime('%Y-%m-%d %H:%M:%S UTC')}): the plugin has not registered "
            "with the new kubelet"
        ], []
    return [f"node {node_name}: kubelet last started at {when} (event Starting)"], []


def _plugin_started(ctx: Context, node_name: str) -> datetime | None:
    for pod in ctx.view.pods(node_name, "device-plugin"):
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            since = parse_time(((cs.get("state") or {}).get("running") or {}).get("startedAt"))
            if since is not None:
                return since
    return None
