"""`FakeApiServer`: objects in memory, served over HTTP on loopback, with faults to inject.

GET serves an object, a list (paginated, field-selected, continue tokens that can be made to
expire) or a watch (`kube.testing.watch`); POST and DELETE serve the two writes the product
makes (`kube.testing.writes`: access reviews and the test pod).
"""

from __future__ import annotations

import base64
import bisect
import json
import re
import ssl
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from kube.testing.watch import serve_watch
from kube.testing.wire import TOKEN, matches, route, status_body, write_kubeconfig
from kube.testing.writes import REVIEWS, Writes
from triage.cluster.objects import Obj
from triage.cluster.source import ALL_KINDS, ResourceType

JSON = "application/json"
_LOG = re.compile(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)/log")


@dataclass
class _Resource:
    rt: ResourceType
    items: dict[tuple[str, str], tuple[Obj, bytes]] = field(default_factory=dict)
    sorted_keys: list[tuple[str, str]] | None = None
    history: list[tuple[int, bytes]] = field(default_factory=list)  # (rv, watch-event line)
    views: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)
    # Pods by spec.nodeName, kept current: an API server's watch cache indexes pods by node
    # (every kubelet lists its own), so a `spec.nodeName=X` list costs the node's pods only.
    by_node: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    # Events by namespace and the object they are about. An API server's watch cache filters
    # a namespace's events in Go, a few microseconds for thousands; this server's Python
    # would take milliseconds, and a triage's time would be the server's (`bench.run`).
    by_subject: dict[tuple[str, str, str], set[tuple[str, str]]] = field(default_factory=dict)

    def file(self, k: tuple[str, str], old: Obj | None, new: Obj | None) -> None:
        """Keep `by_node` and `by_subject` current as the object at `k` changes from `old` to
        `new`."""
        _refile(self.by_node, k, _node_of(old), _node_of(new))
        _refile(self.by_subject, k, _subject_of(k, old), _subject_of(k, new))


def _refile(index: dict[Any, set[tuple[str, str]]], k: tuple[str, str], was: Any, now: Any) -> None:
    if was == now:
        return
    if was:
        held = index.get(was)
        if held is not None:
            held.discard(k)
            if not held:
                del index[was]
    if now:
        index.setdefault(now, set()).add(k)


def _node_of(obj: Obj | None) -> str:
    return str(((obj or {}).get("spec") or {}).get("nodeName") or "")


def _subject_of(k: tuple[str, str], obj: Obj | None) -> tuple[str, str, str] | None:
    ref = (obj or {}).get("involvedObject")
    if not isinstance(ref, dict):
        return None
    return (k[0], str(ref.get("kind") or ""), str(ref.get("name") or ""))


def _stored(key: tuple[str, str]) -> str:
    """Where an API server stores the object at `key` (namespace, name), below its kind's
    prefix. A list is in the order of these keys: namespace "a-b"'s objects come before
    namespace "a"'s ("a-b/x" < "a/x")."""
    return f"{key[0]}/{key[1]}"


def _subject_terms(selector: str) -> tuple[str, str] | None:
    """The kind and name equality terms `involvedObject.kind=K,involvedObject.name=N` of a
    field selector name (as `kube.lists.events_for` asks), if it has both."""
    terms = {}
    for term in selector.split(","):
        k, sep, v = term.replace("==", "=").partition("=")
        if sep and k in ("involvedObject.kind", "involvedObject.name"):
            terms[k] = v
    if len(terms) < 2:
        return None
    return terms["involvedObject.kind"], terms["involvedObject.name"]


def _node_term(selector: str) -> str | None:
    """The node an equality term `spec.nodeName=X` of a field selector names, if any."""
    for term in selector.split(","):
        k, sep, v = term.replace("==", "=").partition("=")
        if sep and k == "spec.nodeName":  # not "spec.nodeName!=X": k ends with "!" then
            return v
    return None


