"""The scheduler-filter scenarios give the same report through the watch cache (slim pods:
claims, host ports and spread constraints kept; PVCs, PVs, StorageClasses and CSINodes
watched) as through the full snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kube.cache import CachedSource
from kube.client import RawClient, load_client
from kube.testing import FakeApiServer
from triage import load_playbook, load_snapshot, triage

FIXTURES = Path(__file__).parents[1] / "fixtures"
CASES = {c["file"]: c for c in yaml.safe_load((FIXTURES / "expected.yaml").read_text())}
FILES = ["volume-zone-conflict.yaml", "pvc-unbound.yaml", "topology-spread-zone.yaml",
         "host-port-taken.yaml", "anti-affinity-spread.yaml",
         # DRA: the cache keeps a pod's uid only when it has claims (a claim's reservations)
         "dra-devices-allocated.yaml", "dra-mixed-cluster.yaml", "dra-no-matching-device.yaml"]  # fmt: skip


@pytest.mark.parametrize("file", FILES)
def test_cache_agrees_with_the_snapshot(file: str, tmp_path: Path) -> None:
    objects = yaml.safe_load((FIXTURES / file).read_text())["items"]
    with FakeApiServer(objects) as api:
        client_api, name = load_client(
            kubeconfig=str(api.write_kubeconfig(tmp_path / "kc", context="fake"))
        )
        cache = CachedSource(RawClient(client_api, cluster_name=name), freeze_gc=False)
        try:
            assert cache.start().wait_synced(10)
            snapshot = load_snapshot(FIXTURES / file)
            case = CASES[file]
            playbook = load_playbook()
            kw = {"namespace": case["namespace"], "name": case["name"], "playbook": playbook}
            want = triage(snapshot, now=snapshot.as_of, **kw)  # type: ignore[arg-type]
            got = triage(cache, now=snapshot.as_of, **kw)  # type: ignore[arg-type]
        finally:
            cache.close()
    assert want.failing_layer == got.failing_layer == case["failing_layer"]
    for a, b in zip(want.findings, got.findings, strict=True):
        assert (a.layer, a.codes, a.summary, a.evidence) == (
            b.layer,
            b.codes,
            b.summary,
            b.evidence,
        )
