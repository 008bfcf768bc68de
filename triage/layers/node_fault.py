"""Which layer a node's own problem belongs to: the one answer `why-pending` (a node the pod
could use, or a side finding), `verify-node(s)` and the fleet view give for the same fault,
so one fault pages one team.

A node's driver verdict comes before its device-plugin verdict (the order of diagnosis: a
plugin cannot advertise GPUs the driver does not show), whatever else is also wrong there
(a validator stuck behind the plugin is the plugin's problem, not the driver's).
"""

from __future__ import annotations

from dataclasses import dataclass

from triage.layers.node import NodeHealth
from triage.layers.node_verdict import NodeVerdict
from triage.model import Layer


@dataclass(frozen=True, slots=True)
class NodeFault:
    """The lowest broken layer on a node, and the verdict that says so (its `code` is the
    signal the owner route is chosen by)."""

    layer: Layer
    verdict: NodeVerdict


def node_fault(health: NodeHealth) -> NodeFault | None:
    """The node's own fault (None: its driver and device plugin are fine)."""
    if not health.driver.ok:
        return NodeFault(Layer.DRIVER, health.driver)
    if not health.plugin.ok:
        return NodeFault(Layer.DEVICE_PLUGIN, health.plugin)
    return None
