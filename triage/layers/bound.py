"""A pod that already has a node: why does it not run there?

Once scheduled, a pod is held by its node: the node not Ready, its accelerator driver down or
the container failing to start under its vendor's container runtime (driver), or kubelet
rejecting it at admission. Kubelet's admission repeats the scheduler's checks with its own
counts: a device it cannot allocate (`UnexpectedAdmissionError`, `OutOf<device>`) or cannot
align on one NUMA node (`TopologyAffinityError`) is the device plugin's layer; CPU, memory,
pod slots or node affinity it judges otherwise than the scheduler did (`OutOfcpu`,
`NodeAffinity`) are placement. Anything else is not a layer problem.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from triage.cluster.events import Event
from triage.cluster.objects import Obj, container_states, labels, name_of, pod_problem
from triage.cluster.quantities import is_extended, pod_requests, wants_gpu
from triage.cluster.source import ReadFailedError
from triage.layers.base import CheckResult, Context
from triage.layers.kubelet import affinity_mismatch, allocate_cause, topology_shown
from triage.layers.node import NodeHealth
from triage.layers.node_context import explain_nodes
from triage.layers.node_verdict import NodeVerdict
from triage.layers.runtime import CODES, FIX, GENERIC, MEANING, cause_of, mode_of
from triage.layers.stacks.components import pod_component
from triage.layers.stacks.operator import active_policy
from triage.model import Layer, NodeEntry
from triage.signals import Signal
from triage.vendors import NVIDIA, VENDORS, Vendor


def _runtime_error(text: str) -> Vendor | None:
    """The accelerator vendor whose container runtime prints `text` failing, if one does."""
    return next((v for v in VENDORS if v.runtime_errors.search(text)), None)


START_REASONS = ("Failed", "FailedCreatePodSandBox", "FailedStart", "BackOff")


def on_node(pod: Obj | None) -> bool:
    """Whether the pod is past scheduling: finished (other than rejected at admission), or
    bound to a node. Scheduling has nothing to say about such a pod."""
    if pod is None:
        return False
    return _finished(pod) or bool((pod.get("spec") or {}).get("nodeName"))


def _finished(pod: Obj) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") in ("Succeeded", "Failed") and rejection(pod) is None


# Kubelet's admission reasons that are not `OutOf<resource>` (pkg/kubelet/lifecycle and the
# admit handlers): the device manager's, the Topology Manager's, the scheduler's predicates it
# runs again, and the node shutting down.
DEVICE_REJECTIONS = ("UnexpectedAdmissionError", "TopologyAffinityError")
REJECTIONS = (*DEVICE_REJECTIONS, "NodeAffinity", "NodeName", "NodePorts", "TaintToleration",
              "PodOSSelectorNodeLabelDoesNotMatch", "PodOSNotSupported", "NodeShutdown",
              "UnexpectedPredicateFailureType", "InvalidNodeInfo")  # fmt: skip


def rejection(pod: Obj) -> tuple[str, str] | None:
    """Kubelet's reason and message when it rejected the pod at admission (the pod failed
    without running: "Pod was rejected: …"), else None."""
    status = pod.get("status") or {}
    if status.get("phase") != "Failed":
        return None
    reason, message = str(status.get("reason") or ""), str(status.get("message") or "")
    rejected = message.startswith("Pod was rejected") or reason in REJECTIONS
    if not (rejected or reason.startswith("OutOf")):
        return None
    return reason, " ".join(message.split())


def check(ctx: Context) -> CheckResult:
    """The pod's own node: the driver, the runtime and kubelet's device admission there."""
    pod = ctx.target.pod
    if pod is None or not on_node(pod):
        return CheckResult()
    if _finished(pod):
        return CheckResult(headline=terminal_headline(pod))
    # Pods on a node are few and their node's state moves (a driver restarting, GPUs joining):
    # a sweep triages them afresh every time.
    ctx.volatile()
    spec = pod.get("spec") or {}
    node = ctx.get("Node", str(spec.get("nodeName")), None, layer=Layer.DRIVER)
    health = ctx.healths.assess(node, ctx.view) if node is not None else None
    runtime_classes = None  # not read, or could not be: no "RuntimeClass missing" then
    if spec.get("runtimeClassName"):
        runtime_classes = ctx.try_read("RuntimeClass", None, layers=(Layer.DRIVER,))
    signals = check_scheduled_pod(
        pod=pod, events=ctx.pod_events, health=health, runtime_classes=runtime_classes,
        runtime=lambda: _runtime_context(ctx, str(spec.get("nodeName"))),
        node_labels=labels(node) if node is not None else None,
    )  # fmt: skip
    signals = explain_nodes(ctx, signals)
    headline = None if any(s.blocking for s in signals) else terminal_headline(pod)
    name = str(spec.get("nodeName"))
    return CheckResult(signals=signals, headline=headline, nodes=lambda: [_own_node(name, signals)])


@dataclass(frozen=True)
class RuntimeContext:
    """What a container start failure is judged with: who manages the node's driver, its
    toolkit pod, and the operator's policy (for the CDI settings)."""

    managed: bool  # the driver runs in a pod of the stack (else the host provides it)
    toolkit: str = ""  # "namespace/name" of the node's container toolkit pod
    policy: Obj | None = None


