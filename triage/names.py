"""Names are checked before anything reaches a cluster: a typo must fail here, not in the API."""

from __future__ import annotations

import re

_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# kubeconfig context names as the clouds write them: gke_proj_zone_name,
# arn:aws:eks:region:acct:cluster/name, user@cluster; no spaces, quotes or markup.
_CLUSTER = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9._:/@+]{0,252}$")


class InvalidNameError(ValueError):
    """A name that Kubernetes would reject. The message is a one-line explanation."""


def _shown(value: str) -> str:
    return repr(value if len(value) <= 80 else value[:77] + "...")


def validate_name(value: str, *, what: str = "pod name") -> str:
    """Pods, workloads and nodes use DNS-1123 subdomain names (253 chars, lowercase, dots)."""
    if not value:
        raise InvalidNameError(f"{what} is empty")
    if len(value) > 253 or not _DNS1123_SUBDOMAIN.match(value):
        raise InvalidNameError(
            f"invalid {what} {_shown(value)}: must be a DNS-1123 name "
            "(lowercase letters, digits, '-' and '.', starting and ending alphanumeric)"
        )
    return value


def validate_namespace(value: str) -> str:
    """Namespaces are DNS-1123 labels: at most 63 characters, no dots."""
    if not value:
        raise InvalidNameError("namespace is empty")
    if len(value) > 63 or not _DNS1123_LABEL.match(value):
        raise InvalidNameError(
            f"invalid namespace {_shown(value)}: must be a DNS-1123 label "
            "(at most 63 lowercase letters, digits and '-', starting and ending alphanumeric)"
        )
    return value


def validate_cluster(value: str) -> str:
    """Cluster names are kubeconfig context names (or their configured alias)."""
    if not value:
        raise InvalidNameError("cluster name is empty")
    if not _CLUSTER.match(value):
        raise InvalidNameError(
            f"invalid cluster name {_shown(value)}: use the kubeconfig context name "
            "(letters, digits and - . _ : / @ +)"
        )
    return value
