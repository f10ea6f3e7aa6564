"""The operator's in-memory cache: one reflector for every resource a cycle reads, change notification,
and the operator's own writes assumed until the watch catches up.

Every list and every watch event sets `changed`, which wakes the admission loop (except for
`QUIET_KINDS`, which no admission decision reads). Whatever else wants to see a kind's objects as they
arrive (the Reconfigured Events of `admission.operator.runtime`) is told by the same reflectors (`observe`):
the process holds one watch of each kind the operator reads.

A write's answer can come back after the watch delivered the object's deletion (the write was applied,
then the object deleted, before the answer arrived), and the operator's list at a new term can be older
than a deletion the watch already delivered. So the cache remembers, for `DELETED_SECONDS`, the uid and
resourceVersion of every object a delete event removed, and refuses to assume a version of one of
them: a deleted object never comes back into view.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from admission.core.labels import QUEUE_LABEL
from admission.kube import kinds
from admission.kube.client import Client
from admission.kube.clock import SYSTEM_CLOCK, Clock
from admission.kube.paths import Resource
from admission.kube.reflector import Key, Projection, Reflector, metadata, without_managed_fields
from admission.kube.watches import SHARED, ReflectorSet, Watch, owner_table, table

log = logging.getLogger(__name__)

ASSUME_SECONDS = 30.0
DELETED_SECONDS = ASSUME_SECONDS
"""How long a deletion is remembered: longer than any write's answer or list can take (the client's
request timeout is 30 s), so no answer sent before a delete event can arrive after its record expired."""


_POD_META = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp", "labels", "ownerReferences")
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"  # large, and never read
_POD_SPEC = ("nodeName", "nodeSelector", "tolerations", "affinity", "overhead", "resources",
             "topologySpreadConstraints")
_CONTAINER = ("name", "resources", "restartPolicy")


def _pod(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Pods with draq's queue label are kept whole (they are group members the operator writes to). Of
    every other pod the cache keeps what the scheduler's node filters read: where it is bound, its
    containers' resources and restart policies, overhead, pod-level resources, tolerations, affinity,
    node selector and phase, since the pods on a node take its room; and its owner and annotations
    (what tells a static or DaemonSet pod)."""
    meta = metadata(obj)
    if QUEUE_LABEL in (meta.get("labels") or {}):
        return without_managed_fields(kinds.PODS)(obj)
    spec, status = _section(obj, "spec"), _section(obj, "status")
    kept: dict[str, Any] = {key: _shared(spec[key]) for key in _POD_SPEC if key in spec}
    for key in ("containers", "initContainers"):
        if isinstance(spec.get(key), list):
            kept[key] = [{k: _shared(c[k]) for k in _CONTAINER if k in c} for c in spec[key] if isinstance(c, Mapping)]
    kept_meta = {key: _shared(meta[key]) if key in _SHARED_META else meta[key] for key in _POD_META if key in meta}
    if isinstance(meta.get("annotations"), Mapping):  # e.g. a static pod's mirror annotation
        kept_meta["annotations"] = {k: v for k, v in meta["annotations"].items() if k != _LAST_APPLIED}
    projected: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": kept_meta, "spec": kept}
    if "phase" in status:
        projected["status"] = {"phase": _shared(status["phase"])}
    return projected


_SHARED_META = frozenset({"namespace", "creationTimestamp", "labels", "ownerReferences"})


