"""Finished pods and Jobs known by name alone: what a source that read every pod and Job
holds of those it holds aside, and how it answers for them.

A batch cluster's finished pods and Jobs are most of its objects, and nothing but a question
about one of them reads one: scheduling, usage and the sweeps look at active pods and at Jobs
that want pods. A source that lists them all (the cache's watches, a command's sweep) keeps,
of a pod that succeeded and whose one owner is a Job, its name and its Job's, and of a Job
that finished, its name; they are decided before an object is projected (`holding`), so that
the pages they were decoded into are freed. Whether a Job has pods, or exists, is answered
from the names (`filed`, `unmatched`, a count); asked by name, or as one of its Job's pods,
such an object is read from the API (`read_held`): one request each, or a list of the
namespace's finished pods for more than `GET_EACH` of one Job.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Protocol

from kube.client import RawClient
from kube.lists import list_objects
from triage.cluster.indexes import BY_NAME, POD_OWNER
from triage.cluster.objects import Obj, name_of, ns_of, workload_finished
from triage.cluster.source import ResourceType, file_at, key

# Held aside: namespace, then name, then the string it is held under (a pod: its Job's name).
Held = dict[str, dict[str, str]]
# Which objects to hold aside: the string to hold one under, or None to keep it as any.
Aside = Callable[[Obj], str | None]

# A Job's finished pods are read one by one when it has this many or fewer held; else the
# namespace's finished pods are listed (by this field selector) and its kept.
GET_EACH = 8
SUCCEEDED = "status.phase=Succeeded"

ASIDE: Obj = {}  # in a list's place of an object held aside (`holding`)
_NO_ASIDE: dict[str, str] = {}  # (never written to)
_NO_OWNED: dict[str, int] = {}  # (never written to)


def job_of_finished(pod: Obj) -> str | None:
    """The name of the Job of a pod to hold aside: one that succeeded, in a namespace, whose
    one owner reference is to a Job; else None."""
    status, meta = pod.get("status"), pod.get("metadata")
    if type(status) is not dict or status.get("phase") != "Succeeded" or type(meta) is not dict:
        return None
    refs, ns, name = meta.get("ownerReferences"), meta.get("namespace"), meta.get("name")
    if type(refs) is not list or len(refs) != 1 or type(refs[0]) is not dict:
        return None
    job = refs[0].get("name")
    if refs[0].get("kind") != "Job" or type(job) is not str or not job:
        return None
    if type(ns) is not str or type(name) is not str or not name:
        return None
    return job


def finished_job(job: Obj) -> str | None:
    """The name of a Job to hold aside: one that completed or failed."""
    try:
        finished = workload_finished(job)
    except (AttributeError, TypeError):  # an odd status: kept, for the engine to judge
        return None
    name = name_of(job)
    return name if finished and name else None


def holding(project: Callable[[Obj], Obj], test: Aside | None, held: Held) -> Callable[[Obj], Obj]:
    """`project`, but for an object to hold aside (`test`): filed in `held`, and `ASIDE` in
    its place in the list (left out by `kept`)."""
    if test is None:
        return project

    def hold(obj: Obj) -> Obj:
        held_as = test(obj)
        if held_as is None:
            return project(obj)
        file_at(held, *key(obj), held_as)
        return ASIDE

    return hold


def kept(items: list[Obj], held: Held) -> list[Obj]:
    """A list's objects but those held aside."""
    return [o for o in items if o is not ASIDE] if held else items


def owned_counts(held: Held) -> dict[str, dict[str, int]]:
    """How many objects are held under each string, by namespace."""
    owned: dict[str, dict[str, int]] = {}
    for ns, names in held.items():
        counts = owned[ns] = {}
        for held_as in names.values():
            counts[held_as] = counts.get(held_as, 0) + 1
    return owned


class Tables(Protocol):
    """What a source holds of the objects of one kind it holds aside."""

    def aside_of(self, namespace: str, name: str) -> str | None:
        """The string an object held aside is held under (None: none is held by this name)."""
        ...

    def aside_names(self, namespace: str, held_as: str) -> list[str]:
        """The names of the objects of `namespace` held aside under `held_as`."""
        ...

    def aside_owned(self, keys: Sequence[tuple[str, str]]) -> list[bool]:
        """For each (namespace, string), whether an object is held aside under it."""
        ...

    def aside_count(self, namespace: str | None = None) -> int:
        """How many objects (of `namespace`, or all) are held aside."""
        ...


