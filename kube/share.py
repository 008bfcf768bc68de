"""Sharing equal values across the cache's objects: one copy of each.

Pods of one workload repeat the same containers, tolerations, selectors, labels and statuses,
and the same short strings (namespace, node, phase). A `Sharer` returns one canonical
instance for equal JSON values (found by a digest of their canonical JSON), for values its
callers key themselves (`keep`: `kube.slim` keys a pod's spec and status by what it keeps of
them, before making anything), for short strings (interned), for the owner references of
neighbouring objects, and for pods' label sets (kept for good once a second pod has one:
most of a batch cluster's are one Job's, of one pod). Shared values are never mutated:
callers treat cached objects as read-only, as with any ClusterSource.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from sys import intern
from typing import Any, TypeVar
from zlib import crc32

import orjson

from kube.compact import compact, compact_labels
from triage.cluster.objects import Obj

_OWNER_REF = ("apiVersion", "kind", "name", "controller")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
_MAX_SHARED = 200_000  # distinct shared values kept before a table starts over
_RECENT_OWNERS = 16  # owner-reference lists kept for the next objects (`Sharer.owners`)
_RECENT_LABELS = 64  # label sets of one object, kept for the next ones (`Sharer.labels`)
_SHARED_LABELS = 16_384  # label sets of several objects kept before the table starts over
_RECENT_VALUES = 1024  # and the values of the last ones made
_OWN_STRINGS = ("name", "uid")  # taken from an earlier version (`earlier`; times are interned)
_PLAIN = frozenset((str, int, float, bool, type(None), tuple))  # compared by value (`made_of`)


def _canon(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def digest(data: bytes) -> int:
    """96 bits naming `data`: Python's SipHash of it (keyed per process, unless
    PYTHONHASHSEED fixes the key) and its CRC-32. Two values of a cluster share a digest
    with odds of about one in 2**96 per pair; sharing one value for another on purpose would
    take a second preimage of both (2**64 tries with the key known). A 16-byte BLAKE2b digest
    cost twice as long (a tenth of a cold sync)."""
    return hash(data) << 32 | crc32(data)


class Sharer:
    """Returns one canonical instance for equal JSON values and short strings."""

    def __init__(
        self, owner: Callable[[str, str, Any], Obj | None] | None = None, kind: str | None = None
    ) -> None:
        """`owner(kind, namespace, name)`: the object an owner reference names, as cached (None
        when it is not): the owner references and labels this sharer makes then hold its name
        and uid strings, not copies (see `owners`). `kind`: the kind of the objects made with
        this sharer, whose new versions then take their cached version's strings (`earlier`)."""
        self._owner = owner
        self.kind = kind if owner is not None else None
        self._values: dict[int, Any] = {}
        # Whole values looked up by a key their maker chose (`keep`): pod specs by the spec
        # as decoded, statuses by what their slim form keeps (`kube.slim`).
        self.specs: dict[Hashable, Obj] = {}
        self.statuses: dict[Hashable, Obj] = {}
        self._owners: dict[tuple[Any, ...], list[Obj]] = {}
        self._strings: dict[str, str] = {}
        self._labels: dict[tuple[Any, ...], Obj] = {}  # label sets of several objects
        # and those of one object lately: the set, and the name of the object
        self._recent_labels: dict[tuple[Any, ...], tuple[Obj, Any]] = {}
        self._recent_values: dict[str, str] = {}  # their values, and their owners' names
        # Values made of shared parts (`made_of`), of several objects and of one lately.
        self._made: dict[tuple[Any, ...], tuple[Sequence[Any], Any, Any]] = {}
        self._recent_made: dict[tuple[Any, ...], tuple[Sequence[Any], Any, Any]] = {}

    def value(self, value: Any, parts: Callable[[Any, Sharer], None] | None = None) -> Any:
        """The canonical instance of `value`. When `value` is new, `parts(value, self)`
        first shares its parts in place: a value seen before (most pod statuses) skips that."""
        if not value:
            return value
        # A digest, not the canonical JSON itself: most values (a pod's spec with its node,
        # its owner) are seen once, and a key as large as the value would double their cost.
        key = digest(_canon(value))
        found = self._values.get(key)
        if found is not None:
            return found
        if parts is not None:
            parts(value, self)
        if len(self._values) >= _MAX_SHARED:
            self._values.clear()
        self._values[key] = value
        return value

    def keep(self, table: dict[K, V], key: K, value: V, *, limit: int = _MAX_SHARED) -> V:
        """`value`, kept in `table` (one of this sharer's) under `key`; a table of `limit`
        entries starts over."""
        if len(table) >= limit:
            table.clear()
        table[key] = value
        return value

    def string(self, value: Any) -> Any:
        """One instance of equal strings of any length, kept in this sharer's own table, not
        the interpreter's: for values many and short-lived (the times and messages of a
        sweep's events), which interning would leave a slot each in its table."""
        if type(value) is not str:
            return value
        found = self._strings.get(value)
        return self.keep(self._strings, value, value) if found is None else found

    def labels(self, labels: Any, owners: Any = (), name: Any = None) -> Any:
        """One instance of equal label sets of pods. The pods of a workload come one after
        another in a list's name order (and in a watch's bursts), and many workloads have one
        pod (a Job's labels name it and its uid): a set of one object is kept only among the
        last few, and one of a second object (another `name`: not the same pod updated) for
        good, so that a set of one pod costs no entry. A new set is a key-sharing dict
        (`compact_labels`: its keys are its shape's), and a value equal to one of the last
        ones made is that one: an app or team name repeats across workloads, the Job
        controller writes the Job's name and uid twice, and a value equal to the object's
        `name` (a StatefulSet's pod is labelled with it) or to the name of one of its
        `owners` (its owner references) is that name (not interned: most are seen a few
        times only)."""
        if type(labels) is not dict or not labels:
            return self.value(labels)
        key = tuple(labels.items())
        try:
            found = self._labels.get(key)
            seen = self._recent_labels.get(key) if found is None else None
        except TypeError:  # a value that is not a plain one: shared as any value is
            return self.value(labels)
        if found is not None:
            return found
        if seen is not None:
            made, first = seen
            if first == name:  # the same object again (an update): still its own
                return made
            del self._recent_labels[key]  # a second object's: kept for good, by its own strings
            return self.keep(self._labels, tuple(made.items()), made, limit=_SHARED_LABELS)
        recent, keep = self._recent_values, self.keep
        if type(name) is str:  # the object's own names: what its labels repeat is those
            keep(recent, name, name, limit=_RECENT_VALUES)
        for r in owners if type(owners) is list else ():
            owner = r.get("name") if type(r) is dict else None
            if type(owner) is str:
                keep(recent, owner, owner, limit=_RECENT_VALUES)
        values = []
        for v in labels.values():  # inline, not a call per value: this runs for every pod
            if type(v) is str:
                found_value = recent.get(v)
                v = keep(recent, v, v, limit=_RECENT_VALUES) if found_value is None else found_value
            values.append(v)
        # Its keys are its class's (setting an attribute interns its name): one copy of each.
        made = compact_labels(tuple(labels), values)
        self.keep(self._recent_labels, key, (made, name), limit=_RECENT_LABELS)
        return made

    def made_of(self, parts: Sequence[Any], make: Callable[[], V], name: Hashable) -> V:
        """One instance of the values `make` makes of `parts`: plain values (text, numbers,
        empty dicts and lists) compared by value, the rest (what this sharer returned: shared
        label sets, specs) by identity, so that nothing is encoded to look it up. As label
        sets are (`labels`), a value of one object (`name`) is kept only among the last few
        made, and one of a second object for good: a workload's parts made of its own
        objects are never found again, and cost no entry."""
        key = tuple([
            p if type(p) is str
            else (type(p), p) if type(p) in _PLAIN
            else (id(p),) if p or type(p) not in (dict, list)
            else (type(p),)  # empty: alike whichever it is
            for p in parts
        ])  # fmt: skip  # an int is not the id of a part, nor True the number 1
        found = self._made.get(key)
        if found is not None:
            return found[1]  # type: ignore[no-any-return]
        seen = self._recent_made.get(key)
        if seen is not None:
            if seen[2] == name:  # the same object again (an update): still its own
                return seen[1]  # type: ignore[no-any-return]
            del self._recent_made[key]
            self.keep(self._made, key, seen, limit=_SHARED_LABELS)
            return seen[1]  # type: ignore[no-any-return]
        made = make()
        # The parts are kept with it: none of them is freed (and its id reused) while its
        # key is in a table.
        self.keep(self._recent_made, key, (parts, made, name), limit=_RECENT_LABELS)
        return made

    def earlier(self, meta: Obj) -> None:
        """Gives `meta` (the metadata of an object of `kind` being made: a dict of its own)
        the strings of that object's cached version where they are equal: its name and uid.
        Objects of other kinds may hold those strings: a Job's pods hold its name and uid
        (`owners`). The Job's new version (its status, which its controller writes after its
        pods change; a relist) would otherwise hold copies, and its pods the old ones: 137
        bytes a pod of a Job. A value is taken only when it is equal: a Job made again under
        its name keeps its own uid."""
        assert self.kind is not None
        name, namespace = meta.get("name"), meta.get("namespace", "")
        if type(name) is not str or type(namespace) is not str:
            return
        old = self._cached_meta(self.kind, namespace, name)
        if old is None:
            return
        for k in _OWN_STRINGS:
            v = meta.get(k)
            if type(v) is str:
                was = old.get(k)
                if v == was:
                    meta[k] = was

    @staticmethod
    def text(value: Any) -> Any:
        return intern(value) if type(value) is str and len(value) <= 64 else value

    def owners(self, refs: list[Obj], namespace: Any = None) -> list[Obj]:
        """One list of owner references for neighbouring objects with the same owners: the
        pods of a Job or of a DaemonSet come one after another in a list's name order (and
        in a watch's bursts). Only the last few are kept: most owners have a single pod, and
        a table of every owner would cost more in keys than it saved."""
        try:
            parts = []
            for r in refs:  # the fields of _OWNER_REF, in its order (a loop: it runs per pod)
                get = r.get
                parts.append((get("apiVersion", ABSENT), get("kind", ABSENT),
                              get("name", ABSENT), get("controller", ABSENT)))  # fmt: skip
            key = tuple(parts)
            found = self._owners.get(key)
        except (AttributeError, TypeError):  # not a dict, or an odd value: kept unshared
            return [
                {k: self.text(v) for k, v in r.items() if k in _OWNER_REF}
                if isinstance(r, dict)
                else r
                for r in refs
            ]
        if found is not None:
            return found
        # The kind and API version repeat; the owner's name is interned by nothing: most
        # owners have one pod, and their names would only grow the interpreter's table. The
        # owner's own strings, when it is cached, are used instead.
        if self._owner is not None and type(namespace) is str:
            key = tuple([self._adopt(values, namespace) for values in key])
        made = [
            compact(_OWNER_REF, (intern(values[0]), intern(values[1]), *values[2:]))
            if ABSENT not in values and type(values[0]) is str and type(values[1]) is str
            else {k: v for k, v in zip(_OWNER_REF, values, strict=True) if v is not ABSENT}
            for values in key
        ][:]  # a copy holds room for its items alone, the comprehension's for four: 16 bytes
        if key:
            self.keep(self._owners, key, made, limit=_RECENT_OWNERS)
        return made

    def _adopt(self, values: tuple[Any, ...], namespace: str) -> tuple[Any, ...]:
        """An owner reference's fields (of `_OWNER_REF`), its name the cached owner's own
        string; that owner's uid is then among the recent values, for `labels` to take (the Job
        controller labels a Job's pods with its name and uid: 137 bytes a pod of a Job).
        Another owner of the same name (a Job made again) gives its name, not its uid: a value
        is taken only when equal."""
        kind, name = values[1], values[2]
        meta = self._cached_meta(kind, namespace, name) if type(kind) is str else None
        if meta is None:
            return values
        uid = meta.get("uid")
        if type(uid) is str:
            self.keep(self._recent_values, uid, uid, limit=_RECENT_VALUES)
        own = meta.get("name")
        if own == name and type(own) is str:
            return (*values[:2], own, *values[3:])
        return values

    def _cached_meta(self, kind: str, namespace: str, name: Any) -> Obj | None:
        """The metadata of the object `owner` finds as cached, if it has any."""
        assert self._owner is not None
        found = self._owner(kind, namespace, name)
        meta = found.get("metadata") if type(found) is dict else None
        return meta if type(meta) is dict else None


ABSENT = object()  # a field an owner reference does not have (not the same as null)
