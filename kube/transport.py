"""How one request to the API server is sent, read whole, retried and mapped to our errors.

The kubernetes client's own transport times out per socket read only: a server that trickles
a byte every few seconds keeps a caller waiting forever, a 429 fails at once, and a proxy that
is not an API server looks like "not found". So every request here:

- has a whole-response limit (`READ_TIMEOUT` from sending to the last byte) and answers to the
  command's `Deadline`, which bounds everything a command sends;
- is retried on 429 and 5xx, as client-go does: `Retry-After` honoured (capped), otherwise a
  jittered exponential backoff, never past the deadline;
- ends in one error of our family, chained to its cause, whose message is one line.
"""

from __future__ import annotations

import json
import random
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeVar

import urllib3
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from kube.errors import TLSError
from triage.cluster.source import (
    DeadlineExceededError,
    ForbiddenError,
    ReadFailedError,
    SourceError,
    UnauthorizedError,
    UnavailableError,
)

CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 30.0  # for a response to arrive whole, not only for each read of its socket
ATTEMPTS = 4  # a request and three retries, for the statuses below
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
RETRY_AFTER_CAP = 10.0  # seconds: a longer Retry-After is waited this long, then retried
BACKOFF = 0.5  # seconds before the first retry without Retry-After; doubles, jittered ±20 %
MAX_BODY = 256 * 2**20  # a list page is paginated to a few MB: more is not an API server
# The most one read of a response's socket takes: a list page is 1-3 MB. Reads of 64 KiB, the
# page's next one read on its own thread while the last is slimmed, made the threads of a
# command's lists hand the interpreter's lock to each other a third more often, and reading
# every kind of the bench's 3,000-node cluster took 5% longer.
_CHUNK = 1 << 20
_E = TypeVar("_E", bound=ReadFailedError)


@dataclass
class Deadline:
    """When a command must have finished reading the cluster (None: no overall limit, as for
    the bot's long-lived caches). Shared by every request the command sends. `wide`: the
    seconds it has in all once it lists every pod of the cluster (`widen`), when its
    deadline is the default one (None: it stays)."""

    seconds: float | None = None
    clock: Callable[[], float] = time.monotonic
    wide: float | None = None
    at: float | None = field(init=False, default=None)
    started: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        self.restart()

    def restart(self) -> None:
        self.started = self.clock()
        self.at = None if self.seconds is None else self.started + self.seconds

    def widen(self) -> None:
        """`wide` seconds in all from the start, if that is longer: the command reads every
        pod of the cluster (1,200 list pages at 20,000 nodes)."""
        if self.wide is not None and self.seconds is not None and self.wide > self.seconds:
            self.seconds = self.wide
            self.at = self.started + self.wide

    def left(self) -> float | None:
        return None if self.at is None else self.at - self.clock()

    def within(self, limit: float) -> float:
        """`limit`, or what is left of the deadline when that is less."""
        left = self.left()
        if left is None:
            return limit
        if left <= 0:
            raise self.exceeded()
        return min(limit, left)

    def exceeded(self) -> DeadlineExceededError:
        return DeadlineExceededError(
            f"gave up after {self.seconds:g} s reading the cluster (the command's deadline: "
            "--timeout or GPU_TRIAGE_TIMEOUT)"
        )


@dataclass(frozen=True)
class Read:
    """What a request reads, to name it in errors: verb, resource (RBAC's name) and
    namespace."""

    verb: str
    resource: str
    namespace: str | None = None

    def __str__(self) -> str:
        return f"{self.verb} {self.resource}" + (
            f" in namespace {self.namespace}" if self.namespace else ""
        )

    def error(self, cls: type[_E], message: str) -> _E:
        """A `cls` error about this read."""
        return cls(message, verb=self.verb, resource=self.resource, namespace=self.namespace)


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    headers: Mapping[str, str]


class _Retry(Exception):
    def __init__(self, reply: Reply) -> None:
        self.reply = reply


