"""The webhook's list+watch cache: the few objects its decisions look up, kept in memory.

One reflector per kind lists, then watches from the list's resourceVersion, and lists again when
the watch ends or its resourceVersion is too old. Kinds whose CRD is not installed yet are empty
and retried. `ClusterCache` serves `admission.core.gating.Lookups` from these stores, and can
`refresh` single objects a decision missed (a watch may be a few milliseconds behind).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from admission.core.admission_review import JsonObject, ObjectRef
from admission.core.errors import DraqError
from admission.webhook.kube_api import KubeApi, KubeApiError

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped kinds
Projection = Callable[[Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Kind:
    """A kind the cache holds: where to list it, and the part of each object worth keeping."""

    name: str
    list_path: str
    namespaced: bool
    project: Projection

    @property
    def api_version(self) -> str:
        parts = self.list_path.strip("/").split("/")
        return parts[1] if parts[0] == "api" else f"{parts[1]}/{parts[2]}"

    def typed(self, obj: Mapping[str, Any]) -> Mapping[str, Any]:
        """Items of a list response carry no apiVersion/kind; parsers of cached objects need them."""
        if "kind" in obj and "apiVersion" in obj:
            return obj
        return {"apiVersion": self.api_version, "kind": self.name, **obj}

    def object_path(self, namespace: str, name: str) -> str:
        prefix, _, plural = self.list_path.rpartition("/")
        if self.namespaced:
            return f"{prefix}/namespaces/{namespace}/{plural}/{name}"
        return f"{prefix}/{plural}/{name}"


def _metadata(obj: Mapping[str, Any]) -> dict[str, Any]:
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    return {k: metadata[k] for k in ("name", "namespace", "labels", "resourceVersion") if k in metadata}


def _with_spec(obj: Mapping[str, Any]) -> dict[str, Any]:
    kept = {k: obj[k] for k in ("apiVersion", "kind") if k in obj}
    return {**kept, "metadata": _metadata(obj), "spec": obj.get("spec") or {}}


def _metadata_only(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {"metadata": _metadata(obj)}


def _job_size(obj: Mapping[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    size = {k: spec[k] for k in ("parallelism", "completions") if k in spec}
    return {"metadata": _metadata(obj), "spec": size}


NAMESPACES = Kind("Namespace", "/api/v1/namespaces", False, _metadata_only)
LOCAL_QUEUES = Kind("LocalQueue", "/apis/draq.io/v1alpha1/localqueues", True, _with_spec)
CLUSTER_QUEUES = Kind("ClusterQueue", "/apis/draq.io/v1alpha1/clusterqueues", False, _with_spec)
QUOTA_UNITS = Kind("QuotaUnit", "/apis/draq.io/v1alpha1/quotaunits", False, _with_spec)
JOBS = Kind("Job", "/apis/batch/v1/jobs", True, _job_size)
DEVICE_CLASSES = Kind("DeviceClass", "/apis/resource.k8s.io/v1/deviceclasses", False, _with_spec)
ALL_KINDS = (NAMESPACES, LOCAL_QUEUES, CLUSTER_QUEUES, QUOTA_UNITS, JOBS, DEVICE_CLASSES)


class Reflector:
    """Keeps one kind's store in step with the API server."""

    def __init__(self, api: KubeApi, kind: Kind, retry_absent_after: float = 10.0) -> None:
        self.kind = kind
        self.store: dict[Key, dict[str, Any]] = {}
        self.synced = asyncio.Event()
        self._api = api
        self._retry_absent_after = retry_absent_after

    def key(self, obj: Mapping[str, Any]) -> Key:
        metadata = _metadata(obj)
        return (str(metadata.get("namespace", "")) if self.kind.namespaced else "", str(metadata.get("name")))

    def put(self, obj: Mapping[str, Any]) -> None:
        self.store[self.key(obj)] = self.kind.project(self.kind.typed(obj))

    async def run(self) -> None:
        backoff = 0.5
        while True:
            try:
                version = await self._list()
                backoff = 0.5
                if version is None:
                    await asyncio.sleep(self._retry_absent_after)
                    continue
                await self._watch(version)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # the API may be briefly away: relist after a pause
                log.warning("cache of %s: %s; listing again in %.1fs", self.kind.name, err, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 30.0)

    async def _list(self) -> str | None:
        try:
            listing = await self._api.get(self.kind.list_path)
        except KubeApiError as err:
            if err.status != 404:
                raise
            self.store = {}  # the CRD is not installed (yet)
            self.synced.set()
            return None
        items = listing.get("items") or []
        typed = (self.kind.typed(obj) for obj in items if isinstance(obj, Mapping))
        self.store = {self.key(obj): self.kind.project(obj) for obj in typed}
        self.synced.set()
        return str(listing.get("metadata", {}).get("resourceVersion", ""))

    async def _watch(self, version: str) -> None:
        async for event in self._api.watch(self.kind.list_path, version):
            kind, obj = event.get("type"), event.get("object")
            if not isinstance(obj, Mapping):
                continue
            if kind in ("ADDED", "MODIFIED"):
                self.put(obj)
            elif kind == "DELETED":
                self.store.pop(self.key(obj), None)
            elif kind == "ERROR":
                return  # usually 410 Gone: list again


