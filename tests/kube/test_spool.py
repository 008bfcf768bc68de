"""`kube.collect.Spool`: a kind's objects kept on disk as they arrive, plain or as gzip members,
and a list that starts over leaves no trace of its first attempt, however much it wrote."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest

from kube.collect import LIST_HEAD, LIST_TAIL, Spool, item_json


def pod(name: str, *, secret: str = "") -> dict[str, object]:
    env = [{"name": "HF_TOKEN", "value": secret}] if secret else []
    return {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": name, "namespace": "a"},
            "spec": {"containers": [{"name": "c", "env": env}]}}  # fmt: skip


def written(spool: Spool) -> bytes:
    """The List file the spool makes (decompressed, for a gzip spool)."""
    spool.file.flush()
    spool.file.seek(0)
    raw = spool.file.read()
    items = gzip.decompress(raw) if spool.gzip else raw
    assert len(items) == spool.size
    return LIST_HEAD + items + LIST_TAIL


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
    if compressed:  # one gzip member per list: the archive takes them as they are
        assert spool.file.seek(0) == 0 and spool.file.read().count(b"\x1f\x8b\x08") == 2
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
    assert spool.count == spool.size == 0 and spool.file.tell() == 0
    assert list(tmp_path.iterdir()) == []  # unlinked from the start: nothing left behind
    spool.close()
    with pytest.raises(ValueError):
        spool.file.write(b"x")
