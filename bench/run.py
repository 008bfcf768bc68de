"""The CLI's path and the bot's cache: time, API requests and memory, against one floor.

    python -m bench.run --nodes 500 --pods 15000 [--triages 1000] [--cli 2]

The floor, measured first in the same run: receiving and decoding every list page the cache
reads (same kinds, same page size, same server), with orjson, the GC off and nothing kept.
The CLI's path (a fresh live source per command, in a process of its own: `bench.cli`), the
cache's cold sync and the fleet sweeps are printed as multiples of it, and the cold sync and
memory per 1,000 nodes.

After the sync the cache is warmed up as the bot warms it (`triage.prepare`: every node's
health, the pod indexes, the nodes evaluated once per shape of the pods waiting for one),
timed on its own. Last, the figures are set against the row for the
same cluster size in docs/sizing.md (ratios to the floor, memory, the warm tail): the table is
updated from this output.

The synthetic cluster is served by `bench.serve` in a child process over loopback HTTP; this
process drives the real kubernetes client. When the engine cannot run yet, the per-triage
work is the reads every triage makes (namespace, pod, nodes, quotas, node usage, events).
"""

from __future__ import annotations

import argparse
import gc
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from bench.serve import launch
from bench.synth import PENDING_KINDS, RESERVED
from kube.cache import CACHED_KINDS, CachedSource, few_malloc_arenas
from kube.client import RawClient, load_client
from kube.lists import PAGE_SIZE
from kube.testing import write_kubeconfig
from triage.cluster.source import KINDS, ClusterSource

SIZING = Path(__file__).resolve().parent.parent / "docs" / "sizing.md"


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def floor(client: RawClient) -> tuple[float, int, float]:
    """Seconds to receive and decode every list page the cache reads, keeping nothing; the
    pages and the megabytes they held."""
    pages, size = 0, 0
    loads = orjson.loads

    def measured(data: bytes) -> Any:
        nonlocal size
        size += len(data)
        return loads(data)

    gc.disable()
    t0 = time.monotonic()
    try:
        for kind in CACHED_KINDS:
            token = ""
            while True:
                query = [("limit", str(PAGE_SIZE))] + ([("continue", token)] if token else [])
                body = client.get_json(KINDS[kind], verb="list", query=query, decode=measured)
                pages += 1
                token = (
                    "" if body is None else str((body.get("metadata") or {}).get("continue") or "")
                )
                del body
                if not token:
                    break
        return time.monotonic() - t0, pages, size / 2**20
    finally:
        gc.enable()


def reads(source: ClusterSource, ns: str, name: str) -> Any:
    """What every triage reads, used when the engine is not available."""
    source.get("Namespace", ns)
    pod = source.get("Pod", name, namespace=ns)
    source.objects("Node")
    source.objects("ResourceQuota", namespace=ns)
    source.objects("Pod", namespace="gpu-operator")
    source.node_usage()
    source.events_for(namespace=ns, kind="Pod", name=name)
    return pod


def pick_workload(
    sample: ClusterSource, ns: str, name: str, *, wanted: str
) -> tuple[str, Callable[..., Any]]:
    if wanted == "reads":
        return "reads", reads
    try:
        from triage import triage
        from triage.playbooks import load_playbook

        playbook = load_playbook()  # once, as the bot does
        triage(sample, namespace=ns, name=name, playbook=playbook)
        return "triage.triage", lambda src, ns, name: triage(
            src, namespace=ns, name=name, playbook=playbook
        )
    except Exception as e:  # the engine may be unfinished; say so and measure the reads
        print(f"note: engine unavailable ({type(e).__name__}: {e}); timing the reads instead")
        return "reads", reads


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def cli_path(
    kubeconfig: Path, pending: list[tuple[str, ...]], pinned: list[list[str]], rounds: int,
    floor_s: float,
) -> float | None:  # fmt: skip
    """The CLI's path, in a process of its own (`bench.cli`): why-pending for each kind of
    stuck pod (the synthetic cluster makes them in turn) and for pods pinned to a 64-node
    pool, then `pending -A`; each against the floor. The p50 of every why-pending."""
    if rounds <= 0:
        return None
    n = len(PENDING_KINDS)  # the synthetic cluster makes its stuck pods of each kind in turn
    cases: dict[str, list[Any]] = {
        kind: [pending[k + n * r] for r in range(rounds) if k + n * r < len(pending)]
        for k, kind in enumerate(PENDING_KINDS)
        if k < len(pending)
    }
    if pinned:
        cases[f"pinned to a {RESERVED}-node pool"] = pinned
    command = [sys.executable, "-m", "bench.cli", "--kubeconfig", str(kubeconfig),
               "--cases", json.dumps(cases), "--rounds", str(rounds)]  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    every: list[float] = []
    by_case: dict[str, list[dict[str, Any]]] = {}
    for line in out.splitlines():
        got = json.loads(line)
        by_case.setdefault(got["what"], []).append(got)
    sweep = by_case.pop("pending -A", [])
    for what, runs in [*by_case.items(), ("pending -A", sweep)]:
        ms = [r["ms"] for r in runs]
        if what != "pending -A":
            every += ms
        print(f"CLI {'' if what == 'pending -A' else 'why-pending, '}{what} x{len(runs)}: "
              f"{' / '.join(f'{m:.0f}' for m in ms)} ms = "
              f"{max(ms) / 1000 / floor_s:.2f}x the floor (the slowest); API requests "
              f"{' / '.join(str(r['requests']) for r in runs)}; {runs[-1]['detail']}")  # fmt: skip
    return pct(every, 50) if every else None


