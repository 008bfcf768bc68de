"""The live ClusterSource: reads the cluster per request through the kubernetes client.

`connect()` picks the kubeconfig context (or in-cluster config). `LiveSource` lists what the
engine asks for, page by page, as raw JSON dicts shaped like `kubectl get -o json` items. It is
meant to live for one triage: `node_usage()` is computed once per instance. For a bot serving
many triages, `kube.cache.CachedSource` keeps the same data warm through watches.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kube.client import RawClient, context_namespace, load_client
from kube.fastjson import gc_paused
from triage.cluster.objects import Obj
from triage.cluster.source import ALL_KINDS, KINDS, ResourceType, UnavailableError
from triage.cluster.usage import NodeUsage, usage_of

PAGE_SIZE = 500
# Groups served by every API server: a 404 there is a server problem, not a missing add-on.
BUILTIN_GROUPS = frozenset({"", "apps", "batch", "node.k8s.io", "scheduling.k8s.io"})
ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"


def connect(*, kubeconfig: str | None = None, context: str | None = None) -> LiveSource:
    """A LiveSource for the kubeconfig context (current one by default) or in-cluster config.

    Raises `kube.errors.ConfigError` (a `SourceError`) when no usable configuration exists.
    Nothing is sent to the cluster until the first read.
    """
    api, name = load_client(kubeconfig=kubeconfig, context=context)
    source = LiveSource(RawClient(api, cluster_name=name))
    source.default_namespace = context_namespace(kubeconfig=kubeconfig, context=context)
    return source


def kind_type(kind: str) -> ResourceType:
    rt = ALL_KINDS.get(kind)
    if rt is None:
        raise ValueError(f"unknown kind {kind!r}")
    return rt


def list_objects(
    client: RawClient,
    rt: ResourceType,
    *,
    namespace: str | None = None,
    field_selector: str | None = None,
    page_size: int = PAGE_SIZE,
    transform: Callable[[Obj], Obj] | None = None,
    decode: Callable[[bytes], Any] | None = None,
) -> tuple[list[Obj], str]:
    """All items (each with `kind` and `apiVersion` set) and the list's resourceVersion.

    Follows `continue` tokens. A custom resource whose API is not installed lists as empty
    with resourceVersion "". `transform` is applied page by page (the cache slims objects
    before the next page arrives, so a full list never sits in memory); `decode` parses
    each page (`kube.slim.list_decoder`: only the fields `transform` reads).
    """
    items: list[Obj] = []
    token = ""
    with gc_paused():  # the whole list: see kube.fastjson
        while True:
            query = [("limit", str(page_size))]
            if token:
                query.append(("continue", token))
            if field_selector:
                query.append(("fieldSelector", field_selector))
            body = client.get_json(rt, verb="list", namespace=namespace, query=query, decode=decode)
            if body is None:
                if rt.group in BUILTIN_GROUPS:
                    raise UnavailableError(
                        f"the Kubernetes API at {client.server} does not serve {rt.plural}"
                    )
                return [], ""
            for item in body.get("items") or []:
                item["kind"] = rt.kind
                item["apiVersion"] = rt.api_version
                items.append(transform(item) if transform else item)
            meta: dict[str, Any] = body.get("metadata") or {}
            token = str(meta.get("continue") or "")
            if not token:
                return items, str(meta.get("resourceVersion") or "")


def events_for(client: RawClient, *, namespace: str, kind: str, name: str) -> list[Obj]:
    """One request: core/v1 events in the namespace about the named object."""
    rt = KINDS["Event"]
    selector = f"involvedObject.kind={kind},involvedObject.name={name}"
    body = client.get_json(
        rt, verb="list", namespace=namespace, query=[("fieldSelector", selector)]
    )
    items = list((body or {}).get("items") or [])
    for item in items:
        item["kind"] = "Event"
        item["apiVersion"] = rt.api_version
    return items


class LiveSource:
    """ClusterSource over direct API reads. One instance per triage (usage is cached)."""

    def __init__(self, client: RawClient) -> None:
        self.client = client
        self._usage: dict[str, NodeUsage] | None = None
        self.default_namespace: str | None = None  # the context's namespace, as kubectl uses

    @property
    def cluster_name(self) -> str:
        return self.client.cluster_name

    def get(self, kind: str, name: str, *, namespace: str | None = None) -> Obj | None:
        rt = kind_type(kind)
        obj = self.client.get_json(
            rt, verb="get", namespace=namespace if rt.namespaced else None, name=name
        )
        if obj is not None:
            obj.setdefault("kind", rt.kind)
            obj.setdefault("apiVersion", rt.api_version)
        return obj

    def objects(self, kind: str, *, namespace: str | None = None) -> list[Obj]:
        rt = kind_type(kind)
        items, _ = list_objects(self.client, rt, namespace=namespace if rt.namespaced else None)
        return items

    def events_for(self, *, namespace: str, kind: str, name: str) -> list[Obj]:
        return events_for(self.client, namespace=namespace, kind=kind, name=name)

    def node_usage(self) -> Mapping[str, NodeUsage]:
        """Requests of non-terminated pods per node, listed once for this instance's lifetime."""
        if self._usage is None:
            pods, _ = list_objects(self.client, KINDS["Pod"], field_selector=ACTIVE_PODS)
            self._usage = usage_of(pods)
        return self._usage

    def close(self) -> None:
        self.client.close()
