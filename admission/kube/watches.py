"""What draq keeps in memory by list+watch, written once for the operator's cache and the webhook's.

A watch table is one (resource, projection) per resource: the projection is how much of each object the
cache keeps. `SHARED` names the resources both caches read (the operator's cycles and the webhook's
decisions); `table` builds a table from resources and the projections that differ from its default; a
`ReflectorSet` holds one reflector per resource of a table, starts them (waiting until each has listed
once) and stops them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Generic, TypeVar

from admission.core.workloads import KINDS, Grouping
from admission.kube import kinds
from admission.kube.paths import Resource
from admission.kube.reflector import Projection, Reflector, start_all, stop_all, without_managed_fields

Watch = tuple[Resource, Projection]
R = TypeVar("R", bound=Reflector)

SHARED: tuple[Resource, ...] = (
    kinds.NAMESPACES, kinds.DEVICE_CLASSES, kinds.CLUSTER_QUEUES, kinds.LOCAL_QUEUES, kinds.QUOTA_UNITS,
    kinds.TOPOLOGIES,
)
"""Read by both the operator and the webhooks: namespaces (the webhooks: their labels), DeviceClasses, and
draq's queues, quota units and Topologies. Each cache lists and watches them, keeping what it reads."""


def table(resources: Iterable[Resource], projections: Mapping[str, Projection] | None = None,
          default: Callable[[Resource], Projection] = without_managed_fields) -> tuple[Watch, ...]:
    """One watch per resource, in order: its projection by kind from `projections`, else `default(resource)`
    (the whole object less managedFields)."""
    chosen = projections or {}
    return tuple((resource, chosen.get(resource.kind) or default(resource)) for resource in resources)


def owner_table(resources: Iterable[Resource], gang: Callable[[Resource], Projection],
                per_pod: Projection) -> tuple[Watch, ...]:
    """Watches of workload kinds a pod's owner chain may name: the kinds that make one group per pod
    (ReplicaSet, Deployment, StatefulSet) with `per_pod` (their labels and owners are all that is read), the
    others with `gang(resource)` (their spec declares the group's members)."""
    per_pod_kinds = {k.kind for k in KINDS if k.grouping is Grouping.PER_POD}
    return tuple((r, per_pod if r.kind in per_pod_kinds else gang(r)) for r in resources)


class ReflectorSet(Generic[R]):
    """One reflector per resource, by kind; started together, stopped together."""

    start_timeout = 30.0

    def __init__(self, reflectors: Iterable[R]) -> None:
        self.reflectors: dict[str, R] = {r.resource.kind: r for r in reflectors}
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def synced(self) -> bool:
        return all(r.synced.is_set() for r in self.reflectors.values())

    def add(self, reflectors: Iterable[R]) -> None:
        """More reflectors, before `start` (e.g. for the resources discovery found served)."""
        assert not self._tasks, "reflectors are added before start"
        self.reflectors.update((r.resource.kind, r) for r in reflectors)

    async def start(self, timeout: float | None = None) -> None:
        """Start every reflector and wait until each has listed once."""
        self._tasks = await start_all(list(self.reflectors.values()), timeout or self.start_timeout)

    async def stop(self) -> None:
        await stop_all(self._tasks)
