"""A pod that already has a node: why does it not run there?

Once scheduled, only the two lowest layers can hold a GPU pod: kubelet rejecting it at
admission because the device plugin cannot allocate (device-plugin), or the container failing
to start under its vendor's container runtime (driver). Anything else is not a GPU layer problem.
"""

from __future__ import annotations

from triage.cluster.events import Event
from triage.cluster.objects import Obj, container_states, name_of, pod_problem
from triage.layers.base import CheckResult, Context
from triage.layers.node import NodeHealth
from triage.model import Layer
from triage.signals import Signal
from triage.vendors import NVIDIA, VENDORS


def _runtime_error(text: str) -> bool:
    """Whether `text` is what an accelerator vendor's container runtime prints failing."""
    return any(v.runtime_errors.search(text) for v in VENDORS)


START_REASONS = ("Failed", "FailedCreatePodSandBox", "FailedStart", "BackOff")


def on_node(pod: Obj | None) -> bool:
    """Whether the pod is past scheduling: finished (other than rejected at admission), or
    bound to a node. Scheduling has nothing to say about such a pod."""
    if pod is None:
        return False
    return _finished(pod) or bool((pod.get("spec") or {}).get("nodeName"))


def _finished(pod: Obj) -> bool:
    status = pod.get("status") or {}
    return (
        status.get("phase") in ("Succeeded", "Failed")
        and status.get("reason") != "UnexpectedAdmissionError"
    )


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
        pod=pod, events=ctx.pod_events, health=health, runtime_classes=runtime_classes
    )
    headline = None if any(s.blocking for s in signals) else terminal_headline(pod)
    return CheckResult(signals=signals, headline=headline)


def _runtime_errors(pod: Obj, events: list[Event]) -> list[str]:
    out = []
    for name, cs in container_states(pod):
        for state_key in ("state", "lastState"):
            state = cs.get(state_key) or {}
            for sub in ("waiting", "terminated"):
                msg = str((state.get(sub) or {}).get("message") or "")
                if _runtime_error(msg):
                    reason = (state.get(sub) or {}).get("reason", sub)
                    out.append(f"container {name} {reason}: {' '.join(msg.split())[:400]}")
    for ev in events:
        if ev.reason in START_REASONS and _runtime_error(ev.message):
            out.append(str(ev))
    return out


def check_scheduled_pod(
    *,
    pod: Obj,
    events: list[Event],
    health: NodeHealth | None,
    runtime_classes: list[Obj] | None,
) -> list[Signal]:
    node = str((pod.get("spec") or {}).get("nodeName"))
    status = pod.get("status") or {}
    signals: list[Signal] = []
    admission = [str(e) for e in events if e.reason == "UnexpectedAdmissionError"]
    if status.get("reason") == "UnexpectedAdmissionError" or admission:
        msg = " ".join(str(status.get("message") or "").split())
        signals.append(
            Signal(
                Layer.DEVICE_PLUGIN,
                "device-plugin.admission-error",
                f"kubelet on {node} rejected the pod: the device plugin could not allocate its GPUs",
                evidence=[f"pod status UnexpectedAdmissionError: {msg}"] if msg else admission[:1],
                nodes=[node],
            )
        )
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
    errors = _runtime_errors(pod, events)
    if errors:
        signals.append(
            Signal(
                Layer.DRIVER,
                "driver.container-start-failed",
                f"the pod is on node {node} but its container cannot start with the {NVIDIA.name} "
                "runtime",
                evidence=errors[:4],
                nodes=[node],
            )
        )
    if health is not None and not health.driver.ok:
        stuck = bool(errors) or health.driver.code == "driver.node-not-ready"
        signals.append(
            Signal(
                Layer.DRIVER,
                health.driver.code,
                health.driver.text,
                blocking=stuck or pod_problem(pod) is not None,
                evidence=[health.driver.text],
                detail=health.driver.detail,
                nodes=[node],
            )
        )
    return signals


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
