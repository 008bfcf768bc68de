"""Damaged snapshots through the CLI: each is refused with one line naming the file, the object
and the field (exit 2), or read with what it lacks said; none takes more than 10 s or 1 GB,
hangs, or ends in a traceback; none is silently judged."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

BIN = Path(sys.executable).with_name("gpu-triage")
FIXTURES = Path(__file__).parents[1] / "fixtures"
BASE = FIXTURES / "selector-mismatch.yaml"  # research/llama-eval-0 asks for 8 GPUs
POD = ("llama-eval-0", "-n", "research")
SECONDS, BYTES = 20.0, 1 << 30  # bounds a hang or a blow-up, with room for a loaded machine


# The CLI is started by a small interpreter that reports the CLI's peak RSS: a child spawned
# straight from this test process would report this process's peak as its own (Linux carries
# the spawning process's peak RSS into the child's at exec), and a pytest worker that ran
# large tests before this one can be past the bound.
_LAUNCH = """
import os, sys
pid = os.posix_spawn(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
os.write(int(sys.argv[1]), str(usage.ru_maxrss).encode())
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run(path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """The CLI on a snapshot, within the budget of time and memory (both checked here: the
    CLI's own peak RSS, from wait4)."""
    report, reported = os.pipe()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCH, str(reported), str(BIN), "why-pending", *POD,
             "--snapshot", str(path), *args],
            stdout=out,
            stderr=err,
            env={**os.environ, **(env or {})},
            pass_fds=(reported,),
            start_new_session=True,  # a hang fails: the killer ends the CLI with its launcher
        )  # fmt: skip
        os.close(reported)
        killer = threading.Timer(SECONDS * 3, os.killpg, (proc.pid, signal.SIGKILL))
        killer.start()
        try:
            proc.wait()
            with os.fdopen(report, "rb") as said:
                peak_kb = int(said.read() or 0)
        finally:
            killer.cancel()
        took = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    assert took < SECONDS, f"took {took:.1f} s: {stderr}"
    assert peak_kb * 1024 < BYTES, f"peak RSS {peak_kb >> 10} MB"
    assert "Traceback" not in stderr, stderr
    return proc.returncode, stdout, stderr


def items(path: Path = BASE) -> list[dict[str, Any]]:
    return list(yaml.safe_load(path.read_text())["items"])


def the_pod(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in objs if o["kind"] == "Pod" and o["metadata"]["name"] == POD[0])


def write(tmp: Path, objs: list[dict[str, Any]], name: str = "snap.yaml") -> Path:
    """The objects as one List, in JSON, which is YAML too: every string stays a string."""
    path = tmp / name
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}, indent=1))
    return path


def refused(tmp: Path, path: Path, *needles: str) -> str:
    code, out, err = run(path)
    lines = err.splitlines()
    assert code == 2 and out == "", err
    assert len(lines) == 1 and lines[0].startswith("gpu-triage: error: "), err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# --- bounded reading and parsing -----------------------------------------------------------


