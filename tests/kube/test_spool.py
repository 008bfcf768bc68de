"""`kube.collect.Spool`: a kind's objects kept on disk as they arrive, plain or compressed,
and a list that starts over leaves no trace of its first attempt, however much it wrote."""

from __future__ import annotations

import io
import zlib
from pathlib import Path

import orjson
import pytest

from kube.collect import LIST_HEAD, LIST_TAIL, Spool, item_json


def pod(name: str, *, secret: str = "") -> dict[str, object]:
    env = [{"name": "HF_TOKEN", "value": secret}] if secret else []
    return {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": name, "namespace": "a"},
            "spec": {"containers": [{"name": "c", "env": env}]}}  # fmt: skip


def files(spool: Spool) -> list[bytes]:
    """The List files the spool makes (decompressed, for a compressed spool: pieces of raw
    deflate, each part's CRC-32 known)."""
    out = []
    for part in spool.parts:
        buffer = io.BytesIO()
        spool.copy_to(buffer, part)
        raw = buffer.getvalue()
        items = zlib.decompressobj(-zlib.MAX_WBITS).decompress(raw) if spool.gzip else raw
        assert len(items) == part.size and zlib.crc32(items) == part.crc
        out.append(LIST_HEAD + items + LIST_TAIL)
    return out


def written(spool: Spool) -> bytes:
    (only,) = files(spool)
    return only


@pytest.mark.parametrize("compressed", [False, True])
def test_a_list_started_over_keeps_only_its_last_attempt(compressed: bool, tmp_path: Path) -> None:
    seen: list[str] = []

    def noted(kind: str, obj: dict[str, object]) -> object:
        name = str(obj["metadata"]["name"])  # type: ignore[index]
        seen.append(name)
        return name if name.endswith("0") else None

    spool = Spool("Pod", directory=tmp_path, gzip=compressed, seen=noted)
    spool.begin()
    spool.keep(pod("a0", secret="s1"))
    spool.end()
    spool.begin()  # a second list (another namespace): it starts over after three objects...
    for name in ("b0", "b1", "b2"):
        spool.keep(pod(name, secret="s2"))
    spool.again()  # ...and finds fewer than it had written
    spool.keep(pod("b0", secret="s2"))
    spool.end()
    doc = orjson.loads(written(spool))
    assert [o["metadata"]["name"] for o in doc["items"]] == ["a0", "b0"]
    assert written(spool) == orjson.dumps(doc, option=orjson.OPT_INDENT_2)
    assert spool.count == 2
    assert spool.redactions.env_values == 2  # not the dropped attempt's three
    assert spool.noted == ["a0", "b0"]
    assert seen == ["a0", "b0", "b1", "b2", "b0"]
    if compressed:  # each list a piece ending on a byte: the archive joins them as they are
        assert spool.file.seek(0) == 0 and spool.file.read().count(b"\x00\x00\xff\xff") >= 2
    spool.close()


def test_an_object_is_written_as_its_list_file_holds_it(tmp_path: Path) -> None:
    spool = Spool("Pod", directory=tmp_path, gzip=False)
    spool.begin()
    objs = [pod(f"p{i}") for i in range(3)]
    for obj in objs:
        spool.keep(obj)
    spool.end()
    whole = {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": objs}
    assert written(spool) == orjson.dumps(whole, option=orjson.OPT_INDENT_2)
    assert item_json(objs[0]).startswith(b"    {\n      ")
    spool.close()


def test_a_spool_is_deleted_when_closed_and_an_empty_list_writes_nothing(tmp_path: Path) -> None:
    spool = Spool("Node", directory=tmp_path, gzip=True)
    spool.begin()
    spool.end()
    assert spool.count == 0 and spool.parts == [] and spool.file.tell() == 0
    assert list(tmp_path.iterdir()) == []  # unlinked from the start: nothing left behind
    spool.close()
    with pytest.raises(ValueError):
        spool.file.write(b"x")


@pytest.mark.parametrize("compressed", [False, True])
def test_a_large_kind_makes_several_list_files_and_a_restart_drops_whole_ones(
    compressed: bool, tmp_path: Path
) -> None:
    """A List file ends once it holds `part_bytes` of items (a reader parses a file whole);
    a list that starts over drops the files it had begun and the items of the one it was
    writing into."""
    size = len(item_json(pod("p00")))
    spool = Spool("Pod", directory=tmp_path, gzip=compressed, part_bytes=3 * size)
    spool.begin()
    for i in range(5):  # files of 3 (the third makes the size) and 2
        spool.keep(pod(f"a{i:02d}"))
    spool.end()
    spool.begin()
    for i in range(9):  # into the second file, then a third, fourth...
        spool.keep(pod(f"b{i:02d}"))
    assert len(spool.parts) == 5
    spool.again()  # ... all dropped: the second file is as the first list left it
    spool.keep(pod("b00"))
    spool.end()
    names = [[o["metadata"]["name"] for o in orjson.loads(f)["items"]] for f in files(spool)]
    assert names == [["a00", "a01", "a02"], ["a03", "a04", "b00"]]
    for f in files(spool):
        assert f == orjson.dumps(orjson.loads(f), option=orjson.OPT_INDENT_2)
    assert spool.count == 6
    spool.close()


@pytest.mark.parametrize("dense", [False, True])
def test_the_read_bound_a_summary_names_reads_the_snapshot_and_one_less_does_not(
    dense: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`read_bound` counts what the reader counts: bytes, or values when objects are dense
    with them (long lists of numbers: more values than bytes bound)."""
    from gpu_triage.cmd_snapshot import files, read_bound, write
    from kube.collect import Collected
    from triage.cluster.coverage import KindRecord, Manifest
    from triage.cluster.snapshot import read_snapshot
    from triage.cluster.source import MalformedSnapshotError

    spool = Spool("Node", directory=tmp_path, gzip=False, part_bytes=1 << 20)
    spool.begin()
    for i in range(700):
        extra = {"n": [[i] * 40 for _ in range(30)]} if dense else {"note": "x" * 3000}
        spool.keep({"kind": "Node", "apiVersion": "v1", "metadata": {"name": f"n{i}"},
                    "status": {"capacity": {"cpu": "8"}}, "spec": {"podCIDRs": [], **extra}})  # fmt: skip
    spool.end()
    manifest = Manifest(cluster="c", taken_at="2026-12-06T00:00:00Z", tool="t", namespaces=None,
                        kinds={"Node": KindRecord(collected=True, objects=700)})  # fmt: skip
    got = Collected(objects={"Node": spool}, manifest=manifest)
    content = files(got)
    bound, unpacked = read_bound(content)
    write(content, tmp_path / "snap")
    got.close()
    assert bound > 1 and unpacked > 1 << 20
    monkeypatch.setenv("GPU_TRIAGE_SNAPSHOT_MAX_MB", str(bound))
    assert len(read_snapshot(tmp_path / "snap").objects) == 700
    monkeypatch.setenv("GPU_TRIAGE_SNAPSHOT_MAX_MB", str(bound - 1))
    with pytest.raises(MalformedSnapshotError, match="values than" if dense else "larger than"):
        read_snapshot(tmp_path / "snap")
