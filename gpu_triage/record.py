"""`--record`: a triage run from a terminal lands in the incident store the Slack bot writes,
with the same fingerprint, so a terminal triage and a Slack one of the same cause are one
incident (the run says it came from the CLI, and who ran it)."""

from __future__ import annotations

import getpass

from triage.model import TriageReport


def record(reports: list[TriageReport], *, database_url: str | None, ms: float) -> str:
    """Record each report as a run (migrating a fresh database first); one line saying what
    happened, for stderr."""
    from incidents.store import IncidentStore  # SQLAlchemy loads only when asked to record

    opened = continued = resolved = 0
    with IncidentStore.open(database_url, auto_migrate=True) as store:
        for report in reports:
            result = store.record(
                report, requested_by=_who(), duration_ms=ms, channel=None, source="cli"
            )
            if result.created:
                opened += 1
            elif result.incident is not None:
                continued += 1
            resolved += len(result.auto_resolved)
        where = store.display_url
    parts = [f"{opened} incident(s) opened" if opened else "", f"{continued} continued" if continued else "",
             f"{resolved} resolved (running now)" if resolved else ""]  # fmt: skip
    said = ", ".join(p for p in parts if p) or "nothing open for it"
    return f"recorded in {where}: {said}"


def _who() -> str | None:
    try:
        return f"cli:{getpass.getuser()}"
    except Exception:  # no passwd entry (a container's arbitrary uid)
        return "cli"