def test_deep_json(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    refused(tmp_path, path, "deep.json: invalid JSON", "depth")


def test_deep_yaml(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("a: " + "[" * 100_000 + "]" * 100_000 + "\n")
    refused(tmp_path, path, "deep.yaml: invalid YAML")


def test_deep_but_parseable_values_are_refused_before_the_engine_walks_them(
    tmp_path: Path,
) -> None:
    objs = items()
    the_pod(objs)["spec"]["affinity"] = json.loads('{"a": ' * 500 + "1" + "}" * 500)
    refused(tmp_path, _json(tmp_path, objs), "Pod research/llama-eval-0", "nested more than")


def _json(tmp: Path, objs: list[dict[str, Any]]) -> Path:
    path = tmp / "snap.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))
    return path


ALIAS_BOMB = "".join(
    [
        "a: &a [x, x, x, x, x, x, x, x, x]\n",
        *(
            f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n"
            for p, c in zip("abcdefgh", "bcdefghi", strict=True)
        ),
    ]
)


def test_alias_bomb(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(ALIAS_BOMB + "kind: Pod\nmetadata: {name: x}\n")
    refused(tmp_path, path, "bomb.yaml: invalid YAML", "alias")


def test_alias_bomb_inside_a_field(tmp_path: Path) -> None:
    bomb = "\n".join("    " + line for line in ALIAS_BOMB.splitlines())
    path = tmp_path / "bomb.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: llama-eval-0\n  namespace: research\n"
        f"spec:\n  affinity:\n{bomb}\n  containers: [{{name: c}}]\n"
    )
    refused(tmp_path, path, "bomb.yaml: invalid YAML", "alias")


def test_too_many_documents(tmp_path: Path) -> None:
    path = tmp_path / "docs.yaml"
    path.write_text("---\n" * 2_000_000)
    refused(tmp_path, path, "more than 1,000,000 YAML documents")


def test_a_fifo_is_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "x.yaml")  # nothing writes to it: reading it would block forever
    write(tmp_path, items(), "cluster.yaml")
    refused(tmp_path, tmp_path, "x.yaml: not a regular file (a FIFO)")
    refused(tmp_path, tmp_path / "x.yaml", "not a regular file")


def test_a_device_is_not_read(tmp_path: Path) -> None:
    write(tmp_path, items(), "cluster.yaml")
    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    refused(tmp_path, tmp_path, "zero.yaml: not a regular file (a device")


def test_a_snapshot_over_the_size_limit_is_refused_at_once(tmp_path: Path) -> None:
    path = write(tmp_path, items() * 1)
    code, _, err = run(path, env={"GPU_TRIAGE_SNAPSHOT_MAX_MB": "0"})  # 0 means the default
    assert code == 0, err
    big = tmp_path / "big.yaml"
    big.write_text(path.read_text() + "#" * (2 << 20))
    code, _, err = run(big, env={"GPU_TRIAGE_SNAPSHOT_MAX_MB": "1"})
    assert code == 2 and "larger than GPU_TRIAGE_SNAPSHOT_MAX_MB allows (1 MiB" in err


@pytest.mark.parametrize("shape", ["[" + ",".join(["{}"] * 3_500_000) + "]",
                                   "- {}\n" * 3_500_000])  # fmt: skip
def test_dense_input_is_bounded_by_its_values(tmp_path: Path, shape: str) -> None:
    path = tmp_path / ("dense.json" if shape.startswith("[") else "dense.yaml")
    path.write_text(shape)
    refused(tmp_path, path, "holds more values than GPU_TRIAGE_SNAPSHOT_MAX_MB allows")


# --- objects the API server would refuse -----------------------------------------------------


def _edit(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        objs = items()
        change(the_pod(objs))
        return write(tmp, objs)

    return make


def _node(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        objs = items()
        change(next(o for o in objs if o["kind"] == "Node"))
        return write(tmp, objs)

    return make


def _gpu(value: Any) -> Callable[[dict[str, Any]], None]:
    def set_it(pod: dict[str, Any]) -> None:
        res = pod["spec"]["containers"][0]["resources"]
        res["requests"]["nvidia.com/gpu"] = res["limits"]["nvidia.com/gpu"] = value

    return set_it


def _set(*path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def set_it(obj: dict[str, Any]) -> None:
        cur = obj
        for part in path[:-1]:
            cur = cur[part]
        cur[path[-1]] = value

    return set_it


BAD_OBJECTS: dict[str, tuple[Callable[[Path], Path], tuple[str, ...]]] = {
    "metadata a string": (_edit(_set("metadata", value="hello")),
                          ("metadata: expected a mapping, got a string",)),
    "spec a string": (_edit(_set("spec", value="x")),
                      ("Pod research/llama-eval-0", "spec: expected a mapping")),
    "containers a mapping": (_edit(_set("spec", "containers", value={"name": "x"})),
                             ("spec.containers: expected a list",)),
    "a label a number": (_edit(_set("metadata", "labels", value={"team": 7})),
                         ("metadata.labels.team: expected a string, got an integer",)),
    "limits a list": (_edit(lambda p: p["spec"]["containers"][0]["resources"].update(limits=[1])),
                      ("resources.limits: expected a mapping, got a list",)),
    "kind a list": (_edit(_set("kind", value=["Pod"])), ("kind: expected a string, got list",)),
    "gpu -1": (_edit(_gpu("-1")), ("nvidia.com/gpu: '-1' is negative",)),
    "gpu lots": (_edit(_gpu("lots")), ("nvidia.com/gpu: not a Kubernetes quantity: 'lots'",)),
    "gpu 0.5": (_edit(_gpu("0.5")), ("nvidia.com/gpu: '0.5' is not a whole number",)),
    "gpu 100m": (_edit(_gpu("100m")), ("nvidia.com/gpu: '100m' is not a whole number",)),
    "gpu 1e99999999": (_edit(_gpu("1e99999999")), ("quantity out of range: '1e99999999'",)),
    "gpu request above limit": (
        _edit(lambda p: p["spec"]["containers"][0]["resources"]["requests"].update(
            {"nvidia.com/gpu": "9"})),
        ("requests.nvidia.com/gpu: must equal its limit",)),
    "memory 1e99999999": (
        _edit(lambda p: p["spec"]["containers"][0]["resources"]["requests"].update(
            memory="1e99999999")),
        ("requests.memory: quantity out of range",)),
    "negative allocatable": (_node(lambda n: n["status"]["allocatable"].update(
        {"nvidia.com/gpu": "-8"})), ("status.allocatable.nvidia.com/gpu: '-8' is negative",)),
    "a node without a name": (_node(lambda n: n["metadata"].pop("name")),
                              ("a Node without a name: metadata.name: missing",)),
    "a container's end a string": (
        _edit(lambda p: p["status"].update(containerStatuses=[
            {"name": "x", "state": {"terminated": "OOMKilled"}}])),
        ("status.containerStatuses[0].state.terminated: expected a mapping, got a string",)),
    "an exit code a list": (
        _edit(lambda p: p["status"].update(initContainerStatuses=[
            {"name": "x", "lastState": {"terminated": {"exitCode": [1]}}}])),
        ("status.initContainerStatuses[0].lastState.terminated.exitCode: expected an integer",)),
    "a node selector term a string": (
        _edit(_set("spec", "affinity", value={"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": ["gpu"]}}})),
        ("nodeSelectorTerms[0]: expected a mapping, got a string",)),
    "a spread's skew a string": (
        _edit(_set("spec", "topologySpreadConstraints", value=[
            {"maxSkew": "1", "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}])),
        ("spec.topologySpreadConstraints[0].maxSkew: expected an integer, got a string",)),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_OBJECTS))
def test_objects_the_api_server_would_refuse(tmp_path: Path, case: str) -> None:
    make, needles = BAD_OBJECTS[case]
    refused(tmp_path, make(tmp_path), "snap.yaml: ", *needles)


def test_two_different_copies_of_one_object_are_refused(tmp_path: Path) -> None:
    objs = items()
    write(tmp_path, objs, "a.yaml")
    changed = json.loads(json.dumps(the_pod(objs)))
    changed["status"]["phase"] = "Running"
    write(tmp_path, [changed], "b.yaml")
    refused(tmp_path, tmp_path, "Pod research/llama-eval-0 appears twice", "a.yaml", "b.yaml")
    (tmp_path / "b.yaml").unlink()
    write(tmp_path, [the_pod(objs)], "b.yaml")  # the same copy twice: one is kept
    code, out, err = run(tmp_path)
    assert code == 0 and "BLOCKED at layer scheduling" in out, err


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("", "the snapshot holds no objects"),
        ("apiVersion: v1\nkind: List\nitems: 5\n", "a List's items must be a list, not int"),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
         "holds no objects of the kinds the engine reads"),
        ("just words\n", "expected Kubernetes objects"),
        ("a: 1\na: 2\nkind: Pod\n", "duplicate mapping key"),
    ],
)  # fmt: skip
def test_empty_and_shapeless_snapshots(tmp_path: Path, content: str, needle: str) -> None:
    path = tmp_path / "snap.yaml"
    path.write_text(content)
    refused(tmp_path, path, needle)


# --- what a snapshot lacks is said, not judged ----------------------------------------------


def test_a_snapshot_without_nodes_leaves_the_node_layers_unknown(tmp_path: Path) -> None:
    path = write(tmp_path, [o for o in items() if o["kind"] != "Node"])
    code, out, err = run(path, "-o", "json", "--exit-code")
    assert code == 5, err
    report = json.loads(out)
    assert report["answer"] == "unknown" and report["failing_layer"] is None
    assert {"driver", "scheduling"} <= set(report["unknown_layers"])
    assert report["unread"][0]["fault"] == "not-in-snapshot"
    assert "holds no Nodes" in report["unread"][0]["message"]


def test_objects_of_an_api_version_the_engine_does_not_read_make_their_kind_unknown(
    tmp_path: Path,
) -> None:
    objs = items(FIXTURES / "resourcequota-exceeded.yaml")
    for o in objs:
        if o["kind"] == "ResourceQuota":
            o["apiVersion"] = "v2"
    path = write(tmp_path, objs)
    p = subprocess.run(
        [str(BIN), "why-pending", "pretrain-13b", "-n", "team-nlp", "--snapshot", str(path),
         "-o", "json", "--exit-code"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    report = json.loads(p.stdout)  # the Job's FailedCreate events still show the quota...
    assert report["failing_layer"] == "quota" and p.returncode == 1, p.stderr
    assert report["unknown_layers"] == ["quota"]  # ...but not the ResourceQuota objects
    [unread] = report["unread"]
    assert unread["fault"] == "not-in-snapshot" and unread["resource"] == "resourcequotas"
    assert "the snapshot's ResourceQuota objects are v2" in unread["message"]


def test_odd_shapes_the_engine_does_not_read_are_judged_as_they_are(tmp_path: Path) -> None:
    """A container without an image (`image: null`), and fields the cache would slim away
    given shapes no API server stores: the pod is judged, not a traceback; `--snapshot`
    keeps such an object whole rather than failing to slim it."""
    objs = items()
    pod = the_pod(objs)
    pod["spec"]["containers"][0]["image"] = None
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "x": {"y": [1]}}]
    for obj in objs:
        if obj["kind"] == "Pod" and obj is not pod:
            obj["spec"]["containers"][0]["image"] = None
            obj["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "x", "uid": "u"}]
            obj.setdefault("status", {})["containerStatuses"] = [
                {"name": "c", "state": {"running": {"startedAt": 5}}, "imageID": 7}
            ]
    code, out, err = run(write(tmp_path, objs))
    assert code in (0, 1) and "pod research/llama-eval-0" in out, err


def _first(kind: str, change: Callable[[dict[str, Any]], None]) -> Callable[[list[Any]], None]:
    def edit(objs: list[Any]) -> None:
        change(next(o for o in objs if o["kind"] == kind))

    return edit


# Other kinds the engine walks, damaged: each was an `internal error` before it was checked.
OTHER_KINDS: dict[str, tuple[str, Callable[[list[Any]], None], str]] = {
    "a LimitRange's max a list": ("limitrange-gpu-max.yaml", _first(
        "LimitRange", lambda o: o["spec"]["limits"][0].update(max=[1])),
        "LimitRange team-nlp/gpu-per-container: spec.limits[0].max: expected a mapping, got a list"),
    "a device's capacity a list": ("dra-other-driver.yaml", _first(
        "ResourceSlice", lambda o: o["spec"]["devices"][0].update(capacity=[1])),
        "spec.devices[0].capacity: expected a mapping, got a list"),
    "a ClusterPolicy's driver a string": ("volume-zone-conflict.yaml", _first(
        "ClusterPolicy", lambda o: o["spec"].update(driver="on")),
        "spec.driver: expected a mapping, got a string"),
    "a NodePool requirement's values a number": ("karpenter-no-instance-type.yaml", _first(
        "NodePool", lambda o: o["spec"]["template"]["spec"]["requirements"][0].update(values=3)),
        "spec.template.spec.requirements[0].values: expected a list, got an integer"),
    "a volume's node affinity values nested": ("volume-zone-conflict.yaml", _first(
        "PersistentVolume", lambda o: o["spec"].update(nodeAffinity={"required": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "zone", "operator": "In", "values": [["a"]]}]}]}})),
        "matchExpressions[0].values[0]: expected a string, got a list"),
    "a claim's allocation results a string": ("dra-devices-allocated.yaml", _first(
        "ResourceClaim", lambda o: o.setdefault("status", {}).update(
            allocation={"devices": {"results": "gpu-0"}})),
        "status.allocation.devices.results: expected a list, got a string"),
    "a ClusterQueue's conditions a number": ("usable-node-but-gated.yaml", _first(
        "ClusterQueue", lambda o: o.setdefault("status", {}).update(conditions=7)),
        "status.conditions: expected a list, got an integer"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(OTHER_KINDS))
