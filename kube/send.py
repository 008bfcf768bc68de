"""JSON requests other than GET (POST, DELETE) through the same ApiClient as `RawClient`.

`RawClient` is deliberately read-only: the engine never writes. The two places that do send a
body (access reviews, which create nothing, and the opt-in test pod) use this one function, so
they share the connection, the auth and the error family with the reads.
"""

from __future__ import annotations

import json
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from kube.client import CONNECT_TIMEOUT, READ_TIMEOUT, RawClient
from kube.errors import UnauthorizedError
from triage.cluster.source import ForbiddenError, SourceError, UnavailableError


def send_json(
    client: RawClient,
    *,
    method: str,
    path: str,
    verb: str,
    resource: str,
    namespace: str | None = None,
    body: dict[str, Any] | None = None,
    query: list[tuple[str, str]] | None = None,
) -> tuple[int, dict[str, Any] | None]:
    """Send one request; returns (status, parsed body) for 2xx and 404, raises otherwise.

    `verb`/`resource`/`namespace` name the permission in a ForbiddenError.
    """
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    try:
        m, url, hdrs, data, post = client.api.param_serialize(
            method=method,
            resource_path=path,
            query_params=query or [],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        resp: Any = client.api.call_api(
            m, url, hdrs, data, post, _request_timeout=(CONNECT_TIMEOUT, READ_TIMEOUT)
        )
        raw = resp.read()
    except ApiException as e:  # raised for TLS failures (status 0)
        raise _mapped(client, int(e.status or 0), verb, resource, namespace, e.reason) from e
    except (urllib3.exceptions.HTTPError, OSError) as e:
        raise UnavailableError(
            f"cannot reach the Kubernetes API at {client.server}: {_reason(e)}"
        ) from e
    status = int(resp.status)
    if not (200 <= status <= 299 or status == 404):
        raise _mapped(client, status, verb, resource, namespace, _message(raw))
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError as e:
        raise UnavailableError(f"the Kubernetes API at {client.server} sent invalid JSON") from e
    return status, parsed if isinstance(parsed, dict) else None


def _message(raw: bytes) -> str:
    try:
        return str(json.loads(raw).get("message") or "")
    except (ValueError, AttributeError):
        return ""


def _mapped(
    client: RawClient, status: int, verb: str, resource: str, namespace: str | None, why: Any
) -> SourceError:
    if status == 403:
        return ForbiddenError(verb=verb, resource=resource, namespace=namespace)
    if status == 401:
        return UnauthorizedError(client.server)
    detail = " ".join(str(why or "").split())[:200]
    return UnavailableError(
        f"the Kubernetes API at {client.server} answered {status} to {verb} {resource}"
        + (f": {detail}" if detail else "")
    )


def _reason(e: BaseException) -> str:
    inner = getattr(e, "reason", None)
    text = str(inner if isinstance(inner, BaseException) else e).lower()
    if "refused" in text:
        return "connection refused"
    if "timed out" in text or isinstance(e, TimeoutError):
        return "timed out"
    return " ".join(str(e).split())[:200] or type(e).__name__
