"""What the CLI's tests share."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def deadlines(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The deadline (seconds) of every live source a command opens, in order; the source is
    opened as it would be. `GPU_TRIAGE_TIMEOUT` is cleared: a test sets it when it means to."""
    import kube.live

    opened: list[float] = []
    connect = kube.live.connect

    def recorded(**kw: Any) -> Any:
        opened.append(kw["timeout"])
        return connect(**kw)

    monkeypatch.setattr(kube.live, "connect", recorded)
    monkeypatch.delenv("GPU_TRIAGE_TIMEOUT", raising=False)
    return opened
