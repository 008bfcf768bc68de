"""What slimming a cluster's pods, nodes and Jobs costs: CPU time and the memory kept.

    python -m bench.slim --nodes 1000 [--against HEAD~1] [--rounds 5]

Serialises the synthetic cluster's pods, nodes and Jobs as 500-item list pages, decodes
them typed (`kube.decode`) and projects them (`kube.slim`), as the cache does, without HTTP.
Times each kind's projection alone (the thread's CPU time, steady on a shared machine; best
and every round) and measures, with tracemalloc, what the decoded and projected objects keep
once the pages are dropped, and what each Job's next version adds once the pods hold its
strings. `--against REV` does the same with `kube/slim.py` of a git revision (with
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
from collections.abc import Callable, Iterable
from typing import Any

import kube.slim
from bench.synth import cluster
from kube.aside import job_of_finished
from kube.decode import list_decoder
from kube.fastjson import gc_paused
from kube.share import Sharer

# Each kind's list pages. The Jobs first: the cache lists them before the pods, whose
# projection takes each Job's own name and uid strings (`kube.cache.CachedSource`).
Pages = dict[str, list[bytes]]
KINDS = ("Job", "Node", "Pod")
Jobs = dict[tuple[str, str], Any]  # the Jobs projected, by namespace and name


def file_jobs(jobs: Jobs, made: Iterable[Any]) -> None:
    """Files the projected Jobs `made` in `jobs`, one by one (each in place of its earlier
    version)."""
    jobs.update(((o["metadata"]["namespace"], o["metadata"]["name"]), o) for o in made)


def job_in(jobs: Jobs) -> Callable[[str, str, Any], Any]:
    """A projection's owner lookup (`Sharer`'s `owner`) among `jobs`."""

    def owner(kind: str, namespace: str, name: Any) -> Any:
        return jobs.get((namespace, name)) if kind == "Job" else None

    return owner


def pages(nodes: int) -> tuple[Pages, dict[str, int]]:
    """Each kind's list pages, and how many objects they hold."""
    objs, _ = cluster(nodes=nodes, pods=nodes * 30)
    out: Pages = {}
    counts: dict[str, int] = {}
    for kind in KINDS:
        items = [o for o in objs if o["kind"] == kind]
        out[kind] = [
            json.dumps({"items": items[i : i + 500]}).encode() for i in range(0, len(items), 500)
        ]
        counts[kind] = len(items)
    return out, counts


def decoded(data: Pages) -> dict[str, list[Any]]:
    """Each kind's pages decoded typed: pods and nodes as in the first passes that measured
    them, Jobs as the cache decodes them for its projection (their pod template's fields as
    text)."""
    out = {}
    for kind, kind_pages in data.items():
        decode = list_decoder(kind, projected=kind == "Job")
        assert decode is not None
        out[kind] = [decode(p)["items"] for p in kind_pages]
    return out


def project(
    module: Any, data: Pages, jobs: Jobs | None = None
) -> tuple[dict[str, float], list[Any]]:
    """Seconds of this thread's CPU to project each kind's pages (the GC off, as in a sync).
    Pods are projected as the cache does, with the Jobs of `jobs` and those projected here."""
    objs = decoded(data)
    seconds: dict[str, float] = {}
    out: list[Any] = []
    jobs = {} if jobs is None else jobs
    owner = job_in(jobs)
    gc.disable()
    try:
        for kind, kind_pages in objs.items():
            slim: Callable[[Any], Any] = module.projection(kind, Sharer(owner=owner))
            t = time.thread_time()
            made = [slim(o) for page in kind_pages for o in page]
            seconds[kind] = time.thread_time() - t
            if kind == "Job":
                file_jobs(jobs, made)
            out += made
        return seconds, out
    finally:
        gc.enable()


