"""`gpu-triage snapshot` against a fake API server on loopback, through the real client: it
collects exactly the kinds the engine reads, redacts what must not leave the cluster, says
what it could not collect, and `--snapshot` reads what it wrote (folder or .tar.gz) to the
same answer a live triage gives, or says what it could not judge."""

from __future__ import annotations

import json
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_triage.cli import main
from kube.client import resource_name
from kube.testing import FakeApiServer
from triage.cluster.kinds import KINDS, NAMED
from triage.cluster.snapshot import load_objects

FIXTURES = Path(__file__).parents[1] / "fixtures"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJrdWJlcm5ldGVzIn0.c2lnbmF0dXJlLXNpZ25hdHVyZQ"


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer(load_objects(FIXTURES / "dra-devices-allocated.yaml")) as server:
        yield server


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def report(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code, out, err = run(capsys, "why-pending", *args, "-o", "json")
    assert code == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


def test_a_snapshot_holds_exactly_the_engine_kinds_and_triages_as_the_live_cluster(
    api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
    archive = tmp_path / "prod.tar.gz"
    code, out, err = run(capsys, "snapshot", str(archive), "-A", "--kubeconfig", kubeconfig)
    assert code == 0, err
    assert out.startswith(f"wrote {archive}: ") and "not collected" not in out
    # What was asked of the API server: every kind of the engine's table, nothing else.
    listed = {p.rsplit("/", 1)[1] for p, q in api.requests if "watch" not in q}
    assert listed == {rt.plural for rt in KINDS.values()} | {
        name for _, _, names in NAMED.values() for name in names
    }
    assert archive.stat().st_mode & 0o077 == 0  # the owner's alone
    live = report(capsys, "detr-train-0", "-n", "team-vision", "--kubeconfig", kubeconfig)
    kept = report(capsys, "detr-train-0", "-n", "team-vision", "--snapshot", str(archive))
    assert kept["failing_layer"] == live["failing_layer"] == "scheduling"
    assert kept["headline"] == live["headline"]
    assert [f["codes"] for f in kept["findings"]] == [f["codes"] for f in live["findings"]]
    assert kept["cluster"] == "fake"  # the manifest names the cluster, not the file
    assert kept["notes"] == [] and kept["unread"] == []


def test_a_kind_that_could_not_be_collected_is_not_judged_and_every_report_says_so(
    api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ResourceSlices forbidden: the snapshot records it; a DRA pod's answer is unknown with
    the grant to add, and every report, of any pod, carries the note. A CRD the cluster does
    not serve is collected empty: served, and judged as none."""
    api.forbidden.add(("resourceslices", "*"))
    api.not_installed.add("kueue.x-k8s.io")
    kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
    folder = tmp_path / "snap"
    code, out, err = run(capsys, "snapshot", str(folder), "-A", "--kubeconfig", kubeconfig)
    assert code == 0, err
    assert "not collected: ResourceSlices (forbidden: " in out
    manifest = yaml.safe_load((folder / "manifest.yaml").read_text())
    assert manifest["kinds"]["ResourceSlice"]["collected"] is False
    assert manifest["kinds"]["Workload"] == {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "collected": True,
        "objects": 0,
        "installed": False,
    }
    r = report(capsys, "detr-train-0", "-n", "team-vision", "--snapshot", str(folder))
    assert r["answer"] == "unknown" and r["failing_layer"] is None
    [unread] = r["unread"]
    assert unread["fault"] == "not-in-snapshot" and unread["resource"] == RESOURCE_SLICES
    note = "no ResourceSlices in the snapshot (forbidden: "
    assert any(n.startswith(note) and n.endswith(": DRA claims not judged") for n in r["notes"])
    assert not any("Kueue" in n for n in r["notes"])
    code, out, _ = run(capsys, "why-pending", "detr-train-0", "-n", "team-vision",
                       "--snapshot", str(folder))  # fmt: skip
    assert f"Note: {note}" in out


RESOURCE_SLICES = resource_name(KINDS["ResourceSlice"])


def test_a_namespace_snapshot_keeps_every_running_pod_and_says_what_it_lacks_elsewhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`-n team-nlp`: quotas are that namespace's; the pods on every node are there (they
    decide what is free); a pod of another namespace is triaged, with its quota layer unknown
    (not "no quota")."""
    objects = load_objects(FIXTURES / "resourcequota-exceeded.yaml")
    with FakeApiServer(objects) as api:
        kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
        folder = tmp_path / "snap"
        code, _, err = run(capsys, "snapshot", str(folder), "-n", "team-nlp",
                           "--kubeconfig", kubeconfig)  # fmt: skip
        assert code == 0, err
        live = report(capsys, "pretrain-13b", "-n", "team-nlp", "--kubeconfig", kubeconfig)
    quotas = json.loads((folder / "objects" / "resourcequotas.json").read_text())["items"]
    assert {q["metadata"]["namespace"] for q in quotas} == {"team-nlp"}
    pods = json.loads((folder / "objects" / "pods.json").read_text())["items"]
    running = {o["metadata"]["name"] for o in objects if o["kind"] == "Pod"
               and o.get("status", {}).get("phase") not in ("Succeeded", "Failed")}  # fmt: skip
    assert running <= {p["metadata"]["name"] for p in pods}
    kept = report(capsys, "pretrain-13b", "-n", "team-nlp", "--snapshot", str(folder))
    assert (kept["failing_layer"], kept["headline"]) == (live["failing_layer"], live["headline"])
    other = next(p for p in pods if p["metadata"]["namespace"] != "team-nlp"
                 and "nvidia.com/gpu" in json.dumps(p["spec"]))  # fmt: skip
    r = report(capsys, other["metadata"]["name"], "-n", other["metadata"]["namespace"],
               "--snapshot", str(folder))  # fmt: skip
    quota = next(f for f in r["findings"] if f["layer"] == "quota")
    assert quota["status"] == "unknown"
    assert any("namespace(s) team-nlp only" in u["message"] for u in r["unread"])


def test_unknown_namespace_and_a_used_folder_are_one_line_errors(
    api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
    code, out, err = run(capsys, "snapshot", str(tmp_path / "a"), "-n", "nope",
                         "--kubeconfig", kubeconfig)  # fmt: skip
    assert code == 2 and out == ""
    assert err == "gpu-triage: error: namespace nope not found in cluster fake\n"
    used = tmp_path / "used"
    used.mkdir()
    (used / "x").write_text("mine")
    code, _, err = run(capsys, "snapshot", str(used), "-A", "--kubeconfig", kubeconfig)
    assert code == 2 and err.startswith(f"gpu-triage: error: {used}: exists and is not an empty")
    assert (used / "x").read_text() == "mine"


def test_secrets_environment_values_and_tokens_never_leave_the_cluster(
    api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pod = json.loads(json.dumps(api.object("Pod", "detr-train-0", namespace="team-vision")))
    ctr = pod["spec"]["containers"][0]
    ctr["env"] = [
        {"name": "HF_TOKEN", "value": "hf-very-secret-value"},
        {"name": "DB", "valueFrom": {"secretKeyRef": {"name": "db", "key": "url"}}},
    ]
    ctr["args"] = ["--api-key=sk-abcdefghijklmnopqrstuvwxyz", f"--token {TOKEN}"]
    pod["metadata"].setdefault("annotations", {})[
        "kubectl.kubernetes.io/last-applied-configuration"
    ] = '{"env": "hf-very-secret-value"}'
    api.apply(pod)
    kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
    archive = tmp_path / "s.tgz"
    code, out, err = run(capsys, "snapshot", str(archive), "-A", "--kubeconfig", kubeconfig)
    assert code == 0, err
    with tarfile.open(archive) as tar:
        blob = b"".join(tar.extractfile(m).read() for m in tar if m.isfile())  # type: ignore[union-attr]
    for secret in (b"hf-very-secret-value", b"sk-abcdefghij", TOKEN.encode()):
        assert secret not in blob
    assert b'"secretKeyRef"' in blob  # references stay: they name a key, not its value
    # the pod's one, and the ClusterPolicy's operand settings
    assert "redacted: 3 environment value(s), 2 token(s), 1 last-applied annotation(s)" in out
    r = report(capsys, "detr-train-0", "-n", "team-vision", "--snapshot", str(archive))
    assert r["failing_layer"] == "scheduling"


def test_logs_of_failing_gpu_components_are_collected_redacted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--logs: the crashing driver pods' current and previous logs, tokens redacted; a failed
    log read is recorded in the manifest, not fatal; the snapshot still reads."""
    objects = load_objects(FIXTURES / "driver-crashloop.yaml")
    with FakeApiServer(objects) as api:
        drivers = [o for o in objects if o["kind"] == "Pod"
                   and o["metadata"]["name"].startswith("nvidia-driver-daemonset")
                   and o["status"].get("containerStatuses", [{}])[0].get("restartCount")]  # fmt: skip
        assert drivers
        first = drivers[0]["metadata"]
        ctr = drivers[0]["status"]["containerStatuses"][0]["name"]
        api.logs[(first["namespace"], first["name"], ctr, True)] = (
            "".join(f"line {i}\n" for i in range(800)) + f"modprobe failed; token={TOKEN}\n"
        )
        kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
        folder = tmp_path / "snap"
        code, out, err = run(capsys, "snapshot", str(folder), "-A", "--logs",
                             "--kubeconfig", kubeconfig)  # fmt: skip
        assert code == 0, err
    log = folder / "logs" / first["namespace"] / first["name"] / f"{ctr}.previous.log"
    text = log.read_text()
    assert text.endswith("modprobe failed; token=<redacted>\n") and TOKEN not in text
    assert len(text.splitlines()) == 500  # the tail
    manifest = yaml.safe_load((folder / "manifest.yaml").read_text())
    entries = {(e["pod"], e["previous"]): e for e in manifest["logs"]}
    assert entries[(f"{first['namespace']}/{first['name']}", True)]["file"] == str(
        log.relative_to(folder)
    )
    assert "error" in entries[(f"{first['namespace']}/{first['name']}", False)]
    assert all("nvidia" in e["pod"] for e in manifest["logs"])  # GPU components only
    assert "logs: 1 of " in out
    code, _, err = run(capsys, "why-pending", "resnet-train-0", "-n", "team-vision",
                       "--snapshot", str(folder))  # fmt: skip
    assert code == 0, err


@pytest.mark.parametrize("dest", ["snap", "snap.tar.gz"])
@pytest.mark.parametrize("scope", [("-n", "team-nlp"), ("-A", "--chunk-size", "3")])
def test_each_file_is_written_as_one_json_dump_and_each_object_redacted_once(
    scope: tuple[str, ...], dest: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The List files are made of their objects' JSON written as each page arrived (plain,
    or compressed for an archive): byte for byte what dumping each List whole writes; a kind
    larger than a file holds (made small here) is in several. A pod of the namespace asked
    for that also runs is listed twice (the namespace's pods, every running pod); a list
    whose continue token expired (`410 Gone`) is read again from its first page: each object
    is kept, and what was redacted of it counted, once."""
    import orjson

    import kube.collect

    monkeypatch.setattr(kube.collect, "PART_BYTES", 6000)
    objects = load_objects(FIXTURES / "resourcequota-exceeded.yaml")
    running = next(o for o in objects if o["kind"] == "Pod"
                   and o["metadata"]["namespace"] == "team-nlp"
                   and o.get("status", {}).get("phase") == "Running")  # fmt: skip
    running["spec"]["containers"][0]["env"] = [{"name": "HF_TOKEN", "value": "hf-secret-1"}]
    with FakeApiServer(objects) as api:
        api.expire_continue = 2  # two lists start over
        kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
        code, _, err = run(capsys, "snapshot", str(tmp_path / dest), *scope,
                           "--kubeconfig", kubeconfig)  # fmt: skip
        assert code == 0, err
        assert api.expire_continue == 0 or scope[0] == "-n"  # -A pages: the lists did restart
    folder = tmp_path / "snap"
    if dest.endswith(".tar.gz"):
        with tarfile.open(tmp_path / dest) as tar:
            tar.extractall(tmp_path / "x", filter="data")
        folder = tmp_path / "x" / "snap"
    written = sorted((folder / "objects").glob("*.json"))
    assert len(written) > 3
    redacted = 0
    for path in written:
        raw = path.read_bytes()
        doc = json.loads(raw)
        assert raw == orjson.dumps(doc, option=orjson.OPT_INDENT_2), path.name
        names = [(o["metadata"].get("namespace"), o["metadata"]["name"]) for o in doc["items"]]
        assert len(names) == len(set(names)), path.name  # each object once
        redacted += raw.count(b'"value": "<redacted>"')
    assert b"hf-secret-1" not in b"".join(p.read_bytes() for p in written)
    manifest = yaml.safe_load((folder / "manifest.yaml").read_text())
    assert manifest["redacted"]["envValues"] == redacted >= 1
    counts = {k: v["objects"] for k, v in manifest["kinds"].items() if v.get("objects")}
    by_kind: dict[str, set[tuple[str, str]]] = {}
    for path in written:
        for o in json.loads(path.read_bytes())["items"]:
            names = by_kind.setdefault(o["kind"], set())
            names.add((o["metadata"].get("namespace"), o["metadata"]["name"]))
    assert {k: len(v) for k, v in by_kind.items()} == counts  # each once, in whichever file
    assert (folder / "objects" / "pods.2.json").exists()
    code, out, err = run(capsys, "pending", "-A", "--snapshot", str(tmp_path / dest))
    assert code in (0, 1) and "stuck workload(s)" in out, err


def test_an_archive_is_what_tarfile_writes_compressed_as_its_objects_arrived(
    api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The .tar.gz is one gzip stream joined from pieces (each kind's compressed while it was
    listed): read by gzip (its CRC checked), tar and tarfile (in stream mode too, which reads
    only a first gzip member), it is byte for byte the tar stream `tarfile`
    writes of the same members (headers, padding, end of archive)."""
    import gzip
    import io
    import shutil
    import subprocess
    import zlib

    kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
    archive = tmp_path / "snap.tgz"
    code, _, err = run(capsys, "snapshot", str(archive), "-A", "--chunk-size", "4",
                       "--kubeconfig", kubeconfig)  # fmt: skip
    assert code == 0, err
    raw = archive.read_bytes()
    stream = gzip.decompress(raw)  # checks the trailer's CRC-32 and length
    assert zlib.decompressobj(31).decompress(raw) == stream  # one member: nothing after it
    again = io.BytesIO()
    with (
        tarfile.open(fileobj=io.BytesIO(stream)) as tar,
        tarfile.open(fileobj=again, mode="w") as out,
    ):
        names = tar.getnames()
        for member in tar:
            out.addfile(member, tar.extractfile(member))
    assert stream == again.getvalue()
    assert names[0] == "snap/manifest.yaml" and "snap/objects/pods.json" in names
    with tarfile.open(archive, mode="r|gz") as tar:
        assert [m.name for m in tar] == names
    if shutil.which("gzip"):
        subprocess.run(["gzip", "-t", str(archive)], check=True)
    if shutil.which("tar"):  # GNU tar through gzip reads it as well
        listed = subprocess.run(["tar", "-tzf", str(archive)], capture_output=True, text=True,
                                check=True)  # fmt: skip
        assert listed.stdout.split() == names
    code, out, err = run(capsys, "pending", "-A", "--snapshot", str(archive))
    assert code in (0, 1), err
    assert "1 stuck workload(s)" in out and "detr-train -n team-vision" in out


def test_the_destination_is_checked_before_reading_and_a_full_disk_is_one_line(
    api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """A destination that cannot be written is said before minutes of reading; a disk that
    fills while the objects are kept is a one-line error, and leaves nothing behind."""
    import kube.collect

    kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
    for dest, said in [
        (tmp_path / "nowhere" / "s.tar.gz", f"folder {tmp_path / 'nowhere'} does not exist"),
        (tmp_path / "kubeconfig", "exists and is not an empty folder"),
        (tmp_path / "dir.tar.gz", "is a folder"),
    ]:
        if dest.name == "dir.tar.gz":
            dest.mkdir()
        before = api.count()
        code, out, err = run(capsys, "snapshot", str(dest), "-A", "--kubeconfig", kubeconfig)
        assert code == 2 and out == "" and said in err and err.count("\n") == 1, err
        assert api.count() == before  # nothing was read
    full = tmp_path / "full"
    full.mkdir()
    monkeypatch.setattr(kube.collect.tempfile, "TemporaryFile",
                        lambda dir=None: open("/dev/full", "r+b"))  # noqa: SIM115  # fmt: skip
    for dest in (full / "s.tar.gz", full / "folder"):
        code, out, err = run(capsys, "snapshot", str(dest), "-A", "--kubeconfig", kubeconfig)
        assert code == 2 and out == "", err
        assert err == f"gpu-triage: error: cannot write {dest}: No space left on device\n"
    assert list(full.iterdir()) == []


@pytest.mark.parametrize("dest", ["big", "big.tar.gz"])
def test_a_snapshot_past_the_read_bound_says_what_reads_it(
    dest: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The summary of a snapshot larger than GPU_TRIAGE_SNAPSHOT_MAX_MB names the least value
    that reads it, counted as the reader counts: that value reads it, one less does not."""
    import re

    from bench.synth import cluster

    objects, _ = cluster(nodes=60, pods=1800)
    with FakeApiServer(objects) as api:
        kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
        code, out, err = run(capsys, "snapshot", str(tmp_path / "again"), "-A",
                             "--kubeconfig", kubeconfig)  # fmt: skip
        assert code == 0 and "reading it takes" not in out, err  # within the default bound
        monkeypatch.setenv("GPU_TRIAGE_SNAPSHOT_MAX_MB", "1")
        code, out, err = run(capsys, "snapshot", str(tmp_path / dest), "-A",
                             "--kubeconfig", kubeconfig)  # fmt: skip
    assert code == 0, err
    found = re.search(r"reading it takes GPU_TRIAGE_SNAPSHOT_MAX_MB=(\d+) \(", out)
    assert found, out
    bound = int(found.group(1))
    assert bound > 1 and f"triage from it: GPU_TRIAGE_SNAPSHOT_MAX_MB={bound} gpu-triage" in out
    monkeypatch.setenv("GPU_TRIAGE_SNAPSHOT_MAX_MB", str(bound))
    code, out, err = run(capsys, "pending", "-A", "--snapshot", str(tmp_path / dest))
    assert code in (0, 1) and "stuck workload(s)" in out, err
    monkeypatch.setenv("GPU_TRIAGE_SNAPSHOT_MAX_MB", str(bound - 1))
    code, out, err = run(capsys, "pending", "-A", "--snapshot", str(tmp_path / dest))
    assert code == 2 and "GPU_TRIAGE_SNAPSHOT_MAX_MB allows" in err, err


@pytest.mark.parametrize(
    ("flag", "env", "deadline"),
    [((), None, 1800.0), (("--timeout", "45"), None, 45.0), ((), "90", 90.0)],
)
def test_a_snapshot_has_minutes_to_read_a_large_cluster_unless_told_otherwise(
    flag: tuple[str, ...], env: str | None, deadline: float,
    deadlines: Callable[[], list[float | None]],
    api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """Reading every object of 20,000 nodes takes minutes: the 120 s other commands get
    would end it. --timeout and GPU_TRIAGE_TIMEOUT still decide when given."""
    if env is not None:
        monkeypatch.setenv("GPU_TRIAGE_TIMEOUT", env)
    kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
    code, _, err = run(capsys, "snapshot", str(tmp_path / "s"), "-A", *flag,
                       "--kubeconfig", kubeconfig)  # fmt: skip
    assert code == 0, err
    assert deadlines() == [deadline]
