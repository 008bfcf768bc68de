"""Names are checked before anything reaches a cluster: a typo must fail here, not in the API."""

from __future__ import annotations

import re

_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


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