def fleet(
    cache: CachedSource, single_p50: float, change: Callable[[str], list[Any]], floor_s: float
) -> float:
    """The fleet view: every stuck GPU workload triaged and grouped. Full sweeps (every
    workload triaged; the first after the single-pod triages, then a repeat), then the bot's
    sweeps that keep answers between them: with nothing changed, and after one change of each
    kind (`change` applies it on the server and returns what it touched)."""
    from triage.fleet import FleetMemo, sweep
    from triage.playbooks import load_playbook

    playbook = load_playbook()

    def run(title: str, memo: FleetMemo | None, last: Any = None) -> Any:
        before = cache.client.requests
        t = time.perf_counter()
        result = sweep(cache, playbook=playbook, memo=memo)
        seconds = time.perf_counter() - t
        per = seconds * 1000 / max(result.workloads + len(result.waiting), 1)
        touched = _touched(last, result) if last is not None else len(result.groups)
        print(f"fleet {title}: {seconds:.2f}s ({seconds / floor_s:.2f}x the floor), "
              f"{result.workloads} stuck workloads in "
              f"{len(result.groups)} groups, {result.gpus} GPUs waiting; triaged "
              f"{result.triaged}, kept {result.reused}; groups touched {touched} of "
              f"{len(result.groups)}; API requests {cache.client.requests - before}; "
              f"{per:.2f} ms per workload = {per / single_p50:.3f}x a single-pod warm triage "
              f"(p50 {single_p50:.2f} ms)  RSS {rss_mb():.0f} MB")  # fmt: skip
        return result

    t = time.perf_counter()
    run("sweep, full (first)", None)
    run("sweep, full (repeat)", None)
    full = (time.perf_counter() - t) / 2
    memo = FleetMemo()
    last = run("sweep keeping answers, first", memo)
    last = run("re-sweep, nothing changed", memo, last)
    for kind, what in (("heartbeat", "a node's status heartbeat"),
                       ("finish", "a running pod finished"),
                       ("crash", "a driver pod crashed on a healthy node")):  # fmt: skip
        touched = change(kind)
        last = run(f"re-sweep after one change ({what}: {'/'.join(touched[1:3])})", memo, last)
    return full


def churned_sweep(cache: CachedSource, rate: float) -> float:
    """A full fleet sweep while the cluster changes `rate` times a second: its seconds."""
    from triage.fleet import sweep
    from triage.playbooks import load_playbook

    t = time.perf_counter()
    result = sweep(cache, playbook=load_playbook())
    seconds = time.perf_counter() - t
    print(f"fleet sweep, full, {rate:g} changes/s: {seconds:.2f}s, {result.workloads} stuck "
          f"workloads in {len(result.groups)} groups  RSS {rss_mb():.0f} MB")  # fmt: skip
    return seconds


# What `compare` reads of a row of docs/sizing.md's table, in its column order.
_COLUMNS = ("cache", "rss", "swept", "sync", "p99", "sweep")