class FakeApiServer:
    """In-memory API server on 127.0.0.1. Use as a context manager or call start()/stop()."""

    def __init__(
        self,
        objects: Iterable[Obj] = (),
        *,
        not_installed: Iterable[str] = (),
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.not_installed = set(not_installed)  # API groups answering 404
        # (plural, namespace): None forbids cluster-wide requests, "*" forbids every request
        self.forbidden: set[tuple[str, str | None]] = set()
        self.unauthorized = False
        # next requests answer these statuses: a code, or (code, Retry-After seconds)
        self.fail_statuses: list[int | tuple[int, float]] = []
        # container logs: (namespace, pod, container, previous) -> text; others answer 400
        self.logs: dict[tuple[str, str, str, bool], str] = {}
        self.fail_on: dict[str, int] = {}  # plural -> the status every request of it answers
        self.expire_continue = 0  # the next N requests with a continue token answer 410 Gone
        self.trickle = 0.0  # seconds between the bytes of every get or list answer
        self.not_kubernetes = False  # answer every request as a web server would: 404 text
        self.writes = Writes()  # access reviews and pods created through POST
        self.calls: list[tuple[str, str]] = []  # (method, path) of every request
        self.fail_calls: dict[tuple[str, str], int] = {}  # (method, path suffix) -> status
        self.latency = 0.0  # seconds every get and list takes (a slow API server); not watches
        self.slow: dict[str, float] = {}  # plural -> seconds more each get or list of it takes
        # Serves the watch-list protocol (sendInitialEvents), as Kubernetes 1.32+ does; False:
        # refuses it with 422, as a server with the WatchList feature off does; None: ignores
        # the parameters (a plain watch: every object, but no bookmark ends them).
        self.watch_list: bool | None = True
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.rv = 1
        self.min_rv = 0  # watches from before this get 410 Gone
        self._res: dict[str, _Resource] = {k: _Resource(rt) for k, rt in ALL_KINDS.items()}
        self._cond = threading.Condition()
        self._drops = 0
        self._stopping = False
        self._retry_after: float | None = None
        for obj in objects:
            self.apply(obj, record=False)
        self._httpd = _Server(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        self._tls = tls is not None
        if tls is not None:  # served over https with the context's certificate
            self._httpd.socket = tls.wrap_socket(self._httpd.socket, server_side=True)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        scheme = "https" if self._tls else "http"
        return f"{scheme}://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> FakeApiServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def write_kubeconfig(
        self, path: Path, *, context: str = "fake", ca_pem: bytes | None = None
    ) -> Path:
        return write_kubeconfig(self.url, path, context=context, ca_pem=ca_pem)

    # --- state changes -------------------------------------------------------------------

    def apply(self, obj: Obj, *, record: bool = True) -> Obj:
        """Create or replace an object (keyed by kind/namespace/name); bumps resourceVersion."""
        if obj.get("kind") == "Event" and obj.get("apiVersion") == "events.k8s.io/v1":
            obj = core_event(obj)
        res = self._res[obj["kind"]]
        meta = obj.setdefault("metadata", {})
        k = (meta.get("namespace") or "", meta["name"])
        with self._cond:
            self.rv += 1
            meta["resourceVersion"] = str(self.rv)
            event = "MODIFIED" if k in res.items else "ADDED"
            item = {k2: v for k2, v in obj.items() if k2 not in ("kind", "apiVersion")}
            if k not in res.items:
                res.sorted_keys = None
            old = res.items.get(k)
            res.file(k, old[0] if old else None, obj)
            res.items[k] = (obj, json.dumps(item).encode())
            res.views.clear()
            if record:
                self._record(res, event, obj)
        return obj

    def object(self, kind: str, name: str, *, namespace: str | None = None) -> Obj | None:
        """A copy of a stored object (change it and `apply` it), or None."""
        with self._cond:
            found = self._res[kind].items.get((namespace or "", name))
        return None if found is None else json.loads(json.dumps(found[0]))

    def delete(self, kind: str, name: str, *, namespace: str | None = None) -> None:
        res = self._res[kind]
        with self._cond:
            obj, _ = res.items.pop((namespace or "", name))
            res.file((namespace or "", name), obj, None)
            res.sorted_keys = None
            res.views.clear()
            self.rv += 1
            obj = json.loads(json.dumps(obj))
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self._record(res, "DELETED", obj)

    def _record(self, res: _Resource, event: str, obj: Obj) -> None:
        line = json.dumps({"type": event, "object": obj}).encode() + b"\n"
        res.history.append((self.rv, line))
        self._cond.notify_all()

    def compact(self) -> None:
        """Forget history: watches resuming from an older resourceVersion get 410 Gone."""
        with self._cond:
            self.min_rv = self.rv
            for res in self._res.values():
                res.history.clear()
            self._cond.notify_all()

    def drop_watches(self) -> None:
        """End every open watch stream abruptly (as a restarting API server would)."""
        with self._cond:
            self._drops += 1
            self._cond.notify_all()

    def methods(self, method: str) -> list[str]:
        """The paths of every request of `method` received so far."""
        with self._cond:
            return [p for m, p in self.calls if m == method]

    def objects_of(self, kind: str) -> list[Obj]:
        """Copies of every stored object of `kind`."""
        with self._cond:
            found = [o for o, _ in self._res[kind].items.values()]
        return [json.loads(json.dumps(o)) for o in found]

    def count(self, *, path_contains: str = "", watch: bool | None = None) -> int:
        with self._cond:
            return sum(
                1
                for p, q in self.requests
                if path_contains in p and (watch is None or ("watch" in q) == watch)
            )

    # --- serving -------------------------------------------------------------------------

    def _error_for(self, rt: ResourceType, ns: str | None) -> tuple[int, bytes] | None:
        if self.unauthorized:
            return 401, status_body(401, "Unauthorized", "Unauthorized")
        if rt.group in self.not_installed:
            return 404, status_body(
                404, "NotFound", "the server could not find the requested resource"
            )
        if {(rt.plural, "*"), (rt.plural, ns)} & self.forbidden:
            msg = f'{rt.plural} is forbidden: User "x" cannot list resource "{rt.plural}"'
            return 403, status_body(403, "Forbidden", msg)
        if rt.plural in self.fail_on:
            code = self.fail_on[rt.plural]
            return code, status_body(code, "InternalError", f"injected failure on {rt.plural}")
        if self.fail_statuses:
            injected = self.fail_statuses.pop(0)
            if isinstance(injected, tuple):
                injected, self._retry_after = injected
            return injected, status_body(injected, "InternalError", "injected failure")
        return None

    def _log(self, ns: str, pod: str, q: dict[str, str]) -> tuple[int, bytes]:
        """A container's log, as the API server serves `pods/log` (its tail, its first bytes)."""
        if ("pods", "*") in self.forbidden or ("pods/log", "*") in self.forbidden:
            return 403, status_body(403, "Forbidden", f"pods/log is forbidden in {ns}")
        previous = q.get("previous") == "true"
        text = self.logs.get((ns, pod, q.get("container", ""), previous))
        if text is None:
            why = "previous terminated container not found" if previous else "is waiting to start"
            return 400, status_body(400, "BadRequest", f"container {q.get('container')} {why}")
        lines = text.splitlines(keepends=True)
        if "tailLines" in q:
            lines = lines[-int(q["tailLines"]) :] if int(q["tailLines"]) else []
        body = "".join(lines).encode()
        return 200, body[: int(q["limitBytes"])] if "limitBytes" in q else body

    def _get(self, rt: ResourceType, ns: str | None, name: str) -> tuple[int, bytes]:
        with self._cond:
            found = self._res[rt.kind].items.get((ns or "", name))
        if found is None:
            return 404, status_body(404, "NotFound", f'{rt.plural} "{name}" not found')
        obj = found[0]
        return 200, json.dumps({"kind": rt.kind, "apiVersion": rt.api_version} | obj).encode()

    def _list(self, rt: ResourceType, ns: str | None, q: dict[str, str]) -> tuple[int, bytes]:
        res = self._res[rt.kind]
        selector = q.get("fieldSelector", "")
        with self._cond:
            if res.sorted_keys is None:
                res.sorted_keys = sorted(res.items, key=_stored)
            view = res.views.get((ns or "", selector))
            node = _node_term(selector) if selector else None
            subject = _subject_terms(selector) if selector and ns is not None else None
            if view is None:
                keys = (
                    res.sorted_keys
                    if node is None
                    else sorted(res.by_node.get(node, ()), key=_stored)
                )
                if subject is not None:
                    keys = sorted(res.by_subject.get((ns or "", *subject), ()), key=_stored)
                elif ns is not None:  # as the API server's watch cache: that namespace's range
                    first = bisect.bisect_left(keys, f"{ns}/", key=_stored)
                    keys = keys[first : bisect.bisect_left(keys, f"{ns}0", lo=first, key=_stored)]
                view = [k for k in keys if not selector or matches(res.items[k][0], selector)]
                if node is None:  # one view per node would grow without end under churn
                    res.views[(ns or "", selector)] = view
            start = 0
            if q.get("continue"):
                last = tuple(json.loads(base64.b64decode(q["continue"])))
                start = bisect.bisect_right(view, _stored(last), key=_stored)
            limit = int(q.get("limit") or 0) or len(view)
            page = view[start : start + limit]
            chunks = [res.items[k][1] for k in page]
            more = start + limit < len(view)
            rv = self.rv
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if more:
            meta["continue"] = base64.b64encode(json.dumps(list(page[-1])).encode()).decode()
            if not selector and not q.get("labelSelector"):  # a selected list's is unknown
                meta["remainingItemCount"] = len(view) - start - limit
        head = json.dumps({"kind": f"{rt.kind}List", "apiVersion": rt.api_version})
        body = head[:-1].encode() + b', "metadata": ' + json.dumps(meta).encode()
        return 200, body + b', "items": [' + b",".join(chunks) + b"]}"


class _Server(ThreadingHTTPServer):
    request_queue_size = 1024  # a cache opens ~20 watches at once; the default 5 drops SYNs
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (a source closed with a kept-alive connection) is how
        clients end, not an error of the server: not printed. Anything else is."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def _make_handler(server: FakeApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # else headers then body stall on delayed ACKs

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _reply(self, code: int, body: bytes, *, kind: str | None = None) -> None:
            kind = kind or ("text/html" if body.startswith(b"<") else JSON)
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            with server._cond:
                wait, server._retry_after = server._retry_after, None
            if wait is not None:
                self.send_header("Retry-After", f"{wait:g}")
            self.end_headers()
            if not server.trickle:
                self.wfile.write(body)
                return
            for i in range(len(body)):  # a byte at a time, each within any read timeout
                if server._stopping:
                    return
                self.wfile.write(body[i : i + 1])
                self.wfile.flush()
                time.sleep(server.trickle)

        def _refused(self, method: str, path: str) -> tuple[int, bytes] | None:
            """What answers a request before it is served: no API server, bad credentials,
            an injected failure for this method and path."""
            with server._cond:
                server.calls.append((method, path))
                injected = next(
                    (code for (m, suffix), code in server.fail_calls.items()
                     if m == method and path.endswith(suffix)),
                    None,
                )  # fmt: skip
            if server.not_kubernetes:
                return 404, b"<html>404 Not Found</html>"
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return 401, status_body(401, "Unauthorized", "Unauthorized")
            if injected is not None:
                return injected, status_body(injected, "InternalError", "injected failure")
            return None

        def _body(self) -> Obj:
            n = int(self.headers.get("Content-Length") or 0)
            data = json.loads(self.rfile.read(n)) if n else {}
            return data if isinstance(data, dict) else {}

        def do_POST(self) -> None:
            path = urlsplit(self.path).path
            body = self._body()
            refused = self._refused("POST", path)
            if refused is not None:
                return self._reply(*refused)
            if path == REVIEWS:
                return self._reply(201, json.dumps(server.writes.review(body)).encode())
            found = route(path)
            if found is not None and found[0].kind == "Pod" and found[1] and not found[2]:
                pod = server.writes.create_pod(server, found[1], body)
                return self._reply(201, json.dumps(pod).encode())
            return self._reply(404, status_body(404, "NotFound", "not found"))

        def do_DELETE(self) -> None:
            path = urlsplit(self.path).path
            self._body()
            refused = self._refused("DELETE", path)
            if refused is not None:
                return self._reply(*refused)
            found = route(path)
            if found is None or found[2] is None:
                return self._reply(404, status_body(404, "NotFound", "not found"))
            rt, ns, name = found[0], found[1], found[2]
            gone = server.object(rt.kind, name, namespace=ns)
            if gone is None:
                return self._reply(404, status_body(404, "NotFound", f"{name} not found"))
            server.delete(rt.kind, name, namespace=ns)
            return self._reply(200, json.dumps(gone).encode())

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            q = {k: v[-1] for k, v in parse_qs(url.query).items()}
            with server._cond:
                server.requests.append((url.path, q))
            refused = self._refused("GET", url.path)
            if refused is not None:
                return self._reply(*refused)
            log = _LOG.fullmatch(url.path)
            if log is not None:
                code, body = server._log(unquote(log[1]), unquote(log[2]), q)
                return self._reply(code, body, kind="text/plain" if code == 200 else JSON)
            found = route(url.path)
            if found is None:
                return self._reply(404, status_body(404, "NotFound", "not found"))
            rt, ns, name = found
            error = server._error_for(rt, ns)
            if error:
                return self._reply(*error)
            if "sendInitialEvents" in q and (
                server.watch_list is False or q.get("resourceVersionMatch") != "NotOlderThan"
            ):
                why = "sendInitialEvents is forbidden" if not server.watch_list else (
                    "resourceVersionMatch must be NotOlderThan with sendInitialEvents")  # fmt: skip
                return self._reply(422, status_body(422, "Invalid", why))
            if q.get("watch") in ("1", "true"):
                return serve_watch(server, self, rt, q)
            if server.latency or server.slow:
                time.sleep(server.latency + server.slow.get(rt.plural, 0.0))
            if name:
                if rt.kind == "Pod" and ns:
                    server.writes.advance(server, ns, name)
                return self._reply(*server._get(rt, ns, name))
            if q.get("continue"):
                with server._cond:
                    expired, server.expire_continue = (
                        server.expire_continue > 0,
                        max(0, server.expire_continue - 1),
                    )
                if expired:
                    gone = "The provided continue parameter is too old"
                    return self._reply(410, status_body(410, "Expired", gone))
            return self._reply(*server._list(rt, ns, q))

    return Handler


def core_event(ev: Obj) -> Obj:
    """An events.k8s.io/v1 Event as the API server serves it at core/v1 (one storage, two
    versions: `regarding` is `involvedObject`, `note` the message, the series' count and last
    time the count and lastTimestamp, `deprecatedSource` the source)."""
    out = {k: v for k, v in ev.items() if k not in ("regarding", "note", "series", "related",
                                                     "deprecatedSource", "deprecatedCount",
                                                     "deprecatedFirstTimestamp",
                                                     "deprecatedLastTimestamp")}  # fmt: skip
    series = ev.get("series") or {}
    out |= {
        "apiVersion": "v1",
        "involvedObject": ev.get("regarding") or {},
        "message": ev.get("note") or "",
        "source": ev.get("deprecatedSource") or {"component": ev.get("reportingController", "")},
        "count": series.get("count") or ev.get("deprecatedCount") or 1,
        "firstTimestamp": ev.get("deprecatedFirstTimestamp") or ev.get("eventTime"),
        "lastTimestamp": series.get("lastObservedTime")
        or ev.get("deprecatedLastTimestamp")
        or ev.get("eventTime"),
    }
    if ev.get("related"):
        out["related"] = ev["related"]
    return out
