"""Serve a synthetic cluster on loopback in its own process (so the bench's RSS is the cache's).

Prints one JSON line {"url": ..., "pending": [[ns, name], ...]} once ready, then serves until
stdin closes.
"""

from __future__ import annotations

import argparse
import json
import sys

from bench.synth import cluster
from kube.testing import FakeApiServer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--pods", type=int, required=True)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    objs, pending = cluster(nodes=args.nodes, pods=args.pods, seed=args.seed)
    server = FakeApiServer(objs)
    del objs
    server.start()
    print(json.dumps({"url": server.url, "pending": pending}), flush=True)
    sys.stdin.read()
    server.stop()


if __name__ == "__main__":
    main()
