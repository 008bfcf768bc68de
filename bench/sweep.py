"""Full fleet sweeps alone, in CPU time against a fixed reference: did a change to the engine
make them cheaper?

`python -m bench.sweep --nodes 4000` builds the bench's synthetic cluster (30 pods a node),
keeps each object as the watch cache keeps it (`kube.slim`) in a `MemorySource`, sweeps it
once (the first sweep judges every node and evaluates each pod shape), then runs `--sweeps`
more full sweeps, each after a fixed CPU-bound reference loop. It prints one JSON line: the
median CPU time of a sweep, of the reference, and their ratio. The ratio drifts far less
than wall time on a shared VM: to compare two trees, run this from each in turn, a few times
alternated, and compare the ratios.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from typing import Any

from bench.synth import cluster
from kube.slim import projections
from triage.cluster.memory import MemorySource
from triage.fleet import sweep
from triage.playbooks import load_playbook


def reference() -> int:
    """A fixed amount of the interpreter's everyday work: dict stores and lookups, strings."""
    d: dict[str, Any] = {}
    for i in range(300_000):
        d[str(i % 5000)] = (i, {"a": i}.get("a"))
    return len(d)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4000)
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--sweeps", type=int, default=25)
    args = parser.parse_args()
    objs, _ = cluster(nodes=args.nodes, pods=args.nodes * args.pods_per_node)
    project = projections()  # as the cache keeps them: one sharer per kind
    slim = [project(o["kind"])(o) for o in objs]
    del objs
    source = MemorySource(slim)
    del slim
    playbook = load_playbook()
    gc.collect()
    gc.freeze()  # as the cache's lists are frozen once read
    first = time.process_time()
    found = sweep(source, playbook=playbook)
    first = time.process_time() - first
    sweeps, references = [], []
    for _ in range(args.sweeps):
        t = time.process_time()
        reference()
        references.append(time.process_time() - t)
        t = time.process_time()
        sweep(source, playbook=playbook)
        sweeps.append(time.process_time() - t)
    swept, ref = statistics.median(sweeps), statistics.median(references)
    print(json.dumps({
        "nodes": args.nodes, "stuck": found.workloads, "first_sweep_cpu_s": round(first, 3),
        "sweep_cpu_s": round(swept, 3), "reference_cpu_s": round(ref, 4),
        "x_reference": round(swept / ref, 2),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