def previous(nodes: int, text: str) -> dict[str, float] | None:
    """The figures docs/sizing.md's table holds for a cluster of `nodes` nodes (None when it
    has no such row): numbers in the order of `_COLUMNS`, a cold sync as its multiple of
    the floor ("6.2 s (3.25 s)": 1.91)."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not cells or not cells[0].startswith(f"{nodes:,} /"):
            continue
        got: dict[str, float] = {}
        for name, cell in zip(_COLUMNS, cells[1:], strict=False):
            numbers = [float(n) for n in re.findall(r"[0-9]+(?:\.[0-9]+)?", cell.replace(",", ""))]
            if name == "sync" and len(numbers) >= 2 and numbers[1]:
                got[name] = numbers[0] / numbers[1]
            elif numbers:
                got[name] = numbers[0]
        return got
    return None


def compare(nodes: int, now: dict[str, float]) -> None:
    """This run's figures against the row for the same size in docs/sizing.md."""
    try:
        before = previous(nodes, SIZING.read_text())
    except OSError:
        before = None
    if not before:
        print(f"docs/sizing.md has no row for {nodes:,} nodes to compare with")
        return
    said = {"cache": ("cache memory", "MB", 0), "rss": ("RSS after the sync", "MB", 0),
            "swept": ("RSS after the sweeps", "MB", 0), "sync": ("cold sync", "x the floor", 2),
            "p99": ("warm p99, quiet", "ms", 1), "sweep": ("full sweep", "s", 2)}  # fmt: skip
    parts = []
    for key, (what, unit, digits) in said.items():
        if key in now and key in before:
            sep = "" if unit.startswith("x") else " "
            parts.append(f"{what} {now[key]:.{digits}f}{sep}{unit} (was {before[key]:.{digits}f})")
    print(f"against docs/sizing.md ({nodes:,} nodes): " + "; ".join(parts))


