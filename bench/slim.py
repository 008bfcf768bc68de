"""What slimming a cluster's pods and nodes costs: CPU time and the memory kept.

    python -m bench.slim --nodes 1000 [--against HEAD~1] [--rounds 5]

Serialises the synthetic cluster's pods and nodes as 500-item list pages, decodes them typed
(`kube.decode`) and projects them (`kube.slim`), as the cache does, without HTTP. Times the
projection alone (the thread's CPU time, steady on a shared machine; best and every round)
and measures, with tracemalloc, what the decoded and projected objects keep once the pages
are dropped. `--against REV` does the same with `kube/slim.py` of a git revision (with
today's `kube/share.py` and `kube/compact.py` importable), alternating rounds, in the same
process.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import time
import tracemalloc
import types
from collections.abc import Callable
from typing import Any

import kube.slim
from bench.synth import cluster
from kube.decode import list_decoder

Pages = tuple[list[bytes], list[bytes]]


def pages(nodes: int) -> Pages:
    objs, _ = cluster(nodes=nodes, pods=nodes * 30)
    out: Pages = ([], [])
    for kind, into in (("Pod", out[0]), ("Node", out[1])):
        items = [o for o in objs if o["kind"] == kind]
        into += [
            json.dumps({"items": items[i : i + 500]}).encode() for i in range(0, len(items), 500)
        ]
    return out


def decoded(data: Pages) -> tuple[list[Any], list[Any]]:
    pod, node = list_decoder("Pod"), list_decoder("Node")
    assert pod is not None and node is not None
    return [pod(p)["items"] for p in data[0]], [node(p)["items"] for p in data[1]]


def project(module: Any, data: Pages) -> tuple[float, list[Any]]:
    """Seconds of this thread's CPU to project the pages (the GC off, as in a sync)."""
    pods, nodes = decoded(data)
    slim_pod: Callable[[Any], Any] = module.projection("Pod")
    slim_node: Callable[[Any], Any] = module.projection("Node")
    gc.disable()
    try:
        t = time.thread_time()
        out = [slim_pod(p) for page in pods for p in page]
        out += [slim_node(n) for page in nodes for n in page]
        return time.thread_time() - t, out
    finally:
        gc.enable()


def kept(module: Any, data: Pages) -> float:
    """MB the projected objects hold, once the pages and their decoded objects are gone."""
    gc.collect()
    tracemalloc.start()
    try:
        _, out = project(module, data)
        gc.collect()
        return tracemalloc.get_traced_memory()[0] / 2**20
    finally:
        tracemalloc.stop()
        del out


def revision(rev: str) -> types.ModuleType:
    source = subprocess.run(
        ["git", "show", f"{rev}:kube/slim.py"], capture_output=True, text=True, check=True
    ).stdout
    module = types.ModuleType(f"slim@{rev}")
    exec(compile(source, f"kube/slim.py@{rev}", "exec"), module.__dict__)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--against", help="a git revision whose kube/slim.py to compare")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    data = pages(args.nodes)
    gc.collect()
    modules = {"now": kube.slim}
    if args.against:
        modules = {args.against: revision(args.against), **modules}
    times: dict[str, list[float]] = {name: [] for name in modules}
    for _ in range(args.rounds):
        for name, module in modules.items():
            seconds, out = project(module, data)
            times[name].append(seconds)
            del out
            gc.collect()
    pods = args.nodes * 30
    for name, module in modules.items():
        ts = times[name]
        mb = kept(module, data)
        print(f"{name}: projection {min(ts):.3f}s best ({' '.join(f'{t:.3f}' for t in ts)}) = "
              f"{min(ts) * 1e6 / pods:.1f} us a pod; kept {mb:.1f} MB = "
              f"{mb * 2**20 / pods:.0f} B a pod, {mb * 1000 / args.nodes:.1f} MB per 1,000 "
              f"nodes")  # fmt: skip


if __name__ == "__main__":
    main()