def _runtime_context(ctx: Context, node: str) -> RuntimeContext:
    view = ctx.view
    toolkit = next(iter(view.pods(node, "toolkit")), None)
    obj = ctx.get("Node", node, None, layer=Layer.DRIVER)
    plan = view.plan(obj) if obj is not None else None
    managed = bool(view.pods(node, "driver")) or bool(plan and plan.role("driver").serving)
    try:
        policies = ctx.source.objects("ClusterPolicy") if view.installed else []
    except ReadFailedError as e:
        ctx.note(f"ClusterPolicy not read ({e})")
        policies = []
    ref = (
        f"{(toolkit.get('metadata') or {}).get('namespace')}/{name_of(toolkit)}" if toolkit else ""
    )
    return RuntimeContext(managed, ref, active_policy(policies))


def _own_node(name: str, signals: list[Signal]) -> NodeEntry:
    """The pod's own node, the one node that matters once it is bound."""
    stop = next((s for s in signals if s.blocking), None)
    if stop is None:
        return NodeEntry(name=name, usable=True, eligible=True)
    return NodeEntry(name=name, usable=False, eligible=True, layer=stop.layer, reason=stop.code,
                     detail=stop.summary, blocking=stop.pod or None)  # fmt: skip


def _runtime_errors(pod: Obj, events: list[Event]) -> tuple[list[str], Vendor]:
    """What the pod's containers and events say of a vendor's runtime failing, and which."""
    out = []
    vendors: list[Vendor] = []
    for name, cs in container_states(pod):
        for state_key in ("state", "lastState"):
            state = cs.get(state_key) or {}
            for sub in ("waiting", "terminated"):
                msg = str((state.get(sub) or {}).get("message") or "")
                vendor = _runtime_error(msg)
                if vendor is not None:
                    vendors.append(vendor)
                    reason = (state.get(sub) or {}).get("reason", sub)
                    out.append(f"container {name} {reason}: {' '.join(msg.split())[:400]}")
    for ev in events:
        vendor = _runtime_error(ev.message) if ev.reason in START_REASONS else None
        if vendor is not None:
            vendors.append(vendor)
            out.append(str(ev))
    return out, (vendors[0] if vendors else NVIDIA)


def check_scheduled_pod(
    *,
    pod: Obj,
    events: list[Event],
    health: NodeHealth | None,
    runtime_classes: list[Obj] | None,
    runtime: Callable[[], RuntimeContext] | None = None,
    node_labels: dict[str, str] | None = None,
) -> list[Signal]:
    node = str((pod.get("spec") or {}).get("nodeName"))
    status = pod.get("status") or {}
    signals: list[Signal] = []
    admission = [str(e) for e in events if e.reason == "UnexpectedAdmissionError"]
    rejected = rejection(pod)
    if status.get("reason") == "UnexpectedAdmissionError" or admission:
        msg = " ".join(str(status.get("message") or "").split())
        said = msg or next(
            (e.message for e in events if e.reason == "UnexpectedAdmissionError"), ""
        )
        why, values = allocate_cause(said)
        signals.append(
            Signal(
                Layer.DEVICE_PLUGIN,
                "device-plugin.admission-error",
                f"kubelet on {node} rejected the pod (UnexpectedAdmissionError): {why}",
                evidence=[f"pod status UnexpectedAdmissionError: {msg}"] if msg else admission[:1],
                nodes=[node],
                values=values,
            )
        )
    elif rejected is not None:
        signals.append(_rejected(node, *rejected, pod=pod, node_labels=node_labels))
    rc = (pod.get("spec") or {}).get("runtimeClassName")
    if rc and runtime_classes is not None and not any(name_of(r) == rc for r in runtime_classes):
        signals.append(
            Signal(
                Layer.DRIVER,
                "driver.runtimeclass-missing",
                f"the pod on node {node} asks for RuntimeClass {rc}, which does not exist",
                evidence=[
                    f"pod spec.runtimeClassName: {rc}; cluster RuntimeClasses: "
                    + (", ".join(sorted(name_of(r) for r in runtime_classes)) or "none")
                ],
                nodes=[node],
            )
        )
    stack_role = _stack_role(pod)  # the stack's own pods: driver, plugin, validator, exporter
    errors, vendor = _runtime_errors(pod, events) if stack_role is None else ([], NVIDIA)
    if errors:
        signals.append(_start_failed(pod, node, vendor, errors, health, runtime))
    if health is None:
        return signals
    not_ready = health.driver.code == "driver.node-not-ready"
    if stack_role is not None and rejected is None and not not_ready:
        return signals + _stack_pod(pod, node, stack_role, health)
    if not health.driver.ok and (wants_gpu(pod, pod_requests(pod)) or not_ready or errors):
        # a pod that uses no accelerator is held by its node's accelerator driver only when
        # its container fails in the vendor's runtime too
        stuck = bool(errors) or not_ready
        signals.append(
            _node_signal(Layer.DRIVER, health.driver, node, stuck or pod_problem(pod) is not None)
        )
    return signals