def _touched(before: Any, after: Any) -> int:
    """Groups of `after` with a member triaged again, plus groups that came or went."""
    old = {g.key: {(m.namespace, m.name) for m in g.members} for g in before.groups}
    new = {g.key: {(m.namespace, m.name) for m in g.members} for g in after.groups}
    changed = {k for k, v in new.items() if old.get(k) != v}
    fresh = {g.key for g in after.groups if g.triaged}
    return len(changed | fresh | (old.keys() - new.keys()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=15000)
    parser.add_argument("--triages", type=int, default=1000)
    parser.add_argument(
        "--cli", "--naive", type=int, default=2, help="CLI triages of each kind of stuck pod"
    )
    parser.add_argument(
        "--workload",
        choices=("triage", "reads"),
        default="triage",
        help="the full engine, or only the source reads every triage makes",
    )
    parser.add_argument(
        "--churn",
        type=float,
        default=50.0,
        help="changes a second while triaging a second time (0: skip)",
    )
    parser.add_argument(
        "--sync",
        choices=("watch-list", "list"),
        default="watch-list",
        help="how the cache's first sync reads each kind: one watch-list stream, or list pages",
    )
    parser.add_argument(
        "--latency",
        type=float,
        default=0.0,
        help="seconds the server takes for each get or list page (not watches): a slow or "
        "distant API server",
    )
    args = parser.parse_args()
    few_malloc_arenas()  # as the bot's process does

    t0 = time.monotonic()
    server, info = launch(nodes=args.nodes, pods=args.pods, churn=args.churn, latency=args.latency)
    assert server.stdout is not None and server.stdin is not None
    pending = [tuple(p) for p in info["pending"]]
    print(f"cluster: {args.nodes} nodes, {args.pods} pods, {len(pending)} pending; "
          f"generated and served in {time.monotonic() - t0:.1f}s at {info['url']}")  # fmt: skip
    kubeconfig = write_kubeconfig(
        info["url"], Path(tempfile.mkdtemp()) / "kubeconfig", context="bench"
    )

    def client() -> RawClient:
        api, name = load_client(kubeconfig=str(kubeconfig))
        return RawClient(api, cluster_name=name)

    try:
        floor_s, pages, mb = floor(client())
        print(f"floor (receive + decode {pages} list pages, {mb:.0f} MB, keep nothing): "
              f"{floor_s:.2f}s")  # fmt: skip
        cli_p50 = cli_path(kubeconfig, pending, info.get("pinned") or [], args.cli, floor_s)
        gc.collect()
        base = rss_mb()
        t0 = time.monotonic()
        cache = CachedSource(
            client(), sync_timeout=1800, watch_list=args.sync == "watch-list"
        ).start()
        assert cache.wait_synced(1800), "cache did not sync"
        cold = time.monotonic() - t0
        rss = rss_mb()
        print(f"cold sync ({args.sync}): {cold:.2f}s = {cold / floor_s:.2f}x the floor  RSS {rss:.0f} MB "
              f"(cache +{rss - base:.0f} MB)  {cache.stats()}")  # fmt: skip
        per = 1000 / args.nodes
        print(f"per 1,000 nodes ({args.pods // args.nodes} pods each): cold sync "
              f"{cold * per:.2f}s, floor {floor_s * per:.2f}s, cache {(rss - base) * per:.0f} MB")  # fmt: skip
        figures: dict[str, float] = {"sync": cold / floor_s, "cache": rss - base, "rss": rss}
        if args.workload == "triage":
            from triage import prepare

            t = time.perf_counter()
            done = cache.warm(prepare)  # as the cache's warm-up after the sync runs it
            print(f"warm-up after the sync, as the bot does it (triage.prepare: the health of "
                  f"{done.nodes} nodes, the pod indexes, {done.shapes} shapes of waiting pods "
                  f"evaluated): {time.perf_counter() - t:.2f}s  RSS {rss_mb():.0f} MB")  # fmt: skip

        label, work = pick_workload(cache, *pending[0], wanted=args.workload)

        def warm(title: str) -> tuple[float, float]:
            before = cache.client.requests
            times = []
            for i in range(args.triages):
                ns, name = pending[i % len(pending)]
                t = time.perf_counter()
                work(cache, ns, name)
                times.append((time.perf_counter() - t) * 1000)
            per = (cache.client.requests - before) / args.triages
            print(f"{title} {label} x{args.triages}: p50 {pct(times, 50):.2f} ms  "
                  f"p95 {pct(times, 95):.2f} ms  p99 {pct(times, 99):.2f} ms  "
                  f"API requests/triage {per:.2f}  RSS {rss_mb():.0f} MB")  # fmt: skip
            return pct(times, 50), pct(times, 99)

        def change(kind: str) -> list[Any]:
            """One change on the server, returned once the cache has it."""
            server.stdin.write(f"one {kind}\n")  # type: ignore[union-attr]
            server.stdin.flush()  # type: ignore[union-attr]
            said = json.loads(server.stdout.readline())  # type: ignore[union-attr]
            touched = said["touched"]
            obj_kind = touched[0]
            deadline = time.monotonic() + 30
            want = int(said["resourceVersion"] or 0)
            while time.monotonic() < deadline:
                if int(cache.resource_version(obj_kind) or 0) >= want:
                    break
                time.sleep(0.01)
            return list(touched)

        p50, figures["p99"] = warm("warm")
        if label == "triage.triage":
            figures["sweep"] = fleet(cache, p50, change, floor_s)
        after_sweeps = rss_mb()
        if args.churn > 0:
            server.stdin.write("churn\n")
            server.stdin.flush()
            warm(f"warm, {args.churn:g} changes/s")  # the table's p99 is the quiet pass's
            if label == "triage.triage":
                figures["sweep"] = max(figures["sweep"], churned_sweep(cache, args.churn))
            server.stdin.write("quiet\n")
            server.stdin.flush()
            applied = json.loads(server.stdout.readline())["applied"]
            stats = cache.stats()
            print(f"  changes applied meanwhile: {applied} (node status, pods finishing and "
                  f"starting); pods cached {stats['Pod']} (finished pods of Jobs known by name "
                  f"{stats['pods_held_aside']}), relists {stats['relists']}")  # fmt: skip

        if cli_p50:
            print(f"speed-up (CLI why-pending p50 / warm p50): {cli_p50 / p50:.0f}x")
        print(f"per 1,000 nodes: floor {floor_s * per:.2f}s, cold sync {cold * per:.2f}s, "
              f"memory {(rss - base) * per:.0f} MB after the sync, "
              f"{(max(after_sweeps, rss_mb()) - base) * per:.0f} MB after the sweeps "
              f"and changes")  # fmt: skip
        figures["swept"] = max(after_sweeps, rss_mb())
        compare(args.nodes, figures)
        cache.close()
    finally:
        server.stdin.close()
        try:
            server.wait(120)  # freeing a large synthetic cluster takes a while
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    main()
