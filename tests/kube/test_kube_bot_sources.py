"""The bot's live sources: one watch-backed cache per kubeconfig context, chosen by --cluster."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpu_triage.cmd_bot import _sources
from kube.cache import CachedSource
from kube.testing import FakeApiServer
from tests.builders import node, operator_pods, pod
from triage import Layer, triage


def test_live_bot_serves_each_context_from_a_synced_cache(tmp_path: Path) -> None:
    objs = [node("a1", cordoned=True), *operator_pods("a1"), pod("train")]
    objs += [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        for ns in ("team-a", "gpu-operator")
    ]
    with FakeApiServer(objs) as api:
        config = api.write_kubeconfig(tmp_path / "kubeconfig", context="prod")
        settings = SimpleNamespace(snapshot=None, cluster_name="east")
        args = argparse.Namespace(kubeconfig=str(config), context=None)
        clusters = _sources(settings, args)
        source_for = clusters.source_for
        try:
            src = source_for(None)
            assert isinstance(src, CachedSource) and clusters.description.startswith("prod")
            assert source_for("east") is src and source_for("prod") is src  # alias and context
            assert src.wait_synced(timeout=10)
            before = len(api.requests)
            report = triage(src, namespace="team-a", name="train")
            assert report.failing_layer == Layer.SCHEDULING
            assert "scheduling.cordoned" in report.finding(Layer.SCHEDULING).codes
            assert report.data_age_note is None  # the watch is up: nothing stale to say
            # Informers for APIs that are not installed re-check now and then in the background;
            # what the triage itself sends is the events request and no list of nodes or pods.
            sent = [
                path for path, q in api.requests[before:] if q.get("watch") not in ("1", "true")
            ]
            assert "/api/v1/namespaces/team-a/events" in sent
            assert not [p for p in sent if p.endswith(("/nodes", "/pods"))]
            with pytest.raises(LookupError):  # a context the kubeconfig lacks: unknown
                source_for("no-such-context")
        finally:
            clusters.close()


def test_live_bot_is_ready_once_the_default_cluster_is_synced(tmp_path: Path) -> None:
    with FakeApiServer([node("a1")]) as api:
        api.fail_statuses = [500] * 3  # the first lists fail: the cache retries with backoff
        config = api.write_kubeconfig(tmp_path / "kubeconfig", context="prod")
        settings = SimpleNamespace(snapshot=None, cluster_name=None)
        clusters = _sources(settings, argparse.Namespace(kubeconfig=str(config), context=None))
        try:
            assert clusters.not_ready() == "cluster prod: cache still syncing"
            src = clusters.source_for(None)
            assert isinstance(src, CachedSource) and src.wait_synced(timeout=10)
            assert clusters.not_ready() is None
            assert clusters.caches is not None and list(clusters.caches()) == ["prod"]
        finally:
            clusters.close()
