"""What the fake API server and its clients agree on: the token, the kubeconfig, the URL
paths of the kinds the engine reads, field selectors and Status bodies."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from triage.cluster.objects import Obj
from triage.cluster.source import ALL_KINDS, ResourceType

TOKEN = "fake-token"


def route(path: str) -> tuple[ResourceType, str | None, str | None] | None:
    parts = [unquote(p) for p in path.strip("/").split("/")]
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 2:
        return None
    for rt in ALL_KINDS.values():
        if (rt.group, rt.version, rt.plural) == (group, version, rest[0]):
            return rt, namespace, rest[1] if len(rest) == 2 else None
    return None


def _field(obj: Obj, path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return "" if cur is None else str(cur)


def matches(obj: Obj, selector: str) -> bool:
    for term in filter(None, selector.split(",")):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if _field(obj, k) == v:
                return False
        else:
            k, v = term.replace("==", "=").split("=", 1)
            if _field(obj, k) != v:
                return False
    return True


def status_body(code: int, reason: str, message: str) -> bytes:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code}
    return json.dumps(body | {"reason": reason, "message": message}).encode()


def write_kubeconfig(
    url: str, path: Path, *, context: str = "fake", ca_pem: bytes | None = None
) -> Path:
    """A kubeconfig whose one context reaches a fake API server at `url` (trusting the CA in
    `ca_pem`, when given, for an https one)."""
    cluster: dict[str, Any] = {"server": url}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": cluster}],
        "users": [{"name": context, "user": {"token": TOKEN}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        "current-context": context,
    }
    path.write_text(json.dumps(cfg))
    return path
