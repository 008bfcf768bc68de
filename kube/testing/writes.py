"""The two writes the product makes, as the fake API server answers them: access reviews
(SelfSubjectAccessReview, from a set of denied (verb, group, resource) triples) and the test
pod (created with `generateName`, advanced through a scripted list of statuses on each GET,
deleted). Created pods live in the server's store like any other object, so lists, watches
and events see them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from triage.cluster.objects import Obj

if TYPE_CHECKING:
    from kube.testing.server import FakeApiServer

REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


@dataclass
class Writes:
    denied: set[tuple[str, str, str]] = field(default_factory=set)  # (verb, group, resource)
    reviews: list[Obj] = field(default_factory=list)  # the attributes of every review asked
    script: list[Obj] = field(default_factory=list)  # statuses (+ nodeName) applied per GET
    created: int = 0

    def review(self, body: Obj) -> Obj:
        attrs = body["spec"]["resourceAttributes"]
        self.reviews.append(attrs)
        allowed = (attrs["verb"], attrs.get("group", ""), attrs["resource"]) not in self.denied
        reason = {} if allowed else {"reason": "no RBAC rule"}
        return body | {"status": {"allowed": allowed} | reason}

    def create_pod(self, server: FakeApiServer, namespace: str, body: Obj) -> Obj:
        meta = body.setdefault("metadata", {})
        self.created += 1
        meta["name"] = meta.pop("generateName", "pod-") + f"x{self.created:04d}"
        meta["namespace"] = namespace
        body |= {"kind": "Pod", "apiVersion": "v1", "status": {"phase": "Pending"}}
        return server.apply(body)

    def advance(self, server: FakeApiServer, namespace: str, name: str) -> None:
        """The next scripted status of a created pod, as a GET of it would see it."""
        pod = server.object("Pod", name, namespace=namespace)
        if pod is None or not self.script:
            return
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        pod["status"] = step.get("status", pod["status"])
        if step.get("nodeName"):
            pod["spec"]["nodeName"] = step["nodeName"]
        server.apply(pod)
