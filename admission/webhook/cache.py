"""The webhook's list+watch cache: the few objects its decisions look up, kept in memory.

`WebhookCache` serves `admission.core.review.Lookups` from one reflector per resource. An object a
decision missed (a watch may be a few milliseconds behind) can be fetched for that one decision
(`fetch`): what is fetched on behalf of a review never enters the shared stores, which only the
watches write, and names from the review are checked before any request is made. draq's leader Lease
is never cached: the fence on PodGroup status needs it as it is now, so it is read for every decision
that asks for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

from admission.core.review import JsonObject, ObjectRef
from admission.kube import kinds
from admission.kube.client import Client, KubeApiError
from admission.kube.clock import SYSTEM_CLOCK, Clock
from admission.kube.paths import InvalidName, Resource
from admission.kube.reflector import Key, Reflector, metadata
from admission.kube.watches import SHARED, ReflectorSet, Watch, owner_table, table
from admission.webhook.pending import PendingTally, pending_counts
from admission.webhook.started import StartedGroups

log = logging.getLogger(__name__)


def _kept_metadata(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = metadata(obj)
    return {k: meta[k] for k in ("name", "namespace", "uid", "labels", "ownerReferences", "resourceVersion")
            if k in meta}


def _with_spec(obj: Mapping[str, Any]) -> dict[str, Any]:
    kept = {k: obj[k] for k in ("apiVersion", "kind") if k in obj}
    return {**kept, "metadata": _kept_metadata(obj), "spec": obj.get("spec") or {}}


def _metadata_only(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {"metadata": _kept_metadata(obj)}


def _job_size(obj: Mapping[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    size = {k: spec[k] for k in ("parallelism", "completions") if k in spec}
    return {"metadata": _kept_metadata(obj), "spec": size}


def _pending_count(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A LocalQueue's spec and the pending groups its status counts (the cap on pending groups reads both)."""
    status = obj.get("status")
    pending = status.get("pendingGroups") if isinstance(status, Mapping) else None
    return {**_with_spec(obj), "status": {"pendingGroups": pending} if isinstance(pending, int) else {}}


def _pod_group_phase(obj: Mapping[str, Any]) -> dict[str, Any]:
    spec, status = obj.get("spec"), obj.get("status")
    queue = spec.get("queue") if isinstance(spec, Mapping) else None
    phase = status.get("phase") if isinstance(status, Mapping) else None
    return {"metadata": _kept_metadata(obj), "spec": {"queue": queue}, "status": {"phase": phase or "Pending"}}


WEBHOOK_RESOURCES: tuple[Watch, ...] = table(
    (*SHARED, kinds.POD_GROUPS),
    {"Namespace": _metadata_only, "LocalQueue": _pending_count, "PodGroup": _pod_group_phase},
    default=lambda resource: _with_spec)
"""What the operator reads too (`SHARED`, Topologies included: a pod's topology level is checked), kept as
metadata and spec (namespaces: metadata), and PodGroups' queues and phases (for the cap on pending groups).
The enabled workload kinds are watched too (`owner_watches`)."""

OWNER_RESOURCES = {resource.kind: resource for resource in (kinds.DAEMON_SETS, kinds.STATEFUL_SETS,
                                                             kinds.REPLICA_SETS, kinds.JOBS)}
"""The controller kinds a pod's owner exemption may name: read live (Jobs: from the cache) to verify the uid."""


def owner_watches(resources: Iterable[Resource]) -> tuple[Watch, ...]:
    """Watches of the enabled workload kinds: Jobs' sizes, the other gang kinds' specs (their declared
    sizes), and of the kinds that group per pod only labels and owners."""
    return owner_table(resources, lambda r: _job_size if r.kind == "Job" else _with_spec, _metadata_only)


def _started_pod_group(namespace: str, name: str, queue: str) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name}, "spec": {"queue": queue},
            "status": {"phase": "Pending"}}


