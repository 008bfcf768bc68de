"""The cache's cold sync alone, in CPU time: is it linear in the cluster's size?

`python -m bench.sync --nodes 5000` and `--nodes 20000` serve a synthetic cluster (30 pods a
node) in a child process, measure the floor (receiving and decoding every list page, keeping
nothing) and then one cold sync of `CachedSource`, and print one JSON line: wall and CPU time
of this process for each, per 1,000 nodes, the time spent in the cyclic GC and the cache's
memory. CPU time drifts less than wall time on a shared machine; compare the per-1,000-node
figures of two sizes measured in the same hour.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.run import floor, rss_mb
from bench.serve import launch
from kube.cache import CachedSource, few_malloc_arenas
from kube.client import RawClient, load_client
from kube.testing import write_kubeconfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=30)
    args = parser.parse_args()
    few_malloc_arenas()  # as the bot's process does
    server, info = launch(nodes=args.nodes, pods=args.nodes * args.pods_per_node)
    assert server.stdin is not None
    kubeconfig = write_kubeconfig(info["url"], Path(tempfile.mkdtemp()) / "kubeconfig", context="b")

    def client() -> RawClient:
        api, name = load_client(kubeconfig=str(kubeconfig))
        return RawClient(api, cluster_name=name)

    collecting = [0.0, 0.0]  # seconds in the collector, when the current pass started

    def timed(phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            collecting[1] = time.perf_counter()
        else:
            collecting[0] += time.perf_counter() - collecting[1]

    try:
        cpu = time.process_time()
        floor_s, _pages, _mb = floor(client())
        floor_cpu = time.process_time() - cpu
        gc.collect()
        base = rss_mb()
        gc.callbacks.append(timed)
        cpu, wall = time.process_time(), time.monotonic()
        cache = CachedSource(client(), sync_timeout=3600).start()
        assert cache.wait_synced(3600), "cache did not sync"
        wall, cpu = time.monotonic() - wall, time.process_time() - cpu
        gc.callbacks.remove(timed)
        per = 1000 / args.nodes
        print(json.dumps({
            "nodes": args.nodes, "floor_s": round(floor_s, 2), "sync_s": round(wall, 2),
            "x_floor": round(wall / floor_s, 2), "sync_cpu_per_1k": round(cpu * per, 3),
            "floor_cpu_per_1k": round(floor_cpu * per, 3), "gc_s": round(collecting[0], 2),
            "cache_mb_per_1k": round((rss_mb() - base) * per, 1),
            "load_average": round(os.getloadavg()[0], 1),
        }))  # fmt: skip
        cache.close()
    finally:
        server.stdin.close()
        server.kill()


if __name__ == "__main__":
    main()
