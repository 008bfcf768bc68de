"""Parsing input from outside within bounds: nesting depth, YAML aliases, duplicate keys.

A snapshot is a file anyone may hand us, and some cluster objects carry YAML of their own
(the cluster-autoscaler's status ConfigMap). Parsed naively, a 100,000-deep array ends in a
traceback, and a YAML alias bomb (nine aliases of nine aliases ...) expands to billions of
values. Here JSON is parsed by orjson (which refuses more than 1,024 levels) and YAML by
yaml_rs, which copies an alias's value as it parses, up to a limit of copied events, and
refuses a mapping with a key twice. `check_depth` then refuses what nests deeper than any
Kubernetes object does, before code that recurses walks it. Every refusal is a `ValueError`
saying which bound, so the caller can name the file or object in one line.
"""

from __future__ import annotations

from typing import Any

import orjson
import yaml_rs

MAX_DEPTH = 100  # Kubernetes objects nest about 20 deep (managedFields the deepest)
MAX_DOCUMENTS = 1_000_000
# Events an alias may add by being copied where it is used: an alias bomb stops here.
MAX_ALIAS_EVENTS = 1_000_000
_ALIASES = yaml_rs.AliasLimits(max_total_replayed_events=MAX_ALIAS_EVENTS)


class TooComplexError(ValueError):
    """The input is beyond one of the bounds above."""


def loads_json(data: bytes | str, *, depth: bool = True) -> Any:
    """One JSON document; ValueError when it is not JSON (orjson.JSONDecodeError) or nests
    too deep (TooComplexError; `depth=False`: the caller checks, object by object)."""
    value = orjson.loads(data)
    if depth:
        check_depth(value)
    return value


def loads_yaml(text: str, *, depth: bool = True) -> Any:
    """A YAML stream: its one document, or the list of its documents when there are several
    (None when empty). ValueError when it is not YAML (yaml_rs.YAMLDecodeError: a syntax
    error, a duplicate key, aliases copied past MAX_ALIAS_EVENTS) or nests too deep."""
    if text.count("\n---") > MAX_DOCUMENTS:
        raise TooComplexError(f"more than {MAX_DOCUMENTS:,} YAML documents")
    value = yaml_rs.loads(text, parse_datetime=False, alias_limits=_ALIASES)
    if depth:
        check_depth(value)
    return value


def check_depth(value: Any, limit: int = MAX_DEPTH) -> None:
    """Refuse a parsed value nested deeper than `limit` (without recursing)."""
    if not isinstance(value, (dict, list)):
        return
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, (dict, list)) and child:
                if depth >= limit:
                    raise TooComplexError(f"values nested more than {limit} deep")
                stack.append((child, depth + 1))


def first_line(e: BaseException) -> str:
    """A parser's message in one line: yaml_rs quotes the offending line under its first,
    with a caret and the reason below it."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    if not lines:
        return type(e).__name__
    reason = [
        ln
        for ln in lines[1:]
        if not ln.startswith("|") and not ln.lstrip("0123456789 ").startswith("|")
    ]
    return " ".join(" ".join([lines[0], *reason[-1:]]).split())[:300]
