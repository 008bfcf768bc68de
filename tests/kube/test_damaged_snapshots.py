"""Snapshots damaged at random: a field of an object set to a value of another type. Whatever
the damage, reading it is an answer or a one-line `MalformedSnapshotError` naming the field,
never a traceback, and the answers read slim (as the CLI reads) equal those read whole.

Each case takes a fixture, sets one to three fields of one object (anywhere in its metadata,
spec or status) to a value of an odd type, then reads the snapshot both ways, sweeps it and
triages its workloads. This found snapshots that passed the check and crashed the engine
(container states, affinity terms, claims, LimitRanges, DRA, Kueue, Karpenter, ClusterPolicy
objects of the wrong shape) and one the projection could not slim.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.goldens import snapshots
from kube.slim import projections
from triage import triage
from triage.cluster.memory import MemorySource
from triage.cluster.snapshot import load_objects, load_snapshot
from triage.cluster.source import SourceError
from triage.fleet import sweep
from triage.names import InvalidNameError
from triage.render import report_data, to_text

ODD: list[Any] = [None, 0, 7, -1, 1.5, True, "", "x", [], ["x"], [1], {}, {"a": 1}, [{}], [None]]
WORKLOADS = ("Pod", "Job", "StatefulSet", "Deployment")
CASES = 40  # per seed


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(
        value, list) else ()  # fmt: skip
    for key, child in items:
        yield from _paths(child, (*prefix, key))


def _damaged(rng: random.Random, objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    objs = copy.deepcopy(objs)
    victim = rng.choice(objs)
    paths = [p for p in _paths(victim) if p and p[0] in ("metadata", "spec", "status")]
    for _ in range(rng.randint(1, 3)):
        *parents, last = rng.choice(paths)
        node: Any = victim
        try:
            for part in parents:
                node = node[part]
            node[last] = copy.deepcopy(rng.choice(ODD))
        except (KeyError, IndexError, TypeError):
            continue  # a path a previous change took away
    return objs


def _answers(source: MemorySource, targets: list[tuple[str, str]]) -> list[str]:
    swept = sweep(source).model_dump(mode="json")
    swept.pop("generated_at")
    out = [json.dumps(swept, sort_keys=True, default=str)]
    for ns, name in targets:
        try:
            report = triage(source, namespace=ns, name=name)
        except (SourceError, InvalidNameError) as e:  # one line to a user, as the CLI says it
            out.append(type(e).__name__)
            continue
        data = report_data(report)
        data.pop("generated_at", None)
        out.append(json.dumps(data, sort_keys=True, default=str) + to_text(report))
    return out


def _read(path: Path, targets: list[tuple[str, str]], *, slim: bool) -> tuple[str, Any]:
    try:
        source = load_snapshot(path, project=projections() if slim else None)
    except SourceError as e:  # MalformedSnapshotError among them: the one-line error
        assert "\n" not in str(e), str(e)
        return "refused", type(e).__name__
    return "read", _answers(source, targets)


@pytest.mark.parametrize("seed", range(6))
def test_damage_is_an_answer_or_a_one_line_error_and_slim_reads_agree(
    seed: int, tmp_path: Path
) -> None:
    rng = random.Random(seed)
    fixtures = snapshots()
    outcomes: dict[str, int] = {}
    for case in range(CASES):
        objs = _damaged(rng, load_objects(rng.choice(fixtures)))
        targets = [
            (str(o["metadata"].get("namespace") or "default"), str(o["metadata"].get("name")))
            for o in objs
            if o.get("kind") in WORKLOADS and isinstance(o.get("metadata"), dict)
        ][:4]
        path = tmp_path / f"case-{case}.json"
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))
        whole = _read(path, targets, slim=False)
        slim = _read(path, targets, slim=True)
        assert slim == whole, f"seed {seed} case {case}"
        outcomes[whole[0]] = outcomes.get(whole[0], 0) + 1
    assert outcomes.get("read", 0) >= 1  # damage the engine reads past, not only refusals
