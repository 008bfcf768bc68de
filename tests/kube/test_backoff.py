"""Watches reconnect with jittered backoff: after an outage, thirty watches (times replicas)
must not come back as one burst at the same instants, over and over."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from kube.backoff import Backoff, watch_timeout
from kube.client import RawClient, load_client
from kube.informer import Informer
from kube.testing import FakeApiServer
from triage.cluster.kinds import KINDS


def test_waits_double_up_to_the_cap_each_drawn_from_the_upper_half_of_its_step() -> None:
    backoff = Backoff(first=0.5, cap=30.0, rng=random.Random(7))
    steps = [0.5, 1, 2, 4, 8, 16, 30, 30, 30]
    waits = [backoff.next() for _ in steps]
    for wait, step in zip(waits, steps, strict=True):
        assert step / 2 <= wait <= step
    assert len(set(waits)) == len(waits)  # jittered, not the step itself
    backoff.reset()
    assert backoff.next() <= 0.5


def test_watches_failing_together_do_not_retry_together() -> None:
    """Thirty informers' retry schedules after the same failure: no two alike, and spread
    over the step's half (not within a few milliseconds of each other)."""
    schedules = [Backoff() for _ in range(30)]
    firsts = [[b.next() for _ in range(4)] for b in schedules]
    assert len({tuple(f) for f in firsts}) == 30
    fourth = sorted(f[3] for f in firsts)  # the 4 s step: drawn from 2 to 4 s
    assert fourth[-1] - fourth[0] > 0.5
    timeouts = {round(watch_timeout(60, random.Random(i))) for i in range(30)}
    assert min(timeouts) >= 60 and max(timeouts) <= 120 and len(timeouts) > 10


def test_an_informer_whose_server_fails_backs_off_with_jitter(tmp_path: Path) -> None:
    with FakeApiServer([]) as api:
        api.fail_on["nodes"] = 503
        client = RawClient(_api_client(api, tmp_path), cluster_name="fake", sleep=lambda s: None)
        informer = Informer(client, KINDS["Node"], backoff=Backoff(first=0.05, cap=0.4))
        informer.start()
        try:
            deadline = time.monotonic() + 10
            while len(informer.backoff.waits) < 5 and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            informer.stop()
        waits = informer.backoff.waits[:5]
    assert informer.state == "starting" and informer.error is not None  # never synced
    for wait, step in zip(waits, [0.05, 0.1, 0.2, 0.4, 0.4], strict=True):
        assert step / 2 <= wait <= step
    assert waits[3] != waits[4]  # capped, still jittered


def _api_client(api: FakeApiServer, where: Path) -> Any:
    return load_client(kubeconfig=str(api.write_kubeconfig(where / "kubeconfig")))[0]