def test_other_kinds_damaged_are_one_line_errors(tmp_path: Path, case: str) -> None:
    fixture, edit, needle = OTHER_KINDS[case]
    objs = items(FIXTURES / fixture)
    edit(objs)
    refused(tmp_path, write(tmp_path, objs), "snap.yaml: ", needle)


def test_pods_of_no_namespace_or_a_bad_one_are_named_and_the_rest_judged(
    tmp_path: Path,
) -> None:
    """A manifest's pod without a namespace, a pod in a namespace no API server allows: the
    sweep names each among what it could not triage and judges every other workload; a pod
    elsewhere is triaged as before."""
    objs = items()
    strays = [copy.deepcopy(the_pod(objs)) for _ in range(2)]
    strays[0]["metadata"].pop("namespace")
    strays[0]["metadata"]["name"] = "stray-0"
    strays[1]["metadata"].update(namespace="Team_A", name="stray-1")
    for stray in strays:
        stray["metadata"].pop("ownerReferences", None)
    path = write(tmp_path, [*objs, *strays])
    proc = subprocess.run([str(BIN), "pending", "-A", "--snapshot", str(path), "-o", "json"],
                          capture_output=True, text=True, timeout=SECONDS)  # fmt: skip
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
    swept = json.loads(proc.stdout)
    errors = "\n".join(swept["errors"])
    assert "(no namespace)/stray-0: namespace is empty" in errors
    assert "Team_A/stray-1: invalid namespace 'Team_A'" in errors
    assert any(m["name"] == "llama-eval" for g in swept["groups"] for m in g["members"]), swept
    code, out, err = run(path)  # the pod of a namespace that is one
    assert code == 0 and "llama-eval-0" in out, err