class _Stores:
    """`Lookups` over stores of projected objects, by kind."""

    def _get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        raise NotImplementedError

    def _all(self, kind: str) -> Iterable[dict[str, Any]]:
        raise NotImplementedError

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        obj = self._get("Namespace", "", namespace)
        return None if obj is None else obj["metadata"].get("labels") or {}

    def local_queue(self, namespace: str, name: str) -> JsonObject | None:
        return self._get("LocalQueue", namespace, name)

    def cluster_queue(self, name: str) -> JsonObject | None:
        return self._get("ClusterQueue", "", name)

    def quota_unit(self, name: str) -> JsonObject | None:
        return self._get("QuotaUnit", "", name)

    def topology(self, name: str) -> JsonObject | None:
        return self._get("Topology", "", name)

    def owner(self, kind: str, namespace: str, name: str) -> JsonObject | None:
        return self._get(kind, namespace, name)

    def quota_units(self) -> Iterable[JsonObject]:
        return list(self._all("QuotaUnit"))

    def device_class(self, name: str) -> JsonObject | None:
        return self._get("DeviceClass", "", name)

    def lease(self, namespace: str, name: str) -> JsonObject | None:
        return self._get("Lease", namespace, name)

    def pod_group(self, namespace: str, name: str) -> JsonObject | None:
        """The cached PodGroup, or a pending stand-in for a group the webhook let start whose PodGroup is not
        cached yet (`started`): its later members are members of an existing group."""
        found = self._get("PodGroup", namespace, name)
        if found is not None:
            return found
        queue = self._started().queue_of(namespace, name)
        return None if queue is None else _started_pod_group(namespace, name, queue)

    def claim_template(self, namespace: str, name: str) -> JsonObject | None:
        return self._get("ResourceClaimTemplate", namespace, name)

    def pending_groups(self, namespace: str, local_queue: str) -> int:
        """The larger of the LocalQueue's status.pendingGroups (the operator's last count) and its PodGroups
        pending now, the groups the webhook let start and whose PodGroup is not cached yet included: each may
        be behind the other by a cycle."""
        queue = self._get("LocalQueue", namespace, local_queue)
        counted = (queue or {}).get("status", {}).get("pendingGroups") or 0
        unseen = self._started().unseen(namespace, local_queue,
                                        lambda group: self._get("PodGroup", namespace, group) is not None)
        return max(counted, self._live_pending(namespace, local_queue) + unseen)

    def _live_pending(self, namespace: str, local_queue: str) -> int:
        return pending_counts(self._all("PodGroup")).get((namespace, local_queue), 0)

    def _started(self) -> StartedGroups:
        raise NotImplementedError


class FetchedView(_Stores):
    """The shared cache plus objects fetched for one decision; only that decision sees them."""

    def __init__(self, cache: WebhookCache, fetched: Mapping[str, Mapping[Key, dict[str, Any]]]) -> None:
        self._cache = cache
        self._fetched = fetched

    def _get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        found = self._fetched.get(kind, {}).get((namespace, name))
        return found if found is not None else self._cache._get(kind, namespace, name)

    def _all(self, kind: str) -> Iterable[dict[str, Any]]:
        merged = {**{r: o for r, o in self._cache.stores(kind).items()}, **self._fetched.get(kind, {})}
        return merged.values()

    def _live_pending(self, namespace: str, local_queue: str) -> int:
        if "PodGroup" in self._fetched:
            return super()._live_pending(namespace, local_queue)
        return self._cache._live_pending(namespace, local_queue)

    def _started(self) -> StartedGroups:
        return self._cache.started