class ClusterCache:
    """`Lookups` for the decisions, from the reflectors' stores."""

    def __init__(self, api: KubeApi, kinds: tuple[Kind, ...] = ALL_KINDS, miss_memory: float = 1.0) -> None:
        self._api = api
        self.reflectors = {kind.name: Reflector(api, kind) for kind in kinds}
        self._tasks: list[asyncio.Task[None]] = []
        self._recent_misses: dict[ObjectRef, float] = {}
        self._miss_memory = miss_memory

    async def start(self, timeout: float = 30.0) -> None:
        """Start every reflector and wait until each has listed once."""
        self._tasks = [
            asyncio.create_task(r.run(), name=f"cache-{name}") for name, r in self.reflectors.items()
        ]
        waits = [r.synced.wait() for r in self.reflectors.values()]
        try:
            await asyncio.wait_for(asyncio.gather(*waits), timeout)
        except TimeoutError:
            await self.stop()
            behind = [name for name, r in self.reflectors.items() if not r.synced.is_set()]
            raise DraqError(f"could not list {', '.join(behind)} from the API server within {timeout:.0f}s; "
                            "check the kubeconfig, the server's address and draq's RBAC rights") from None

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        reflector = self.reflectors.get(kind)
        return reflector.store.get((namespace, name)) if reflector else None

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        obj = self._get("Namespace", "", namespace)
        return None if obj is None else obj["metadata"].get("labels") or {}

    def local_queue(self, namespace: str, name: str) -> JsonObject | None:
        return self._get("LocalQueue", namespace, name)

    def cluster_queue(self, name: str) -> JsonObject | None:
        return self._get("ClusterQueue", "", name)

    def quota_unit(self, name: str) -> JsonObject | None:
        return self._get("QuotaUnit", "", name)

    def job(self, namespace: str, name: str) -> JsonObject | None:
        return self._get("Job", namespace, name)

    def quota_units(self) -> Iterable[JsonObject]:
        reflector = self.reflectors.get("QuotaUnit")
        return list(reflector.store.values()) if reflector else []

    def device_class(self, name: str) -> JsonObject | None:
        return self._get("DeviceClass", "", name)

    async def refresh(self, refs: tuple[ObjectRef, ...]) -> bool:
        """Fetch objects a decision missed; True if any of them turned out to exist."""
        found = False
        now = time.monotonic()
        for ref in refs:
            reflector = self.reflectors.get(ref.kind)
            if reflector is None or now - self._recent_misses.get(ref, -1e9) < self._miss_memory:
                continue
            try:
                obj = await self._api.get(reflector.kind.object_path(ref.namespace, ref.name))
            except KubeApiError as err:
                if err.status == 404:
                    self._recent_misses[ref] = now
                else:
                    log.warning("refresh of %s: %s", ref, err)
                continue
            except (TimeoutError, OSError) as err:
                log.warning("refresh of %s: %s", ref, err)
                continue
            reflector.put(obj)
            found = True
        if len(self._recent_misses) > 10_000:
            recent = {r: t for r, t in self._recent_misses.items() if now - t < self._miss_memory}
            self._recent_misses = recent
        return found