def _start_failed(pod: Obj, node: str, vendor: Vendor, errors: list[str],
                  health: NodeHealth | None, runtime: Callable[[], RuntimeContext] | None
                  ) -> Signal:  # fmt: skip
    """A container that cannot start in the vendor's runtime: the cause its words name, the
    node's toolkit mode and who manages its driver, and the fix that follows."""
    cause = cause_of(vendor, errors)
    head = (
        f"the pod is on node {node} but its container cannot start with the {vendor.name} runtime"
    )
    if cause is None:
        return Signal(Layer.DRIVER, GENERIC, head, evidence=errors[:4], nodes=[node])
    found = runtime() if runtime is not None else RuntimeContext(managed=False)
    mode, why = mode_of(vendor, pod=pod, texts=errors, cause=cause, policy=found.policy)
    who = "operator" if found.managed else "host"
    driver = "managed by the GPU stack's driver pod" if found.managed else "installed on the host"
    stack = f" ({health.stack})" if health is not None and health.stack else ""
    evidence = [
        *errors[:3],
        f"node {node}: toolkit mode {mode}" + (f" ({'; '.join(why)})" if why else ""),
        f"node {node}: driver {driver}{stack}",
    ]
    if found.toolkit:
        evidence.append(f"node {node}: container toolkit pod {found.toolkit}")
    values = {"toolkit_mode": mode, "fix": FIX[(cause, who)]}
    if found.toolkit:
        ns, _, name = found.toolkit.partition("/")
        values |= {"component_namespace": ns, "component_pod": name}
    meaning = MEANING[cause].format(vendor=vendor.name)
    return Signal(
        Layer.DRIVER, CODES[cause], f"{head}: {meaning}; fix: {FIX[(cause, who)]}",
        evidence=evidence, nodes=[node], values=values,
    )  # fmt: skip


def _node_signal(layer: Layer, verdict: NodeVerdict, node: str, blocking: bool) -> Signal:
    return Signal(
        layer, verdict.code, verdict.text, blocking=blocking, evidence=[verdict.text],
        detail=verdict.detail, nodes=[node], pod=verdict.pod, values=verdict.values,
    )  # fmt: skip


def _stack_pod(pod: Obj, node: str, role: str, health: NodeHealth) -> list[Signal]:
    """A pod of the accelerator stack itself that does not run: the lowest failing layer of
    its node (its driver, then its device plugin, which the stack's other pods wait for), else
    its own failure at the layer its role serves."""
    if pod_problem(pod) is None:
        return []
    if not health.driver.ok:
        return [_node_signal(Layer.DRIVER, health.driver, node, True)]
    if not health.plugin.ok and role not in ("driver", "toolkit"):
        return [_node_signal(Layer.DEVICE_PLUGIN, health.plugin, node, True)]
    own = _component_failing(pod, node, role)
    return [own] if own is not None else []


