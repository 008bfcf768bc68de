"""One raw HTTP door to the API server, built on the kubernetes client's ApiClient.

Everything the live adapter and the cache send goes through `RawClient`: it builds URLs from
`triage.cluster.source.KINDS`, asks for JSON, never lets the client deserialise into `V1…` models
(that costs more than the request itself at scale), and turns every failure into our own
`SourceError` family, chained to its cause.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any
from urllib.parse import quote

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from kube.errors import ConfigError, CredentialsError, NotKubernetesError
from kube.fastjson import loads
from kube.transport import (
    CONNECT_TIMEOUT,
    Deadline,
    Read,
    Reply,
    _transport,
    fail,
    is_status,
    one_line,
    reason,
    send,
)
from triage.cluster.source import ResourceType, UnavailableError

IN_CLUSTER = "in-cluster"
# Groups served by every API server: a 404 there is a server problem, not a missing add-on.
BUILTIN_GROUPS = frozenset({"", "apps", "batch", "node.k8s.io", "scheduling.k8s.io"})


class GoneError(UnavailableError):
    """410 Gone: a resourceVersion or continue token expired. Informers relist on it, and a
    paginated list starts again from its first page."""

    fault = "expired"


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
            with _auth_failures() as failed:
                k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                    config_file=path, context=name, client_configuration=cfg, persist_config=False
                )
            if failed:
                raise CredentialsError(
                    f"the credentials of context {name} could not be obtained: {failed[0]}"
                )
    except ConfigException as e:
        raise ConfigError(f"cannot load cluster config: {_one_line(str(e))}") from e
    except OSError as e:
        raise ConfigError(f"cannot read kubeconfig: {e.strerror or e}") from e
    if not cfg.verify_ssl:  # insecure-skip-tls-verify: asked for, not worth a line a request
        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    # Fail fast and let callers decide about retries: urllib3's default retries hang on a dead
    # server for several connect timeouts.
    cfg.retries = False
    cfg.connection_pool_maxsize = 32
    # The proxy the environment names for this host, pinned: a token refresh hook re-assigns
    # the host before every request, and an environment proxy is looked up again then
    # (os.environ scanned: 5% of a warm triage).
    cfg.proxy = cfg.proxy
    return k8s_client.ApiClient(configuration=cfg), name


@contextmanager
def _auth_failures() -> Iterator[list[str]]:
    """The kubernetes client logs a failed exec plugin or auth provider at ERROR on the root
    logger and carries on without credentials (every request is then a 401). Catch what it
    logs while the config loads, so the failure is one error of ours and no stray line."""
    failed: list[str] = []

    class _Catch(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            if "kubernetes" in record.pathname and record.levelno >= logging.ERROR:
                failed.append(one_line(record.getMessage()))
                return False
            return True

    catch = _Catch()
    root = logging.getLogger()
    root.addFilter(catch)
    try:
        yield failed
    finally:
        root.removeFilter(catch)


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
    return one_line(text)


class RawClient:
    """GET requests returning parsed JSON, or streamed watch lines, with our error family.

    `deadline` bounds everything the client sends (a CLI command's `--timeout`); the bot's
    long-lived clients have none, and each request is still bounded (`kube.transport`)."""

    def __init__(
        self,
        api: k8s_client.ApiClient,
        *,
        cluster_name: str,
        deadline: Deadline | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.api = api
        self.cluster_name = cluster_name
        self.server = str(api.configuration.host)
        self.deadline = deadline or Deadline()
        self._sleep = sleep
        self.requests = 0  # GET requests sent (watches not included), for metrics and tests
        self.watches = 0
        self._listed: dict[str, int] = {}  # objects received by lists, per resource
        self._counting = threading.Lock()  # a command's reads run on several threads

    def _count(self) -> None:
        with self._counting:
            self.requests += 1

    def note_listed(self, plural: str, objects: int) -> None:
        """`objects` more of `plural` received by a list (one page of it)."""
        with self._counting:
            self._listed[plural] = self._listed.get(plural, 0) + objects

    def listed(self) -> dict[str, int]:
        """The objects lists have received so far, per resource (`pods`, `jobs`): what a
        command that reads a large cluster shows while it waits (`gpu_triage.progress`)."""
        with self._counting:
            return dict(self._listed)

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
        """One GET (retried on 429 and 5xx); None on 404. Raises our SourceError family
        otherwise. `decode` parses the body (default: the whole JSON).

        An answer that no API server would give (a 404 of a built-in kind without a Status
        body, a body that is not JSON, an object without metadata, a list without items) is
        a `NotKubernetesError`: the kubeconfig points at something else."""
        read = Read(verb, resource_name(rt), namespace)
        path = path_for(rt, namespace=namespace, name=name)
        reply = send(
            self.api, server=self.server, method="GET", path=path, read=read,
            deadline=self.deadline, query=query, sleep=self._sleep, on_attempt=self._count,
        )  # fmt: skip
        if reply.status == 410:
            raise GoneError(
                f"{read}: resource version or continue token expired (410 Gone)",
                verb=read.verb, resource=read.resource, namespace=read.namespace,
            )  # fmt: skip
        if reply.status == 404:
            if rt.group in BUILTIN_GROUPS and not is_status(reply.body):
                raise self.not_kubernetes(read, "answered 404 without a Kubernetes Status")
            return None
        if not 200 <= reply.status <= 299:
            fail(reply, server=self.server, read=read)
        try:
            parsed = (decode or loads)(reply.body)
        except ValueError as e:  # msgspec.DecodeError is one too
            raise self.not_kubernetes(read, "sent an answer that is not JSON") from e
        if not isinstance(parsed, dict) or (
            "items" not in parsed if name is None else not isinstance(parsed.get("metadata"), dict)
        ):
            raise self.not_kubernetes(read, "sent JSON that is not a Kubernetes object or list")
        return parsed

    def not_kubernetes(self, read: Read, what: str) -> NotKubernetesError:
        return NotKubernetesError(
            f"{self.server} is not a Kubernetes API server: it {what} to {read} (check the "
            "kubeconfig's server URL)",
            verb=read.verb, resource=read.resource, namespace=read.namespace,
        )  # fmt: skip

    @contextmanager
    def watch_lines(
        self, rt: ResourceType, *, query: list[tuple[str, str]], read_timeout: float
    ) -> Iterator[tuple[Iterator[bytes], Callable[[], None]]]:
        """Open a watch stream: yields (newline-delimited JSON events, a function that
        shuts the stream from another thread)."""
        read = Read("watch", resource_name(rt))
        path = path_for(rt)
        try:
            method, url, headers, body, post = self.api.param_serialize(
                method="GET",
                resource_path=path,
                query_params=query,
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
            )
            self.watches += 1
            resp = self.api.call_api(
                method, url, headers, body, post,
                _request_timeout=(CONNECT_TIMEOUT, read_timeout),
            )  # fmt: skip
        except ApiException as e:
            raise _transport(e, server=self.server, read=read, deadline=Deadline()) from e
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise _transport(e, server=self.server, read=read, deadline=Deadline()) from e
        raw = resp.response
        if not 200 <= resp.status <= 299:
            data = raw.read()
            raw.release_conn()
            fail(Reply(int(resp.status), data, dict(raw.headers)), server=self.server, read=read)
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
            f"watch on {resource_name(rt)} at {client.server} dropped: {reason(e)}"
        ) from e


def _shutdown(raw: Any) -> None:
    """Unblock a thread reading this response by shutting its socket (from another thread)."""
    sock = getattr(getattr(raw, "_connection", None), "sock", None)
    if sock is not None:
        with suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