class WebhookCache(_Stores, ReflectorSet[Reflector]):
    """`Lookups` for the decisions, from the reflectors' stores."""

    def __init__(self, api: Client, resources: tuple[Watch, ...] = WEBHOOK_RESOURCES,
                 miss_memory: float = 1.0, clock: Clock = SYSTEM_CLOCK, owner_timeout: float = 2.0) -> None:
        self._api = api
        self._owner_timeout = owner_timeout
        ReflectorSet.__init__(self, (Reflector(api, res, project) for res, project in resources))
        self._recent_misses: dict[ObjectRef, float] = {}
        self._miss_memory = miss_memory
        self._clock = clock
        self.started = StartedGroups(clock)
        pod_groups = self.reflectors.get("PodGroup")
        self._pending = PendingTally(pod_groups) if pod_groups is not None else None

    def stores(self, kind: str) -> Mapping[Key, dict[str, Any]]:
        reflector = self.reflectors.get(kind)
        return reflector.store if reflector else {}

    def _get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.stores(kind).get((namespace, name))

    def _all(self, kind: str) -> Iterable[dict[str, Any]]:
        return self.stores(kind).values()

    def _live_pending(self, namespace: str, local_queue: str) -> int:
        """Kept from the PodGroups' store changes, not counted per review: a flood of pods asks for every one
        of them, and a flood's status writes change the store between them."""
        if self._pending is None:
            return 0
        return self._pending.current().get((namespace, local_queue), 0)

    def _started(self) -> StartedGroups:
        return self.started

    def note_started(self, namespace: str, queue: str, group: str) -> None:
        """An allowed pod started a group (`core.review.started_group`)."""
        self.started.note(namespace, queue, group)

    async def fetch(self, refs: tuple[ObjectRef, ...]) -> FetchedView | None:
        """Fetch objects a decision missed, for that decision only; None when none of them exists."""
        fetched: dict[str, dict[Key, dict[str, Any]]] = {}
        now = self._clock.monotonic()
        for ref in refs:
            if ref.kind == "Lease":  # never cached, never remembered as missing: read as it is now
                lease = await self._fetch_lease(ref)
                if lease is not None:
                    fetched.setdefault(ref.kind, {})[(ref.namespace, ref.name)] = lease
                continue
            if ref.kind == "ResourceClaimTemplate":  # not cached: read for a workload's decision only
                template = await self._read(ref, partial(kinds.CLAIM_TEMPLATES.object_path, ref.namespace, ref.name),
                                            now, "reading")
                if template is not None:
                    fetched.setdefault(ref.kind, {})[(ref.namespace, ref.name)] = template
                continue
            if ref.kind in OWNER_RESOURCES and ref.kind not in self.reflectors:
                owner = await self._fetch_owner(ref, now)
                if owner is not None:
                    fetched.setdefault(ref.kind, {})[(ref.namespace, ref.name)] = owner
                continue
            reflector = self.reflectors.get(ref.kind)
            if reflector is None or now - self._recent_misses.get(ref, -1e9) < self._miss_memory:
                continue
            obj = await self._fetch_one(reflector, ref, now)
            if obj is not None:
                fetched.setdefault(ref.kind, {})[(ref.namespace, ref.name)] = obj
        if len(self._recent_misses) > 10_000:
            self._recent_misses = {r: t for r, t in self._recent_misses.items() if now - t < self._miss_memory}
        return FetchedView(self, fetched) if fetched else None

    async def _fetch_lease(self, ref: ObjectRef) -> dict[str, Any] | None:
        try:
            lease = await self._api.get(kinds.LEASES.object_path(ref.namespace, ref.name))
        except InvalidName as err:
            log.info("not fetching %s: %s", ref, err)
            return None
        except (KubeApiError, TimeoutError, OSError) as err:
            log.warning("reading %s: %s", ref, err)
            return None
        return {k: lease[k] for k in ("metadata", "spec") if k in lease}

    async def _fetch_owner(self, ref: ObjectRef, now: float) -> dict[str, Any] | None:
        """A pod's controller owner, read live with a short timeout; None (no exemption) on any failure."""
        if now - self._recent_misses.get(ref, -1e9) < self._miss_memory:
            return None
        obj = await self._read(ref, lambda: OWNER_RESOURCES[ref.kind].object_path(ref.namespace, ref.name), now,
                               "reading owner", "; the pod gets no exemption", self._owner_timeout)
        if obj is None:
            return None
        projected = {"metadata": _kept_metadata(obj)}
        if (projected["metadata"].get("namespace"), projected["metadata"].get("name")) != (ref.namespace, ref.name):
            log.warning("reading owner %s answered a different object; ignored", ref)
            return None
        return projected

    async def _fetch_one(self, reflector: Reflector, ref: ObjectRef, now: float) -> dict[str, Any] | None:
        resource = reflector.resource
        namespace = ref.namespace if resource.namespaced else None
        obj = await self._read(ref, lambda: resource.object_path(namespace, ref.name), now, "fetching")
        if obj is None:
            return None
        projected = reflector.projected(obj)
        if reflector.key(projected) != (namespace or "", ref.name):
            log.warning("fetching %s answered a different object; ignored", ref)
            return None
        return projected

    async def _read(self, ref: ObjectRef, path: Callable[[], str], now: float, doing: str, outcome: str = "",
                    timeout: float | None = None) -> dict[str, Any] | None:
        """GET one object; None when it cannot be read. A name the API would refuse, or a 404, is remembered
        as missing for a moment; other failures are logged (`doing` and `outcome` make the line)."""
        try:
            return await asyncio.wait_for(self._api.get(path()), timeout)
        except InvalidName as err:
            log.info("not %s %s: %s", doing, ref, err)
            self._recent_misses[ref] = now
        except KubeApiError as err:
            if err.status == 404:
                self._recent_misses[ref] = now
            else:
                log.warning("%s %s: %s%s", doing, ref, err, outcome)
        except (TimeoutError, OSError) as err:
            log.warning("%s %s: %s%s", doing, ref, err or "timed out", outcome)
        return None