# What a failing component pod of an accelerator stack stops: the layer and the code.
_ROLE_SIGNAL = {
    "driver": (Layer.DRIVER, "driver.pod-failing"),
    "toolkit": (Layer.DRIVER, "driver.toolkit-failing"),
    "validator": (Layer.DRIVER, "driver.validation-failed"),
    "device-plugin": (Layer.DEVICE_PLUGIN, "device-plugin.pod-failing"),
    "gfd": (Layer.DEVICE_PLUGIN, "device-plugin.gfd-down"),
    "dra-plugin": (Layer.DEVICE_PLUGIN, "device-plugin.pod-failing"),
}


def _stack_role(pod: Obj) -> str | None:
    """The pod's role in an accelerator stack ("driver", "device-plugin", "other", ...)."""
    found = pod_component(pod)
    return found[1] if found is not None else None


def _stack_vendor(pod: Obj) -> dict[str, str]:
    """The vendor of the stack the pod belongs to, as a playbook value."""
    found = pod_component(pod)
    vendor = next((v for v in VENDORS if found and found[0] in v.stack_titles), None)
    return {"vendor": vendor.name} if vendor is not None else {}


def _component_failing(pod: Obj, node: str, role: str) -> Signal | None:
    """A stack component that fails on a node whose driver and plugin are otherwise fine: its
    own failure, at the layer its role serves (None for one that serves none: an exporter)."""
    problem = pod_problem(pod)
    if problem is None or role not in _ROLE_SIGNAL:
        return None
    layer, code = _ROLE_SIGNAL[role]
    ref = f"{(pod.get('metadata') or {}).get('namespace')}/{name_of(pod)}"
    return Signal(
        layer, code, f"pod {name_of(pod)} is the {role} of its accelerator stack on node {node}, "
        f"and it is failing: {pod_problem(pod, messages=False)}",
        evidence=[f"pod {ref}: {' '.join(problem.split())[:400]}"], nodes=[node], pod=ref,
        values=_stack_vendor(pod),
    )  # fmt: skip


def _rejected(node: str, reason: str, message: str, *, pod: Obj,
              node_labels: dict[str, str] | None) -> Signal:  # fmt: skip
    """Kubelet's admission refusal, in the layer that decides it."""
    evidence = [f"pod status {reason}: {message}" if message else f"pod status {reason}"]
    resource = reason.removeprefix("OutOf") if reason.startswith("OutOf") else ""
    if reason == "TopologyAffinityError":
        return Signal(
            Layer.DEVICE_PLUGIN, "device-plugin.topology-affinity",
            f"kubelet on {node} rejected the pod (TopologyAffinityError): its Topology Manager "
            "cannot place the pod's devices and CPUs on the NUMA node(s) its policy requires",
            evidence=[*evidence, f"node {node}: {topology_shown(node_labels)}"], nodes=[node],
        )  # fmt: skip
    if resource and is_extended(resource):
        return Signal(
            Layer.DEVICE_PLUGIN, "device-plugin.admission-out-of",
            f"kubelet on {node} rejected the pod: it had fewer {resource} free than the "
            "scheduler counted (devices gone unhealthy or a pod placed by nodeName)",
            evidence=evidence, nodes=[node], values={"resource": resource},
        )  # fmt: skip
    if reason == "NodeShutdown":
        return Signal(
            Layer.DRIVER, "driver.node-shutdown",
            f"kubelet on {node} rejected the pod: the node is shutting down",
            evidence=evidence, nodes=[node],
        )  # fmt: skip
    what = f"not enough {resource} on the node by its own count" if resource else reason
    if reason == "NodeAffinity":
        changed = affinity_mismatch(pod, node_labels)
        what = "the node's labels no longer match the pod's node affinity/selector"
        evidence += [f"node {node}: {c}" for c in changed]
    return Signal(
        Layer.SCHEDULING, "scheduling.kubelet-rejected",
        f"kubelet on {node} rejected the pod at admission: {what}",
        evidence=evidence, nodes=[node], values={"resource": resource} if resource else {},
    )  # fmt: skip


def terminal_headline(pod: Obj) -> str:
    status = pod.get("status") or {}
    phase = status.get("phase")
    node = (pod.get("spec") or {}).get("nodeName")
    name = name_of(pod)
    if phase == "Succeeded":
        return f"pod {name} completed successfully: nothing blocks it"
    problem = pod_problem(pod)
    if problem is None:
        return f"pod {name} is running on node {node}: nothing blocks it"
    if phase == "Failed":
        return f"pod {name} failed ({problem}); not a GPU layer problem"
    return f"pod {name} is on node {node} but {problem}; not a GPU layer problem"
