"""Which of the reads the engine needs are the bot's credentials allowed to make?

`SelfSubjectAccessReview` asks the API server's authorizer directly (RBAC, webhooks, whatever
is configured), so the answer is authoritative without reading any object. The list of reads
is derived from `triage.cluster.source.KINDS`, the same table the adapter reads and the Helm chart's
ClusterRole is checked against, so the three cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from kube.client import RawClient, resource_name
from kube.send import send_json
from triage.cluster.source import KINDS, NAMED

SSAR_PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
# get/list for triage; watch for the bot's cache (kube.cache); events are one of KINDS.
READ_VERBS = ("get", "list", "watch")
TEST_POD_VERBS = ("create", "delete")


@dataclass(frozen=True)
class Permission:
    verb: str
    group: str
    resource: str
    namespace: str | None = None  # None: cluster-wide (all namespaces)
    name: str | None = None  # one named object (resourceNames), else all

    def __str__(self) -> str:
        res = f"{self.resource}.{self.group}" if self.group else self.resource
        if self.name:
            res += f" {self.name}"
        where = f" in namespace {self.namespace}" if self.namespace else " (cluster-wide)"
        return f"{self.verb} {res}{where}"


def required_reads() -> list[Permission]:
    """Every read the engine and the bot's cache make: get/list/watch on each of KINDS, and
    get on each named object of NAMED."""
    return [
        Permission(verb, rt.group, rt.plural)
        for rt in sorted(KINDS.values(), key=resource_name)
        for verb in READ_VERBS
    ] + [
        Permission("get", rt.group, rt.plural, ns, name)
        for rt, ns, names in NAMED.values()
        for name in names
    ]


def pod_write_permissions(namespace: str) -> list[Permission]:
    return [Permission(verb, "", "pods", namespace) for verb in TEST_POD_VERBS]


def allowed(client: RawClient, perm: Permission) -> tuple[bool, str]:
    """Ask the authorizer; returns (allowed, reason it gave, if any)."""
    attrs: dict[str, str] = {"verb": perm.verb, "group": perm.group, "resource": perm.resource}
    if perm.namespace:
        attrs["namespace"] = perm.namespace
    if perm.name:
        attrs["name"] = perm.name
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attrs},
    }
    _, body = send_json(
        client,
        method="POST",
        path=SSAR_PATH,
        verb="create",
        resource="selfsubjectaccessreviews.authorization.k8s.io",
        body=review,
        retry=True,
    )
    status = (body or {}).get("status") or {}
    return bool(status.get("allowed")) and not status.get("denied"), str(status.get("reason") or "")


def missing_permissions(client: RawClient, perms: list[Permission] | None = None) -> list[str]:
    """The permissions (as one-line strings) the credentials lack, in `perms` order."""
    return [
        str(p) for p in (required_reads() if perms is None else perms) if not allowed(client, p)[0]
    ]
