"""Every report the engine gives on the bundled snapshots, for before/after comparisons.

A refactor that must not change behaviour is proven by running this before and after it:
every pod and workload of every fixture and of the demo is triaged (the full report, its
text rendering and the sweep's verdict), every fixture is swept, and the outputs are written
as one JSON line each (the clock-dependent `generated_at` removed). `--check FILE` compares
with an earlier run and prints the first differences.

    python -m bench.goldens --out /tmp/before.jsonl
    python -m bench.goldens --check /tmp/before.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpu_triage.sources import open_source
from triage import triage
from triage.engine import verdict
from triage.fleet import sweep
from triage.render import report_data, to_text

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("Pod", "Job", "Deployment", "StatefulSet", "ReplicaSet")


def snapshots() -> list[Path]:
    fixtures = sorted(
        p for p in (ROOT / "tests/fixtures").iterdir()
        if p.suffix in (".yaml", ".json") and p.name != "expected.yaml"
    )  # fmt: skip
    return [*fixtures, ROOT / "gpu_triage/demo/cluster.yaml"]


def outputs() -> Iterator[dict[str, Any]]:
    for path in snapshots():
        src = open_source(snapshot=str(path))  # as the CLI reads it
        for kind in KINDS:
            for obj in src.objects(kind):
                ns, name = obj["metadata"].get("namespace", "default"), obj["metadata"]["name"]
                report = triage(src, namespace=ns, name=name)
                data = report_data(report)
                data.pop("generated_at")
                yield {"file": path.name, "kind": kind, "target": f"{ns}/{name}",
                       "report": data, "text": to_text(report),
                       "verdict": verdict(src, namespace=ns, name=name).model_dump(mode="json")}  # fmt: skip
        result = sweep(open_source(snapshot=str(path))).model_dump(mode="json")
        result.pop("generated_at")
        yield {"file": path.name, "sweep": result}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write every output here")
    parser.add_argument("--check", type=Path, help="compare with an earlier --out")
    args = parser.parse_args()
    lines = [json.dumps(o, sort_keys=True, ensure_ascii=False) for o in outputs()]
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
        print(f"{len(lines)} outputs written to {args.out}")
    if args.check:
        before = args.check.read_text().splitlines()
        differ = [i for i, (a, b) in enumerate(zip(before, lines, strict=False)) if a != b]
        if len(before) != len(lines) or differ:
            print(f"{len(before)} outputs before, {len(lines)} now; {len(differ)} differ")
            for i in differ[:5]:
                print(f"- {before[i][:300]}\n+ {lines[i][:300]}")
            return 1
        print(f"{len(lines)} outputs, byte-identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
