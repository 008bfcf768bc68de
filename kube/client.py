"""One raw HTTP door to the API server, built on the kubernetes client's ApiClient.

Everything the live adapter and the cache send goes through `RawClient`: it builds URLs from
`triage.cluster.source.KINDS`, asks for JSON, never lets the client deserialise into `V1…` models
(that costs more than the request itself at scale), and turns every failure into our own
`SourceError` family, chained to its cause.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any
from urllib.parse import quote

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from kube.errors import ConfigError, UnauthorizedError
from kube.fastjson import loads
from triage.cluster.source import ForbiddenError, ResourceType, SourceError, UnavailableError

CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 30.0
IN_CLUSTER = "in-cluster"


class GoneError(SourceError):
    """410 Gone: a resourceVersion or continue token expired. Informers relist on it."""

    permanent = False


def resource_name(rt: ResourceType) -> str:
    """`plural` or `plural.group`, the way RBAC rules and kubectl name a resource."""
    return f"{rt.plural}.{rt.group}" if rt.group else rt.plural


def path_for(rt: ResourceType, *, namespace: str | None = None, name: str | None = None) -> str:
    base = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
    if rt.namespaced and namespace:
        base += f"/namespaces/{quote(namespace, safe='')}"
    base += f"/{rt.plural}"
    return base + (f"/{quote(name, safe='')}" if name else "")


def load_client(
    *, kubeconfig: str | None = None, context: str | None = None
) -> tuple[k8s_client.ApiClient, str]:
    """An ApiClient and the cluster (context) name: kubeconfig, else in-cluster config."""
    cfg = k8s_client.Configuration()
    explicit = kubeconfig or os.environ.get("KUBECONFIG")
    default_path = os.path.expanduser("~/.kube/config")
    try:
        if context == IN_CLUSTER:  # the cluster the bot runs in, beside remote kubeconfigs
            if not os.environ.get("KUBERNETES_SERVICE_HOST"):
                raise ConfigError(f"context {IN_CLUSTER!r} needs the bot to run in a cluster")
            k8s_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
            name = IN_CLUSTER
        elif not explicit and not os.path.exists(default_path):
            if not os.environ.get("KUBERNETES_SERVICE_HOST"):
                raise ConfigError(
                    "no kubeconfig found (~/.kube/config, $KUBECONFIG) and not running in a "
                    "cluster: pass --kubeconfig or --snapshot"
                )
            if context:
                raise ConfigError("--context needs a kubeconfig; none was found")
            k8s_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
            name = IN_CLUSTER
        else:
            path = kubeconfig or explicit or default_path
            contexts, active = k8s_config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
                config_file=path
            )
            known = {c["name"] for c in contexts or []}
            if context and context not in known:
                raise ConfigError(f"context {context!r} not found in kubeconfig {path}")
            if not context and not active:
                raise ConfigError(f"kubeconfig {path} has no current context: pass --context")
            name = context or str(active["name"])
            k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=path, context=name, client_configuration=cfg, persist_config=False
            )
    except ConfigException as e:
        raise ConfigError(f"cannot load cluster config: {_one_line(str(e))}") from e
    except OSError as e:
        raise ConfigError(f"cannot read kubeconfig: {e.strerror or e}") from e
    # Fail fast and let callers decide about retries: urllib3's default retries hang on a dead
    # server for several connect timeouts.
    cfg.retries = False
    cfg.connection_pool_maxsize = 32
    # The proxy the environment names for this host, pinned: a token refresh hook re-assigns
    # the host before every request, and an environment proxy is looked up again then
    # (os.environ scanned: 5% of a warm triage).
    cfg.proxy = cfg.proxy
    return k8s_client.ApiClient(configuration=cfg), name


def kube_contexts(kubeconfig: str | None = None) -> list[str]:
    """Every context a bot could serve: those of the kubeconfig (KUBECONFIG may list several
    files, one per remote cluster, which are merged), and `in-cluster` when running in one."""
    names: list[str] = []
    path = kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    if any(os.path.exists(p) for p in path.split(os.pathsep) if p):
        try:
            contexts, _ = k8s_config.list_kube_config_contexts(config_file=path)  # type: ignore[no-untyped-call]
        except ConfigException as e:
            raise ConfigError(f"cannot load cluster config: {_one_line(str(e))}") from e
        names = [str(c["name"]) for c in contexts or []]
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        names.append(IN_CLUSTER)
    return names


SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def context_namespace(*, kubeconfig: str | None = None, context: str | None = None) -> str | None:
    """The namespace the kubeconfig context names (as kubectl uses it), or the pod's own
    namespace in-cluster; None when neither says."""
    path = kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    try:
        if os.path.exists(path):
            contexts, active = k8s_config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
                config_file=path
            )
            wanted = context or (active or {}).get("name")
            for c in contexts or []:
                if c.get("name") == wanted:
                    ns = (c.get("context") or {}).get("namespace")
                    return str(ns) if ns else None
            return None
        with open(SERVICE_ACCOUNT_NAMESPACE, encoding="utf-8") as f:
            return f.read().strip() or None
    except (ConfigException, OSError):
        return None


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


class RawClient:
    """GET requests returning parsed JSON, or streamed watch lines, with our error family."""

    def __init__(self, api: k8s_client.ApiClient, *, cluster_name: str) -> None:
        self.api = api
        self.cluster_name = cluster_name
        self.server = str(api.configuration.host)
        self.requests = 0  # GET requests sent (watches not included), for metrics and tests
        self.watches = 0

    def _send(
        self,
        path: str,
        query: list[tuple[str, str]],
        *,
        timeout: tuple[float, float],
        watch: bool = False,
    ) -> Any:
        method, url, headers, body, post = self.api.param_serialize(
            method="GET",
            resource_path=path,
            query_params=query,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        if watch:
            self.watches += 1
        else:
            self.requests += 1
        return self.api.call_api(method, url, headers, body, post, _request_timeout=timeout)

    @contextmanager
    def _errors(self, *, verb: str, rt: ResourceType, namespace: str | None) -> Iterator[None]:
        try:
            yield
        except ApiException as e:
            raise self._mapped(e, verb=verb, rt=rt, namespace=namespace) from e
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise UnavailableError(
                f"cannot reach the Kubernetes API at {self.server}: {_reason(e)}"
            ) from e

    def _mapped(
        self, e: ApiException, *, verb: str, rt: ResourceType, namespace: str | None
    ) -> SourceError:
        status = int(e.status or 0)
        if status == 403:
            return ForbiddenError(verb=verb, resource=resource_name(rt), namespace=namespace)
        if status == 401:
            return UnauthorizedError(self.server)
        if status == 410:
            return GoneError(f"{resource_name(rt)}: resource version expired (410 Gone)")
        if status == 0:
            return UnavailableError(f"cannot reach the Kubernetes API at {self.server}")
        return UnavailableError(
            f"the Kubernetes API at {self.server} answered {status} {e.reason or ''} "
            f"to {verb} {resource_name(rt)}".replace("  ", " ")
        )

    def get_json(
        self,
        rt: ResourceType,
        *,
        verb: str,
        namespace: str | None = None,
        name: str | None = None,
        query: list[tuple[str, str]] | None = None,
        decode: Callable[[bytes], Any] | None = None,
    ) -> dict[str, Any] | None:
        """One GET; None on 404. Raises our SourceError family otherwise. `decode` parses
        the body (default: the whole JSON)."""
        path = path_for(rt, namespace=namespace, name=name)
        with self._errors(verb=verb, rt=rt, namespace=namespace):
            resp = self._send(path, query or [], timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
            data = resp.read()
            if resp.status == 404:
                return None
            if not 200 <= resp.status <= 299:
                raise ApiException(http_resp=resp)
        try:
            parsed: dict[str, Any] = (decode or loads)(data)
        except ValueError as e:  # msgspec.DecodeError is one too
            raise UnavailableError(f"the Kubernetes API at {self.server} sent invalid JSON") from e
        return parsed

    @contextmanager
    def watch_lines(
        self, rt: ResourceType, *, query: list[tuple[str, str]], read_timeout: float
    ) -> Iterator[tuple[Iterator[bytes], Callable[[], None]]]:
        """Open a watch stream: yields (newline-delimited JSON events, a function that
        shuts the stream from another thread)."""
        path = path_for(rt)
        with self._errors(verb="watch", rt=rt, namespace=None):
            resp = self._send(path, query, timeout=(CONNECT_TIMEOUT, read_timeout), watch=True)
            if not 200 <= resp.status <= 299:
                resp.read()
                raise ApiException(http_resp=resp)
        raw = resp.response
        try:
            yield _mapped_lines(self, raw, rt), lambda: _shutdown(raw)
        finally:
            raw.release_conn()

    def close(self) -> None:
        self.api.close()  # type: ignore[no-untyped-call]


def _mapped_lines(client: RawClient, raw: Any, rt: ResourceType) -> Iterator[bytes]:
    try:
        buf = b""
        for chunk in raw.stream(65536, decode_content=True):
            buf += chunk
            if b"\n" not in buf:
                continue
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if line.strip():
                    yield line
        if buf.strip():
            yield buf
    except (urllib3.exceptions.HTTPError, OSError) as e:
        raise UnavailableError(
            f"watch on {resource_name(rt)} at {client.server} dropped: {_reason(e)}"
        ) from e


def _shutdown(raw: Any) -> None:
    """Unblock a thread reading this response by shutting its socket (from another thread)."""
    sock = getattr(getattr(raw, "_connection", None), "sock", None)
    if sock is not None:
        with suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _reason(e: BaseException) -> str:
    inner = getattr(e, "reason", None)
    if isinstance(inner, BaseException):
        e = inner
    text = str(e)
    if "refused" in text.lower():
        return "connection refused"
    if "timed out" in text.lower() or isinstance(e, TimeoutError):
        return "timed out"
    return _one_line(text.split(": ", 1)[-1]) or type(e).__name__
