"""The CLI's path: a fresh live source per command, as `gpu-triage why-pending` and
`gpu-triage pending -A` open one, timed in a process of its own (as a command runs).

    python -m bench.cli --kubeconfig PATH --cases JSON [--rounds 2]

`bench.run` starts it after measuring the floor and prints its figures against that floor.
Prints one JSON line per measurement: {"what", "ms", "requests", "detail"}; the first is the
sweep of every namespace, with the process's peak RSS then.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from kube.live import LiveSource, connect
from kube.node_usage import NodeUsageReads
from triage import triage
from triage.fleet import sweep
from triage.playbooks import load_playbook


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def usage_read(source: LiveSource) -> str:
    usage = source.node_usage()
    if not isinstance(usage, NodeUsageReads):
        return ""
    if usage.whole:
        return "every pod"
    return f"the pods of {usage.nodes_read} nodes" if usage.nodes_read else "no pod"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--cases", required=True, help='{"what": [[ns, name], ...], ...}')
    parser.add_argument("--rounds", type=int, default=2, help="triages of each case")
    args = parser.parse_args()
    playbook = load_playbook()
    cases: dict[str, list[list[str]]] = json.loads(args.cases)

    def emit(what: str, seconds: float, source: LiveSource, detail: Any) -> None:
        out = {"what": what, "ms": seconds * 1000, "requests": source.client.requests}
        print(json.dumps(out | {"detail": detail}), flush=True)

    # The sweep first, in a fresh process: its peak memory is then its own.
    t = time.perf_counter()
    source = connect(kubeconfig=args.kubeconfig, read_ahead="sweep")
    result = sweep(source, playbook=playbook)
    seconds = time.perf_counter() - t
    emit("pending -A", seconds, source, {"workloads": result.workloads,
                                          "groups": len(result.groups),
                                          "peak_rss_mb": round(peak_rss_mb())})  # fmt: skip
    source.close()
    del source, result
    for what, pods in cases.items():
        for i in range(args.rounds):
            ns, name = pods[i % len(pods)]
            t = time.perf_counter()
            source = connect(kubeconfig=args.kubeconfig, read_ahead="triage")
            report = triage(source, namespace=ns, name=name, playbook=playbook)
            seconds = time.perf_counter() - t
            layer = report.failing_layer.value if report.failing_layer else "-"
            emit(what, seconds, source, f"{layer}; read {usage_read(source)}")
            source.close()


if __name__ == "__main__":
    main()