def kept(module: Any, data: Pages) -> dict[str, float]:
    """Bytes each kind's projected objects hold, once the pages and their decoded objects
    are gone (with what the kind's projection keeps to share them). The Jobs stay alive, and
    filed by name outside the count, while the pods are measured, as in the cache."""
    out: dict[str, float] = {}
    jobs: Jobs = {}
    for kind, kind_pages in data.items():
        gc.collect()
        tracemalloc.start()
        try:  # (the Jobs `project` files by name for the pods are dropped when it returns)
            _, objs = project(module, {kind: kind_pages}, jobs if kind == "Pod" else None)
            gc.collect()
            out[kind] = tracemalloc.get_traced_memory()[0]
            if kind == "Pod":  # what the finished pods of Jobs hold of it
                left = [o for o in objs if not finished_of_job(o)]
                out[FINISHED + " count"] = len(objs) - len(left)
                objs = left
                del left
                gc.collect()
                out[FINISHED] = out[kind] - tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        if kind == "Job":
            file_jobs(jobs, objs)
        del objs
    return out


# `kept`'s entry for the part of the pods' bytes that their Jobs' finished pods hold.
FINISHED = "Pod of a Job, Succeeded"


def finished_of_job(pod: Any) -> bool:
    """Whether a projected pod has succeeded and its one owner is a Job: one the cache holds
    aside (`kube.aside.job_of_finished`), its name alone."""
    return job_of_finished(pod) is not None


def updated(module: Any, data: Pages) -> float:
    """Bytes each Job's new version adds (its status, as its controller writes it once its
    pod runs, after the pods were projected), once the old version is dropped: the pods keep
    the strings they took from the old one (`Sharer.earlier`). Each kind has one sharer
    throughout, as in the cache."""
    jobs: Jobs = {}
    cached = job_in(jobs)
    gc.collect()
    tracemalloc.start()  # before decoding: what the projections keep of the decoded is counted
    try:
        objs = decoded({k: data[k] for k in ("Job", "Pod")})
        slim_job = module.projection("Job", Sharer(owner=cached, kind="Job"))
        slim_pod = module.projection("Pod", Sharer(owner=cached))
        with gc_paused():
            file_jobs(jobs, (slim_job(o) for page in objs["Job"] for o in page))
            pods = [slim_pod(o) for page in objs["Pod"] for o in page]
        del objs  # every decoded object
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        news = decoded({"Job": data["Job"]})["Job"]
        for page in news:
            for o in page:
                o["status"] = {"active": 1, "ready": 0, "terminating": 0}
        with gc_paused():  # each in place of its old version, dropped
            file_jobs(jobs, (slim_job(o) for page in news for o in page))
        del news, page, o
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    del pods
    return grown / len(jobs)


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
    data, counts = pages(args.nodes)
    gc.collect()
    modules = {"now": kube.slim}
    if args.against:
        modules = {args.against: revision(args.against), **modules}
    times: dict[str, dict[str, list[float]]] = {name: {k: [] for k in KINDS} for name in modules}
    for _ in range(args.rounds):
        for name, module in modules.items():
            seconds, out = project(module, data)
            for kind, t in seconds.items():
                times[name][kind].append(t)
            del out
            gc.collect()
    for name, module in modules.items():
        held = kept(module, data)
        for kind in KINDS:
            ts, n = times[name][kind], counts[kind]
            print(f"{name} {kind} x{n}: projection {min(ts):.3f}s best "
                  f"({' '.join(f'{t:.3f}' for t in ts)}) = {min(ts) * 1e6 / n:.1f} us each; "
                  f"kept {held[kind] / 2**20:.1f} MB = {held[kind] / n:.0f} B each, "
                  f"{held[kind] / 2**20 * 1000 / args.nodes:.1f} MB per 1,000 nodes")  # fmt: skip
        done = held[FINISHED + " count"]
        print(f"{name} of the pods, {done:.0f} Succeeded of a Job: {held[FINISHED] / done:.0f} B each, "
              f"{held[FINISHED] / 2**20 * 1000 / args.nodes:.1f} MB per 1,000 nodes")  # fmt: skip
        grown = updated(module, data)
        print(f"{name} Job updated after its pods: {grown:+.0f} B each, "
              f"{grown * counts['Job'] / 2**20 * 1000 / args.nodes:+.1f} MB per 1,000 nodes")  # fmt: skip


if __name__ == "__main__":
    main()
