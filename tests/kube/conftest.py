"""Fixtures: a loopback fake API server and a kubeconfig pointing at it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kube.testing import FakeApiServer


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        yield server


@pytest.fixture
def kubeconfig(api: FakeApiServer, tmp_path: Path) -> str:
    return str(api.write_kubeconfig(tmp_path / "kubeconfig", context="fake"))
