"""Snapshots as `.tar.gz` and the manifest that says what a snapshot holds.

An archive is read as it is, never unpacked: its YAML and JSON members are the snapshot, and
anything an archive can hold besides files is refused in one line naming the member (a
link, a name outside it), within bounds that hold for any input (a gzip bomb, a flood of
entries). A manifest makes kinds it did not collect unknown, with a note in every report; a
snapshot without one notes what it lacks and judges it as empty.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest
import yaml

from triage import load_playbook, load_snapshot, triage
from triage.cluster.coverage import KindRecord, Manifest
from triage.cluster.kinds import ALL_KINDS
from triage.cluster.snapshot import load_objects
from triage.cluster.source import MalformedSnapshotError

FIXTURES = Path(__file__).parents[1] / "fixtures"
QUOTA = FIXTURES / "resourcequota-exceeded.yaml"


def tgz(path: Path, members: list[tuple[str, bytes] | tarfile.TarInfo]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for m in members:
            if isinstance(m, tarfile.TarInfo):
                tar.addfile(m)
            else:
                info = tarfile.TarInfo(m[0])
                info.size = len(m[1])
                tar.addfile(info, io.BytesIO(m[1]))
    return path


def refusal(path: Path) -> str:
    with pytest.raises(MalformedSnapshotError) as e:
        load_snapshot(path)
    return str(e.value)


def test_a_tar_gz_reads_as_the_files_it_holds(tmp_path: Path) -> None:
    archive = tgz(tmp_path / "team.tar.gz", [("snap/", b""), ("snap/all.yaml", QUOTA.read_bytes()),
                                              ("snap/logs/x.log", b"not yaml: [")])  # fmt: skip
    args = {"namespace": "team-nlp", "name": "pretrain-13b", "playbook": load_playbook()}
    from_file = triage(load_snapshot(QUOTA), **args)
    from_archive = triage(load_snapshot(archive), **args)
    assert from_archive.headline == from_file.headline and from_archive.cluster == "team"


def test_what_an_archive_may_not_hold_is_refused_naming_the_member(tmp_path: Path) -> None:
    link = tarfile.TarInfo("snap/pods.yaml")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    assert refusal(tgz(tmp_path / "a.tgz", [link])).endswith(
        "snap/pods.yaml: not a regular file (a link)"
    )
    device = tarfile.TarInfo("dev.yaml")
    device.type = tarfile.CHRTYPE
    assert "dev.yaml: not a regular file (a device or FIFO)" in refusal(
        tgz(tmp_path / "b.tgz", [device])
    )
    for name in ("../up.yaml", "/abs.yaml", "a/../../b.yaml"):
        got = refusal(tgz(tmp_path / "c.tgz", [(name, QUOTA.read_bytes())]))
        assert got.endswith(f"{name}: a path outside the archive")
    assert refusal(tgz(tmp_path / "d.tgz", [("x.log", b"hello")])).endswith(
        "archive holds no .yaml, .yml or .json files"
    )
    (tmp_path / "e.tar.gz").write_bytes(b"plain text, not gzip")
    assert "e.tar.gz: not a readable .tar.gz" in refusal(tmp_path / "e.tar.gz")
    fifo = tmp_path / "f.tar.gz"
    os.mkfifo(fifo)
    assert refusal(fifo).endswith("not a regular file (a FIFO)")


def test_an_archive_is_bounded_whatever_it_claims(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 1 MiB limit: a member of 3 MB of zeros (a few KB compressed, and skipped as a log)
    still stops the read once twice the limit has been decompressed."""
    monkeypatch.setenv("GPU_TRIAGE_SNAPSHOT_MAX_MB", "1")
    bomb = tgz(tmp_path / "bomb.tar.gz", [("big.log", bytes(3 << 20)), ("a.yaml", b"{}")])
    assert bomb.stat().st_size < 50_000
    assert "the archive unpacks to more than GPU_TRIAGE_SNAPSHOT_MAX_MB allows" in refusal(bomb)
    big = tgz(tmp_path / "big.tar.gz", [("pods.json", b" " * (3 << 19))])
    assert "pods.json: larger than GPU_TRIAGE_SNAPSHOT_MAX_MB allows" in refusal(big)


def _manifest(kinds: dict[str, KindRecord], *, cluster: str = "east") -> bytes:
    return yaml.safe_dump(Manifest(cluster=cluster, tool="test", kinds=kinds).to_object()).encode()


def test_a_manifest_makes_what_was_not_collected_unknown_and_noted(tmp_path: Path) -> None:
    objects = load_objects(QUOTA)
    counts = {k: sum(o["kind"] == k for o in objects) for k in ALL_KINDS}
    kinds = {k: KindRecord(collected=True, objects=n) for k, n in counts.items()}
    kinds["ResourceQuota"] = KindRecord(collected=False, reason="forbidden: no list")
    del kinds["Workload"]  # a tool that did not know the kind
    archive = tgz(tmp_path / "s.tar.gz", [("manifest.yaml", _manifest(kinds)),
                                          ("objects.yaml", QUOTA.read_bytes())])  # fmt: skip
    source = load_snapshot(archive)
    assert source.cluster_name == "east"
    r = triage(source, namespace="team-nlp", name="pretrain-13b", playbook=load_playbook())
    # The quota itself is not read; the Job's FailedCreate events still say "rejected".
    assert "rejected at creation" in r.headline and "8/8" not in r.headline
    [unread] = [u for u in r.unread if u.resource == "resourcequotas"]
    assert unread.fault == "not-in-snapshot"
    assert "no ResourceQuotas in the snapshot (forbidden: no list): ResourceQuota limits " \
           "not judged" in r.notes  # fmt: skip
    assert any(n.startswith("no Workloads in the snapshot (test did not collect them)")
               for n in r.notes)  # fmt: skip


def test_a_snapshot_without_a_manifest_notes_what_it_lacks_and_judges_it_empty() -> None:
    r = triage(load_snapshot(QUOTA), namespace="team-nlp", name="pretrain-13b",
               playbook=load_playbook())  # fmt: skip
    assert r.failing_layer is not None and r.failing_layer.value == "quota"  # judged, not unknown
    [note] = [n for n in r.notes if n.startswith("the snapshot does not say what it collected")]
    assert "ResourceSlices" in note and "(DRA claims)" in note and "ResourceQuota" not in note


def test_a_malformed_manifest_is_one_line_naming_the_field(tmp_path: Path) -> None:
    bad = {"apiVersion": "snapshot.gpu-triage.io/v1", "kind": "SnapshotManifest",
           "metadata": {"name": "x"}, "kinds": {"Pod": {"collected": "yes"}}}  # fmt: skip
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(bad))
    (tmp_path / "o.yaml").write_bytes(QUOTA.read_bytes())
    assert refusal(tmp_path).endswith(
        "m.yaml: SnapshotManifest: kinds.Pod.collected: expected true or false"
    )