def _shared(value: Any) -> Any:
    """`value` with its strings interned: the pods of one workload repeat the same namespace, node names,
    labels, owner, resources and phase, which each decoded answer holds as strings of its own (about a third
    of a bound pod's cached size)."""
    if type(value) is str:
        return sys.intern(value)
    if isinstance(value, dict):
        return {sys.intern(k) if type(k) is str else k: _shared(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shared(v) for v in value]
    return value


def _section(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


OPERATOR_RESOURCES: tuple[Watch, ...] = table(
    (kinds.NODES, kinds.PODS, *SHARED, kinds.RESOURCE_SLICES, kinds.DEVICE_TAINT_RULES, kinds.RESOURCE_CLAIMS,
     kinds.CLAIM_TEMPLATES, kinds.POD_GROUPS, kinds.RESOURCE_QUOTAS),
    {"Pod": _pod})
"""Whole objects (less managedFields), but for pods (`_pod`)."""


def _owner_metadata(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What is read of an owner that makes one group per pod: its identity, labels and owners."""
    meta = metadata(obj)
    kept = {k: meta[k] for k in ("name", "namespace", "uid", "labels", "ownerReferences", "resourceVersion")
            if k in meta}
    return {**{k: obj[k] for k in ("apiVersion", "kind") if k in obj}, "metadata": kept}


def owner_watches(resources: Iterable[Resource]) -> tuple[Watch, ...]:
    """The enabled workload kinds: whole (their spec declares the members), or metadata for per-pod kinds."""
    return owner_table(resources, without_managed_fields, _owner_metadata)
QUIET_KINDS = frozenset({"ResourceQuota"})
"""Kinds no admission decision reads (native quotas feed only the accounting gaps' metrics): their changes
do not wake the loop; the next pass, at most a resync later, reads them."""


Observer = Callable[[str | None, Mapping[str, Any]], None]
"""Told of every object a reflector lists (event type None) and of every watch event (ADDED, MODIFIED,
DELETED), after the store has taken it."""


class _Reflector(Reflector):
    """A reflector that tells the cache which object a delete event removed (its uid and resourceVersion),
    before the store forgets it, and tells its observers of every object it lists or is told of."""

    def __init__(self, api: Client, resource: Resource, project: Projection, on_change: Callable[[], None],
                 on_deleted: Callable[[Key, Mapping[str, Any]], None], observers: list[Observer]) -> None:
        super().__init__(api, resource, project, on_change)
        self._on_deleted = on_deleted
        self._observers = observers

    def page_listed(self) -> None:
        # The cycle collector would walk the whole growing store again and again while a large list
        # arrives (listing 60,000 pods took 3x the CPU with it); the objects listed so far are moved out of
        # its view, as after every pass (`admission.operator.heap`, whose periodic full collection
        # unfreezes them again).
        gc.freeze()

    async def _list(self) -> str | None:
        version = await super()._list()
        if self._observers:
            for obj in list(self.store.values()):
                self._tell(None, obj)
        return version

    def apply_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        if kind == "DELETED":
            self._on_deleted(self.key(obj), obj)
        super().apply_event(kind, obj)
        if kind in ("ADDED", "MODIFIED", "DELETED") and self._observers:
            self._tell(kind, self.projected(obj))

    def _tell(self, kind: str | None, obj: Mapping[str, Any]) -> None:
        for observer in self._observers:
            try:
                observer(kind, obj)
            except Exception:  # an observer's failure must not stop the cache
                log.exception("observer of %s", self.resource.kind)


class OperatorCache(ReflectorSet[Reflector]):
    """Objects by kind, as the reflectors see them, overlaid with the operator's newer writes."""

    start_timeout = 60.0

    def __init__(self, api: Client, clock: Clock = SYSTEM_CLOCK, resources: tuple[Watch, ...] = OPERATOR_RESOURCES
                 ) -> None:
        self.changed = asyncio.Event()
        self._clock = clock
        self._observers: dict[str, list[Observer]] = {}
        self._assumed: dict[str, dict[Key, tuple[float, dict[str, Any]]]] = {}
        # Recent deletions: kind -> key -> [(when, uid, resourceVersion)], and their keys in the order
        # they expire (`DELETED_SECONDS` after they were seen).
        self._deleted: dict[str, dict[Key, list[tuple[float, str, int]]]] = {}
        self._expiring: deque[tuple[float, str, Key]] = deque()
        super().__init__(())
        self.add_watches(api, resources)

    def add_watches(self, api: Client, resources: Iterable[Watch]) -> None:
        """Watch more resources (before `start`): e.g. the workload kinds of the enabled integrations."""
        for res, project in resources:
            self._observers.setdefault(res.kind, [])
            reflector = _Reflector(api, res, project, _quiet if res.kind in QUIET_KINDS else self.changed.set,
                                   self._deleter(res.kind), self._observers[res.kind])
            reflector.track_changes = True  # the reader parses only what changed (`take_changes`)
            self.add((reflector,))
            self._assumed.setdefault(res.kind, {})
            self._deleted.setdefault(res.kind, {})

    def observe(self, kinds: Iterable[str], observer: Observer) -> None:
        """Tell `observer` of these kinds' objects as the reflectors list and watch them (before `start`)."""
        for kind in kinds:
            self._observers[kind].append(observer)

    def assume(self, kind: str, obj: Mapping[str, Any]) -> bool:
        """Take an object the operator just wrote (or listed) as current until the watch delivers it or a
        newer one. False, and nothing assumed, when a delete event already removed that object."""
        reflector = self.reflectors[kind]
        projected = reflector.projected(obj)
        key = reflector.key(projected)
        if self._was_deleted(kind, key, projected):
            log.debug("not assuming %s %s/%s: its deletion was already seen", kind, *key)
            return False
        self._assumed[kind][key] = (self._clock.monotonic(), projected)
        return True

    def _deleter(self, kind: str) -> Callable[[Key, Mapping[str, Any]], None]:
        """A deleted object is gone at once: a write of ours still assumed must not bring it back, nor one
        assumed later (`DELETED_SECONDS`)."""
        def deleted(key: Key, obj: Mapping[str, Any]) -> None:
            self._assumed.setdefault(kind, {}).pop(key, None)
            now = self._clock.monotonic()
            self._expire(now)
            meta = metadata(obj)
            self._deleted.setdefault(kind, {}).setdefault(key, []).append((now, str(meta.get("uid") or ""),
                                                                           _version(obj)))
            self._expiring.append((now, kind, key))
        return deleted

    def _was_deleted(self, kind: str, key: Key, obj: Mapping[str, Any]) -> bool:
        """Whether a recent delete event removed this object: the same uid; where either side has no uid,
        a resourceVersion not newer than the deletion's (a recreated object's is newer)."""
        self._expire(self._clock.monotonic())
        records = self._deleted.get(kind, {}).get(key)
        if not records:
            return False
        uid, version = str(metadata(obj).get("uid") or ""), _version(obj)
        for _, deleted_uid, deleted_version in records:
            if uid and deleted_uid:
                if uid == deleted_uid:
                    return True
            elif version <= deleted_version:
                return True
        return False

    def _expire(self, now: float) -> None:
        """Forget the deletions older than `DELETED_SECONDS`."""
        expiring = self._expiring
        while expiring and now - expiring[0][0] > DELETED_SECONDS:
            _, kind, key = expiring.popleft()
            records = self._deleted[kind].get(key)
            if records is None:
                continue
            fresh = [record for record in records if now - record[0] <= DELETED_SECONDS]
            if fresh:
                self._deleted[kind][key] = fresh
            else:
                del self._deleted[kind][key]

    def current(self, kind: str, key: Key) -> Mapping[str, Any] | None:
        """One object as the operator knows it now: its assumed write while newer than the stored one."""
        stored = self.reflectors[kind].store.get(key)
        assumed = self._assumed[kind].get(key)
        if assumed is not None and (stored is None or _version(assumed[1]) > _version(stored)):
            return assumed[1]
        return stored

    def objects(self, kind: str) -> list[dict[str, Any]]:
        store = dict(self.reflectors[kind].store)
        store.update(self.assumed(kind))
        return list(store.values())

    def assumed(self, kind: str) -> dict[Key, dict[str, Any]]:
        """The operator's writes of this kind that are still newer than what the watch delivered; they
        stand in for the stored object of their key (`objects`)."""
        store = self.reflectors[kind].store
        assumed = self._assumed[kind]
        if not assumed:
            return {}
        now = self._clock.monotonic()
        current = {}
        for key, (when, obj) in list(assumed.items()):
            seen = store.get(key)
            if (seen is not None and _version(seen) >= _version(obj)) or now - when > ASSUME_SECONDS:
                del assumed[key]  # the watch caught up (or the object went away meanwhile)
            else:
                current[key] = obj
        return current


def _quiet() -> None:
    pass


def _version(obj: Mapping[str, Any]) -> int:
    text = str(metadata(obj).get("resourceVersion") or "0")
    return int(text) if text.isdigit() else 0
