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


def _managed_pod(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Pods without draq's queue label are kept as names only: a cycle never reads them."""
    if QUEUE_LABEL in (metadata(obj).get("labels") or {}):
        return without_managed_fields(kinds.PODS)(obj)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": metadata(obj).get("name")}}


def _whole(resource: Resource) -> tuple[Resource, Projection]:
    return resource, without_managed_fields(resource)


OPERATOR_RESOURCES: tuple[tuple[Resource, Projection], ...] = (
    _whole(kinds.NODES), (kinds.PODS, _managed_pod), _whole(kinds.NAMESPACES), _whole(kinds.DEVICE_CLASSES),
    _whole(kinds.RESOURCE_SLICES), _whole(kinds.RESOURCE_CLAIMS), _whole(kinds.CLAIM_TEMPLATES),
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
        assumed = self._assumed[kind]
        now = self._clock.monotonic()
        for key, (when, obj) in list(assumed.items()):
            seen = store.get(key)
            if (seen is not None and _version(seen) >= _version(obj)) or now - when > ASSUME_SECONDS:
                del assumed[key]  # the watch caught up (or the object went away meanwhile)
            else:
                store[key] = obj
        return list(store.values())


def _version(obj: Mapping[str, Any]) -> int:
    text = str(metadata(obj).get("resourceVersion") or "0")
    return int(text) if text.isdigit() else 0