def send(
    api: k8s_client.ApiClient,
    *,
    server: str,
    method: str,
    path: str,
    read: Read,
    deadline: Deadline,
    query: list[tuple[str, str]] | None = None,
    body: dict[str, Any] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    on_attempt: Callable[[], None] = lambda: None,
    attempts: int = ATTEMPTS,
) -> Reply:
    """One request, retried on 429 and 5xx (up to `attempts` in all); the last reply is
    returned whatever its status (the caller maps it: `mapped`). Raises our errors for
    transport failures and when the deadline passes."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    for attempt in range(attempts):
        on_attempt()
        reply = _once(api, server=server, method=method, path=path, read=read,
                      deadline=deadline, query=query or [], headers=headers, body=body)  # fmt: skip
        if reply.status not in RETRY_STATUSES or attempt == attempts - 1:
            return reply
        wait = _wait(reply, attempt)
        left = deadline.left()
        if left is not None and wait >= left:
            return reply  # no time for another try: the status is the answer
        sleep(wait)
    raise AssertionError("unreachable")


def _wait(reply: Reply, attempt: int) -> float:
    raw = reply.headers.get("Retry-After") or reply.headers.get("retry-after")
    if raw is not None:
        with suppress(ValueError):
            return float(min(max(float(raw), 0.0), RETRY_AFTER_CAP))
    return BACKOFF * (1 << attempt) * random.uniform(0.8, 1.2)


def _once(
    api: k8s_client.ApiClient,
    *,
    server: str,
    method: str,
    path: str,
    read: Read,
    deadline: Deadline,
    query: list[tuple[str, str]],
    headers: dict[str, str],
    body: dict[str, Any] | None,
) -> Reply:
    started = time.monotonic()
    connect = deadline.within(CONNECT_TIMEOUT)
    first_byte = deadline.within(READ_TIMEOUT)
    try:
        m, url, hdrs, data, post = api.param_serialize(
            method=method,
            resource_path=path,
            query_params=query,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        resp = api.call_api(m, url, hdrs, data, post, _request_timeout=(connect, first_byte))
        raw = resp.response
        try:
            data_read = _whole(raw, deadline, started, server=server, read=read)
        finally:
            with suppress(Exception):
                raw.release_conn()
    except SourceError:
        raise
    except ApiException as e:  # the client raises it for TLS failures (status 0)
        raise _transport(e, server=server, read=read, deadline=deadline) from e
    except (urllib3.exceptions.HTTPError, OSError) as e:
        raise _transport(e, server=server, read=read, deadline=deadline) from e
    return Reply(int(resp.status), data_read, dict(raw.headers))


def _whole(raw: Any, deadline: Deadline, started: float, *, server: str, read: Read) -> bytes:
    """The response body, read as it arrives, within READ_TIMEOUT of sending and the
    deadline: each socket read waits only for what is left of both."""
    chunks: list[bytes] = []
    size = 0
    sock = getattr(getattr(raw, "_connection", None), "sock", None)
    too_slow = read.error(
        UnavailableError,
        f"the Kubernetes API at {server} did not send its answer to {read} within "
        f"{READ_TIMEOUT:g} s",
    )
    while True:
        left = READ_TIMEOUT - (time.monotonic() - started)
        if left <= 0:
            raise too_slow
        wait = deadline.within(left)
        if sock is not None:
            with suppress(OSError):
                sock.settimeout(wait)
        try:
            chunk = raw.read1(_CHUNK)
        except (urllib3.exceptions.ReadTimeoutError, TimeoutError) as e:
            if wait < left:  # the deadline's wait ran out, not the request's
                raise deadline.exceeded() from e
            raise too_slow from e
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_BODY:
            raise read.error(
                UnavailableError,
                f"the answer of {server} to {read} is larger than {MAX_BODY >> 20} MiB: "
                "not a Kubernetes API page",
            )
        chunks.append(chunk)


def _transport(e: BaseException, *, server: str, read: Read, deadline: Deadline) -> SourceError:
    """A request that got no HTTP answer: TLS, refused, timed out, dropped."""
    left = deadline.left()
    if left is not None and left <= 0.05:
        return deadline.exceeded()
    if _is_tls(e):
        return read.error(
            TLSError,
            f"TLS with the Kubernetes API at {server} failed: {_tls_reason(e)} (check the "
            "kubeconfig's certificate-authority and server name)",
        )
    return read.error(UnavailableError, f"cannot reach the Kubernetes API at {server}: {reason(e)}")


def _is_tls(e: BaseException) -> bool:
    if isinstance(e, ApiException):
        return str(e.reason or "").startswith("SSLError")
    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, (ssl.SSLError, urllib3.exceptions.SSLError)):
            return True
        seen = (
            getattr(seen, "reason", None)
            if isinstance(seen, urllib3.exceptions.HTTPError)
            else None
        )
    return False


def _tls_reason(e: BaseException) -> str:
    text = str(e.reason if isinstance(e, ApiException) else e)
    for known in (
        "certificate verify failed", "wrong version number", "hostname mismatch",
        "certificate has expired", "self-signed certificate", "unknown ca",
    ):  # fmt: skip
        if known in text.lower():
            detail = text.lower().split("certificate verify failed:", 1)[-1]
            detail = one_line(detail.split("(_ssl")[0]).strip(" :")
            return known if detail == known or not detail else f"{known}: {detail}"
    return one_line(text.replace("SSLError", "")).strip(" :") or "handshake failed"


def fail(reply: Reply, *, server: str, read: Read) -> NoReturn:
    """Raise the error for a reply the caller does not expect, chained to the HTTP status."""
    cause = ApiException(status=reply.status, reason=status_message(reply.body) or None)
    cause.body = reply.body.decode("utf-8", "replace")
    raise mapped(reply, server=server, read=read) from cause


def mapped(reply: Reply, *, server: str, read: Read) -> SourceError:
    """The error for a non-2xx reply the caller does not expect."""
    if reply.status == 403:
        return ForbiddenError(verb=read.verb, resource=read.resource, namespace=read.namespace)
    if reply.status == 401:
        return UnauthorizedError(
            server, verb=read.verb, resource=read.resource, namespace=read.namespace
        )
    detail = status_message(reply.body)
    retried = " (after retries)" if reply.status in RETRY_STATUSES else ""
    return read.error(
        UnavailableError,
        f"the Kubernetes API at {server} answered {reply.status} to {read}{retried}"
        + (f": {detail}" if detail else ""),
    )


def status_message(body: bytes) -> str:
    """The `message` of a Kubernetes Status body, one line ("" when it is not one)."""
    try:
        data = json.loads(body)
    except ValueError:
        return ""
    if not isinstance(data, dict):
        return ""
    return one_line(str(data.get("message") or ""))[:200]


def is_status(body: bytes) -> bool:
    """Whether a body is a Kubernetes Status object, as every API server error body is."""
    try:
        data = json.loads(body)
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("kind") == "Status"


def reason(e: BaseException) -> str:
    """Why a connection failed, in a few words."""
    inner = getattr(e, "reason", None)
    if isinstance(inner, BaseException):
        e = inner
    text = str(e)
    if "refused" in text.lower():
        return "connection refused"
    if "timed out" in text.lower() or isinstance(e, (TimeoutError, socket.timeout)):
        return "timed out"
    return one_line(text.split(": ", 1)[-1]) or type(e).__name__


def one_line(text: str) -> str:
    return " ".join(text.split())[:300]