class HeldAside:
    """`Tables` over what a source holds aside of one kind: built from what a list held
    aside, then changed one object at a time (a watch's). Not thread-safe: the cache's
    informer calls it under its lock."""

    def __init__(self, held: Held | None = None) -> None:
        self._held: Held = {} if held is None else held
        self._owned = owned_counts(self._held)  # how many are held under each string

    def aside_of(self, namespace: str, name: str) -> str | None:
        return self._held.get(namespace, _NO_ASIDE).get(name)

    def aside_names(self, namespace: str, held_as: str) -> list[str]:
        if not self._owned.get(namespace, _NO_OWNED).get(held_as):
            return []
        return [n for n, h in self._held.get(namespace, _NO_ASIDE).items() if h == held_as]

    def aside_owned(self, keys: Sequence[tuple[str, str]]) -> list[bool]:
        return [bool(self._owned.get(ns, _NO_OWNED).get(held_as)) for ns, held_as in keys]

    def aside_count(self, namespace: str | None = None) -> int:
        if namespace is not None:
            return len(self._held.get(namespace, _NO_ASIDE))
        return sum(map(len, self._held.values()))

    def hold(self, namespace: str, name: str, held_as: str) -> None:
        """Holds the object of this name under `held_as` (in place of any held before)."""
        if self.aside_of(namespace, name) == held_as:
            return
        self.unhold(namespace, name)
        file_at(self._held, namespace, name, held_as)
        owned = self._owned.get(namespace, _NO_OWNED).get(held_as, 0)
        file_at(self._owned, namespace, held_as, owned + 1)

    def unhold(self, namespace: str, name: str) -> bool:
        """Forgets the object of this name held aside, if one is (and says so)."""
        named = self._held.get(namespace)
        held_as = None if named is None else named.pop(name, None)
        if held_as is None or named is None:
            return False
        if not named:
            del self._held[namespace]
        owned = self._owned[namespace]
        owned[held_as] -= 1
        if not owned[held_as]:
            del owned[held_as]
            if not owned:
                del self._owned[namespace]
        return True


# Reads the named objects held aside in a namespace: (namespace, names) -> those that exist.
ReadHeld = Callable[[str, list[str]], list[Obj]]


def read_held(
    client: RawClient,
    rt: ResourceType,
    namespace: str,
    names: list[str],
    *,
    get: Callable[[str], Obj | None],
    project: Callable[[Obj], Obj],
) -> list[Obj]:
    """The objects of `names` held aside in `namespace`, read from the API (`get` one by one,
    or a list of the namespace's finished pods for many) and projected as the list's were
    (those gone since are left out)."""
    if len(names) <= GET_EACH or rt.kind != "Pod":
        got = [get(n) for n in names]
    else:
        wanted = set(names)
        listed, _ = list_objects(client, rt, namespace=namespace, field_selector=SUCCEEDED)
        got = [o for o in listed if key(o)[1] in wanted]
    return [project(o) for o in got if o is not None]


def _job_key(kind: str, index: str, key: object) -> tuple[str, str] | None:
    """(namespace, Job name) of a `POD_OWNER` key of the pods of a Job, else None."""
    if kind != "Pod" or index != POD_OWNER or type(key) is not tuple or len(key) != 3:
        return None
    ns, owner_kind, name = key
    if owner_kind != "Job" or type(ns) is not str or type(name) is not str:
        return None
    return ns, name


def indexed(
    found: list[Obj], tables: Tables, kind: str, index: str, at: Hashable, read: ReadHeld
) -> list[Obj]:
    """What an index files under `at` (`found`), with the objects held aside it would file
    there: one named (`BY_NAME`), a Job's pods (`POD_OWNER`), read by `read`."""
    if index == BY_NAME and not found and type(at) is tuple and len(at) == 2:
        ns, name = at
        if tables.aside_of(ns, name) is not None:
            return read(ns, [name])
    job = _job_key(kind, index, at)
    if job is not None:
        names = tables.aside_names(*job)
        if names:
            return [*found, *read(job[0], names)]
    return found


def filed(
    found: list[bool], tables: Tables, kind: str, index: str, keys: Sequence[Hashable]
) -> list[bool]:
    """Whether anything is filed under each key (`found`), counting the objects held aside:
    by name, and the pods of a Job."""
    if index == BY_NAME:
        for i, k in enumerate(keys):
            if not found[i] and type(k) is tuple and len(k) == 2:
                found[i] = tables.aside_of(*k) is not None
    jobs = [(i, job) for i, k in enumerate(keys) if (job := _job_key(kind, index, k))]
    if jobs:
        owned = tables.aside_owned([job for _, job in jobs])
        for (i, _), has in zip(jobs, owned, strict=True):
            found[i] = found[i] or has
    return found


def unmatched(
    found: list[Obj], pods: Tables, kind: str, other_kind: str, other_index: str
) -> list[Obj]:
    """The workloads no object of the other index files under (`found`), but the Jobs some
    pod held aside is held under."""
    if (kind, other_kind, other_index) != ("Job", "Pod", POD_OWNER):
        return found
    owned = pods.aside_owned([(ns_of(w), name_of(w)) for w in found])
    return [w for w, has in zip(found, owned, strict=True) if not has]
