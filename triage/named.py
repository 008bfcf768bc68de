"""What a user typed to name a workload, read as kubectl reads it: `NAME`, `NS/NAME`,
`KIND/NAME` (with kubectl's short and plural kinds: `po`, `job`, `deploy`, `sts`, `rs`, `ds`,
`statefulsets.apps`) and `KIND/NS/NAME`, in the CLI and in chat alike.

`KIND/NAME` wins over `NS/NAME` when the first part is a kind kubectl knows, as in kubectl
(`kubectl get job/x`): a namespace named like a kind is given with `-n`.
"""

from __future__ import annotations

from typing import NamedTuple

from triage.names import InvalidNameError, validate_name, validate_namespace

# kubectl's names for the kinds a triage resolves (singular, plural, short, with group).
_KINDS: dict[str, str] = {}
for _kind, _short, _group in (
    ("Pod", "po", ""),
    ("Job", "", "batch"),
    ("Deployment", "deploy", "apps"),
    ("StatefulSet", "sts", "apps"),
    ("ReplicaSet", "rs", "apps"),
    ("DaemonSet", "ds", "apps"),
):
    _lower = _kind.lower()
    for _alias in (_lower, _lower + "s", _short):
        if _alias:
            _KINDS[_alias] = _kind
            if _group:
                _KINDS[f"{_alias}.{_group}"] = _kind


class Named(NamedTuple):
    """A workload as typed: its kind when given (None: a pod, else any workload kind), its
    namespace when given, and its name."""

    name: str
    kind: str | None = None
    namespace: str | None = None

    @property
    def spelled(self) -> str:
        """`kind/name` as the engine's resolver takes it (`name` when no kind was given)."""
        return f"{self.kind.lower()}/{self.name}" if self.kind else self.name


def kind_of(word: str) -> str | None:
    """The kind kubectl means by `word` (`sts`, `deployments.apps`), or None."""
    return _KINDS.get(word.lower())


def parse_target(text: str, *, what: str = "pod or workload name") -> Named:
    """`text` as `NAME`, `NS/NAME`, `KIND/NAME` or `KIND/NS/NAME`; InvalidNameError (one line)
    for anything else."""
    parts = text.split("/")
    if len(parts) == 1:
        return Named(validate_name(text, what=what))
    if len(parts) == 2:
        first, name = parts
        kind = kind_of(first)
        if kind is not None:
            return Named(validate_name(name, what=what), kind)
        return Named(validate_name(name, what=what), None, validate_namespace(first))
    if len(parts) == 3:
        kind = kind_of(parts[0])
        if kind is None:
            raise InvalidNameError(
                f"unknown kind {parts[0]!r} in {text!r}: use pod, job, deploy, sts, rs or ds "
                "(KIND/NAME, KIND/NAMESPACE/NAME)"
            )
        return Named(validate_name(parts[2], what=what), kind, validate_namespace(parts[1]))
    raise InvalidNameError(
        f"invalid {what} {text[:80]!r}: use NAME, NAMESPACE/NAME or KIND/NAME (po, job, deploy, "
        "sts, rs, ds)"
    )


def with_namespace(named: Named, namespace: str | None) -> str | None:
    """The namespace to use: the one typed in the name, or `namespace` (the `-n` flag);
    InvalidNameError when both are given and differ."""
    if named.namespace is None:
        return namespace
    if namespace is not None and namespace != named.namespace:
        raise InvalidNameError(
            f"namespace {named.namespace} in the name and -n {namespace} disagree: give one"
        )
    return named.namespace
