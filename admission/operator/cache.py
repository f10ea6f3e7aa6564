"""The operator's in-memory cache: one reflector for every resource a cycle reads, change notification,
and the operator's own writes assumed until the watch catches up.

Every list and every watch event sets `changed`, which wakes the admission loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from admission.core.labels import QUEUE_LABEL
from admission.kube import kinds
from admission.kube.client import Client
from admission.kube.clock import SYSTEM_CLOCK, Clock
from admission.kube.paths import Resource
from admission.kube.reflector import Key, Projection, Reflector, metadata, start_all, stop_all, without_managed_fields

ASSUME_SECONDS = 30.0


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
    kept: dict[str, Any] = {key: spec[key] for key in _POD_SPEC if key in spec}
    for key in ("containers", "initContainers"):
        if isinstance(spec.get(key), list):
            kept[key] = [{k: c[k] for k in _CONTAINER if k in c} for c in spec[key] if isinstance(c, Mapping)]
    kept_meta = {key: meta[key] for key in _POD_META if key in meta}
    if isinstance(meta.get("annotations"), Mapping):  # e.g. a static pod's mirror annotation
        kept_meta["annotations"] = {k: v for k, v in meta["annotations"].items() if k != _LAST_APPLIED}
    projected: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": kept_meta, "spec": kept}
    if "phase" in status:
        projected["status"] = {"phase": status["phase"]}
    return projected


def _section(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def _whole(resource: Resource) -> tuple[Resource, Projection]:
    return resource, without_managed_fields(resource)


OPERATOR_RESOURCES: tuple[tuple[Resource, Projection], ...] = (
    _whole(kinds.NODES), (kinds.PODS, _pod), _whole(kinds.NAMESPACES), _whole(kinds.DEVICE_CLASSES),
    _whole(kinds.RESOURCE_SLICES), _whole(kinds.DEVICE_TAINT_RULES), _whole(kinds.RESOURCE_CLAIMS),
    _whole(kinds.CLAIM_TEMPLATES),
    _whole(kinds.CLUSTER_QUEUES), _whole(kinds.LOCAL_QUEUES), _whole(kinds.QUOTA_UNITS), _whole(kinds.POD_GROUPS),
)


class OperatorCache:
    """Objects by kind, as the reflectors see them, overlaid with the operator's newer writes."""

    def __init__(self, api: Client, clock: Clock = SYSTEM_CLOCK,
                 resources: tuple[tuple[Resource, Projection], ...] = OPERATOR_RESOURCES) -> None:
        self.changed = asyncio.Event()
        self._clock = clock
        self.reflectors = {res.kind: Reflector(api, res, project, self.changed.set, on_delete=self._forgetter(res.kind))
                           for res, project in resources}
        for reflector in self.reflectors.values():
            reflector.track_changes = True  # the reader parses only what changed (`take_changes`)
        self._assumed: dict[str, dict[Key, tuple[float, dict[str, Any]]]] = {k: {} for k in self.reflectors}
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def synced(self) -> bool:
        return all(r.synced.is_set() for r in self.reflectors.values())

    async def start(self, timeout: float = 60.0) -> None:
        self._tasks = await start_all(list(self.reflectors.values()), timeout)

    async def stop(self) -> None:
        await stop_all(self._tasks)

    def assume(self, kind: str, obj: Mapping[str, Any]) -> None:
        """Take an object the operator just wrote as current until the watch delivers it or a newer one."""
        reflector = self.reflectors[kind]
        projected = reflector.projected(obj)
        self._assumed[kind][reflector.key(projected)] = (self._clock.monotonic(), projected)

    def _forgetter(self, kind: str) -> Callable[[Key], None]:
        """A deleted object is gone at once: a write of ours still assumed must not bring it back."""
        def forget(key: Key) -> None:
            self._assumed.setdefault(kind, {}).pop(key, None)
        return forget

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


def _version(obj: Mapping[str, Any]) -> int:
    text = str(metadata(obj).get("resourceVersion") or "0")
    return int(text) if text.isdigit() else 0
