"""JSON requests other than GET (POST, DELETE) through the same ApiClient as `RawClient`.

`RawClient` is deliberately read-only: the engine never writes. The two places that do send a
body (access reviews, which create nothing, and the opt-in test pod) use this one function, so
they share the connection, the auth, the transport's limits and the error family with the
reads.
"""

from __future__ import annotations

import json
from typing import Any

from kube.client import RawClient
from kube.transport import ATTEMPTS, Read, fail, send


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
    retry: bool | None = None,
) -> tuple[int, dict[str, Any] | None]:
    """Send one request; returns (status, parsed body) for 2xx and 404, raises otherwise.

    `verb`/`resource`/`namespace` name the permission in a ForbiddenError. 429 and 5xx are
    retried for every method but POST, unless `retry` says otherwise (a POST of an access
    review creates nothing: retry it).
    """
    read = Read(verb, resource, namespace)
    reply = send(
        client.api, server=client.server, method=method, path=path, read=read,
        deadline=client.deadline, query=query, body=body,
        attempts=ATTEMPTS if (method != "POST" if retry is None else retry) else 1,
    )  # fmt: skip
    if not (200 <= reply.status <= 299 or reply.status == 404):
        fail(reply, server=client.server, read=read)
    try:
        parsed = json.loads(reply.body) if reply.body else None
    except ValueError as e:
        raise client.not_kubernetes(read, "sent an answer that is not JSON") from e
    return reply.status, parsed if isinstance(parsed, dict) else None
