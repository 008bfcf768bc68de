"""What the CLI's tests share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


@pytest.fixture
def deadlines(monkeypatch: pytest.MonkeyPatch) -> Callable[[], list[float | None]]:
    """The deadlines (seconds in all) of the live sources a command opened, as they stood
    when it ended (a deadline widens once every pod is listed: `Deadline.widen`); the
    sources are opened as they would be. `GPU_TRIAGE_TIMEOUT` is cleared: a test sets it
    when it means to."""
    import kube.live

    opened: list[Any] = []
    connect = kube.live.connect

    def recorded(**kw: Any) -> Any:
        opened.append(connect(**kw))
        return opened[-1]

    monkeypatch.setattr(kube.live, "connect", recorded)
    monkeypatch.delenv("GPU_TRIAGE_TIMEOUT", raising=False)
    return lambda: [source.client.deadline.seconds for source in opened]
