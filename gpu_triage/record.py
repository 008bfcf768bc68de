"""`--record`: a triage run from a terminal lands in the incident store the Slack bot writes,
through the same `TriageService` and with the same fingerprint, so a terminal triage and a
Slack one of the same cause are one incident (the run says it came from the CLI, and who ran
it).

A store failure the service reports (`TriageRun.store_error`, where the bot says "not
recorded") is an error here: a terminal asked to record and must not exit 0 without it.
"""

from __future__ import annotations

import getpass
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from gpu_triage.service import TriageRun, TriageService
from gpu_triage.settings import CommonSettings
from incidents.errors import Fault, StoreUnavailableError
from triage import ClusterSource, load_playbook

if TYPE_CHECKING:
    from incidents.store import IncidentStore

VIA = "cli"  # the source recorded on each run


@contextmanager
def recording_service(
    source: ClusterSource, *, settings: CommonSettings, record: bool
) -> Iterator[tuple[TriageService, IncidentStore | None]]:
    """The service over `source`, recording into the incident store when `record` (the store
    migrated first unless GPU_TRIAGE_AUTO_MIGRATE says not to)."""
    store = settings.open_store(migrate=True) if record else None
    try:
        yield (
            TriageService(
                source_for=lambda _cluster: source,
                config=settings.engine_config(),
                playbook=load_playbook(settings.playbook),
                store=store,
            ),
            store,
        )
    finally:
        if store is not None:
            store.close()


def recorded(run: TriageRun) -> TriageRun:
    """`run`, or the store failure that kept it out of the incident history."""
    if run.store_error is not None:
        fault = Fault(run.store_fault) if run.store_fault in set(Fault) else Fault.UNAVAILABLE
        raise StoreUnavailableError(run.store_error, fault=fault)
    return run


def summary(runs: list[TriageRun], *, where: str) -> str:
    """One line saying what recording `runs` did, for stderr."""
    opened = sum(1 for r in runs if r.created)
    continued = sum(1 for r in runs if not r.created and r.incident is not None)
    resolved = sum(len(r.auto_resolved) for r in runs)
    parts = [f"{opened} incident(s) opened" if opened else "", f"{continued} continued" if continued else "",
             f"{resolved} resolved (running now)" if resolved else ""]  # fmt: skip
    said = ", ".join(p for p in parts if p) or "nothing open for it"
    return f"recorded in {where}: {said}"


def who() -> str | None:
    try:
        return f"cli:{getpass.getuser()}"
    except Exception:  # no passwd entry (a container's arbitrary uid)
        return "cli"
