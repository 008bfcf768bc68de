"""The fleet view: every stuck GPU workload in scope, triaged, and grouped by root cause.

`stuck` finds the stuck GPU workloads; `sweep` triages each as a user would and groups the
answers (`model`: `Member`, `Group`, `Sweep`); `source` is what one sweep reads through (one
events list, shared work, a log of each triage's reads); `reuse` keeps answers between sweeps
while nothing they read changed.

May import: the cluster view, the engine, the playbooks and the report model. Never an adapter.
"""

from triage.fleet.model import MEMBERS_SHOWN, Group, Member, Sweep, describe_cause, waited
from triage.fleet.reuse import FleetMemo
from triage.fleet.source import SweepSource
from triage.fleet.stuck import Stuck, stuck_workloads
from triage.fleet.sweep import sweep

__all__ = [
    "MEMBERS_SHOWN",
    "FleetMemo",
    "Group",
    "Member",
    "Stuck",
    "Sweep",
    "SweepSource",
    "describe_cause",
    "stuck_workloads",
    "sweep",
    "waited",
]
