"""Typed decoding of list pages (kube.slim.list_decoder) keeps exactly what the projections
read: over every pod and node of every fixture (kubectl output, noise included), slimming a
typed-decoded page gives the same objects as slimming the whole JSON."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import yaml

from kube.slim import list_decoder, projection

FIXTURES = sorted((Path(__file__).parents[1] / "fixtures").glob("*.yaml"))


def _objects(kind: str) -> list[dict[str, object]]:
    found = []
    for path in FIXTURES:
        for doc in yaml.safe_load_all(path.read_text()):
            items = (doc or {}).get("items") if isinstance(doc, dict) else None
            for obj in items if isinstance(items, list) else [doc]:
                if isinstance(obj, dict) and obj.get("kind") == kind:
                    found.append(obj)
    return found


@pytest.mark.parametrize("kind", ["Pod", "Node"])
def test_typed_pages_slim_to_the_same_objects(kind: str) -> None:
    objs = _objects(kind)
    assert len(objs) > 50  # the fixtures hold many of each
    page = orjson.dumps({"kind": f"{kind}List", "metadata": {"resourceVersion": "7"},
                         "items": objs}, default=str)  # fmt: skip
    decode = list_decoder(kind)
    assert decode is not None
    typed, whole = decode(page), orjson.loads(page)
    assert typed["metadata"] == whole["metadata"]
    slim_typed, slim_whole = projection(kind), projection(kind)
    for a, b in zip(typed["items"], whole["items"], strict=True):
        assert slim_typed(a) == slim_whole(b), a.get("metadata", {}).get("name")


def test_a_page_of_unexpected_shape_is_decoded_whole() -> None:
    page = orjson.dumps({"metadata": {}, "items": [
        {"metadata": {"name": "odd", "namespace": "a"}, "spec": {"containers": "not a list"}}]})  # fmt: skip
    decode = list_decoder("Pod")
    assert decode is not None
    assert decode(page)["items"][0]["spec"]["containers"] == "not a list"


def test_kinds_kept_whole_have_no_typed_decoder() -> None:
    assert list_decoder("ResourceQuota") is None
