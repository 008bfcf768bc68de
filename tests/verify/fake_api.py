"""A loopback Kubernetes API fake for the two write paths: access reviews and the test pod.

`kube.testing.FakeApiServer` serves reads only (GET, list, watch); these tests need POST and
DELETE, so this stdlib server speaks just that part of the protocol: it answers
SelfSubjectAccessReviews from a set of denied (verb, group, resource) triples, creates pods
(honouring generateName), advances each created pod through a scripted list of statuses on
every GET, lists events per pod, and records every request, so tests can assert the DELETE.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

TOKEN = "verify-token"
Obj = dict[str, Any]


class WriteFake:
    def __init__(self) -> None:
        self.denied: set[tuple[str, str, str]] = set()  # (verb, group, resource)
        self.requests: list[tuple[str, str]] = []  # (method, path)
        self.reviews: list[Obj] = []
        self.pods: dict[str, Obj] = {}
        self.script: list[Obj] = []  # statuses (with optional spec.nodeName) applied per GET
        self.events: list[Obj] = []  # events attached to every created pod
        self.fail: dict[tuple[str, str], int] = {}  # (method, path suffix) -> status
        self.on_get: Callable[[], None] | None = None
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> WriteFake:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def write_kubeconfig(self, path: Path) -> str:
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": TOKEN}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
            "current-context": "fake",
        }
        path.write_text(json.dumps(cfg))
        return str(path)

    def methods(self, method: str) -> list[str]:
        return [p for m, p in self.requests if m == method]

    # --- handlers ------------------------------------------------------------------------

    def review(self, body: Obj) -> Obj:
        attrs = body["spec"]["resourceAttributes"]
        key = (attrs["verb"], attrs.get("group", ""), attrs["resource"])
        self.reviews.append(attrs)
        allowed = key not in self.denied
        return body | {
            "status": {"allowed": allowed} | ({} if allowed else {"reason": "no RBAC rule"})
        }

    def create_pod(self, ns: str, body: Obj) -> Obj:
        meta = body.setdefault("metadata", {})
        meta["name"] = meta.pop("generateName", "pod-") + f"x{len(self.pods) + 1:04d}"
        meta["namespace"] = ns
        body["status"] = {"phase": "Pending"}
        self.pods[meta["name"]] = body
        return body

    def get_pod(self, name: str) -> Obj | None:
        pod = self.pods.get(name)
        if pod is not None and self.script:
            step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
            pod["status"] = step.get("status", pod["status"])
            if step.get("nodeName"):
                pod["spec"]["nodeName"] = step["nodeName"]
        return pod


def _status(code: int, message: str) -> bytes:
    return json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "code": code,
            "message": message,
        }
    ).encode()


def _handler(fake: WriteFake) -> type[BaseHTTPRequestHandler]:
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _reply(self, code: int, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _body(self) -> Obj:
            n = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(n)) if n else {}

        def _handle(self, method: str) -> None:
            url = urlsplit(self.path)
            body = self._body() if method in ("POST", "DELETE") else {}
            with fake._lock:
                fake.requests.append((method, url.path))
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self._reply(401, _status(401, "Unauthorized"))
            for (m, suffix), code in fake.fail.items():
                if m == method and url.path.endswith(suffix):
                    return self._reply(code, _status(code, "injected failure"))
            parts = url.path.strip("/").split("/")
            if url.path.endswith("/selfsubjectaccessreviews") and method == "POST":
                return self._reply(201, json.dumps(fake.review(body)).encode())
            if parts[:3] == ["api", "v1", "namespaces"] and len(parts) >= 5:
                ns, plural, name = parts[3], parts[4], parts[5] if len(parts) > 5 else None
                if plural == "pods" and method == "POST" and name is None:
                    return self._reply(201, json.dumps(fake.create_pod(ns, body)).encode())
                if plural == "pods" and method == "GET" and name:
                    if fake.on_get:
                        fake.on_get()
                    pod = fake.get_pod(name)
                    if pod is None:
                        return self._reply(404, _status(404, "not found"))
                    return self._reply(200, json.dumps(pod).encode())
                if plural == "pods" and method == "DELETE" and name:
                    gone = fake.pods.pop(name, None)
                    code = 200 if gone else 404
                    return self._reply(code, json.dumps(gone or {}).encode())
                if plural == "events" and method == "GET":
                    q = parse_qs(url.query).get("fieldSelector", [""])[0]
                    items = [
                        e
                        for e in fake.events
                        if f"involvedObject.name={e['involvedObject']['name']}" in q
                    ]
                    return self._reply(
                        200,
                        json.dumps(
                            {"kind": "EventList", "apiVersion": "v1", "items": items}
                        ).encode(),
                    )
            return self._reply(404, _status(404, "not found"))

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

        def do_DELETE(self) -> None:
            self._handle("DELETE")

    return H
