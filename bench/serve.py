"""Serve a synthetic cluster on loopback in its own process (so the bench's RSS is the cache's).

Prints one JSON line {"url": ..., "pending": [[ns, name], ...], "pinned": [...]} once ready
(`pinned`: pending pods pinned to a pool of 64 nodes), then serves until
stdin closes. A line "churn" on stdin starts changing the cluster at `--churn` changes a second
(see `bench.churn`); "quiet" stops it and prints {"applied": N}. "one KIND" applies a single
change and prints {"touched": [kind, namespace, name, deleted], "resourceVersion": rv} (the
server's resourceVersion after it).
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
from typing import Any

from bench.churn import Churn, running_pods
from bench.synth import cluster, pinned
from kube.testing import FakeApiServer


def launch(
    *, nodes: int, pods: int, churn: float = 0.0, latency: float = 0.0
) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """This module in a child process (so a bench's RSS is its own); what it printed once
    ready ({"url", "pending"}). Close its stdin to stop it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.serve", "--nodes", str(nodes), "--pods", str(pods),
         "--churn", str(churn), "--latency", str(latency)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--pods", type=int, required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--churn", type=float, default=0.0, help="changes a second on 'churn'")
    parser.add_argument(
        "--latency", type=float, default=0.0, help="seconds each get or list takes (not watches)"
    )
    args = parser.parse_args()
    # Building 600,000 pods' dicts with the collector on rescans them again and again (3.5x
    # the time); nothing built here is garbage until the server frees it.
    gc.disable()
    objs, pending = cluster(nodes=args.nodes, pods=args.pods, seed=args.seed)
    pins = pinned(objs)
    server = FakeApiServer(objs)
    server.latency = args.latency
    churn = Churn(
        server,
        nodes=[o["metadata"]["name"] for o in objs if o["kind"] == "Node"],
        running=running_pods(objs),
        rate=args.churn,
        seed=args.seed,
    )
    del objs
    # A kube-apiserver (Go) does not rescan its objects on every allocation: without this,
    # CPython's collector pauses this server for seconds at 600,000 pods, and those pauses
    # would show as the client's latency.
    gc.collect()
    gc.freeze()
    gc.enable()
    server.start()
    print(json.dumps({"url": server.url, "pending": pending, "pinned": pins}), flush=True)
    for line in sys.stdin:
        word, _, arg = line.strip().partition(" ")
        if word == "churn":
            churn.start()
        elif word == "quiet":
            churn.stop()
            print(json.dumps({"applied": churn.applied}), flush=True)
        elif word == "one":
            touched = churn.one(arg)
            print(json.dumps({"touched": touched, "resourceVersion": str(server.rv)}), flush=True)
    churn.stop()
    server.stop()


if __name__ == "__main__":
    main()
