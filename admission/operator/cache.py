"""The operator's in-memory cache: the webhook's reflectors over every kind a cycle reads, plus
change notification and the operator's own writes assumed until the watch catches up.

Reflectors are reused from `admission.webhook.cache`; `ObservedApi` wraps the API client so that
each list and each watch event marks the cache as changed, which wakes the admission loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from admission.core.gating import QUEUE_LABEL
from admission.webhook.cache import ClusterCache, Key, Kind
from admission.webhook.kube_api import Credentials, KubeApi

DRAQ = "/apis/draq.io/v1alpha1"
RESOURCE = "/apis/resource.k8s.io/v1"


class ObservedApi(KubeApi):
    """A KubeApi whose reads set `changed`: every list and every watch event."""

    def __init__(self, credentials: Credentials, timeout: float = 30.0) -> None:
        super().__init__(credentials, timeout)
        self.changed = asyncio.Event()

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        result = await super().get(path, params)
        self.changed.set()
        return result

    async def watch(self, path: str, resource_version: str, timeout_seconds: int = 300) -> AsyncIterator[
        dict[str, Any]
    ]:
        async for event in super().watch(path, resource_version, timeout_seconds):
            if event.get("type") != "BOOKMARK":
                self.changed.set()
            yield event


def _typed(api_version: str, kind: str) -> Any:
    def project(obj: Mapping[str, Any]) -> dict[str, Any]:
        metadata = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
        return {**obj, "apiVersion": api_version, "kind": kind, "metadata": metadata}
    return project


def _managed_pod(obj: Mapping[str, Any]) -> dict[str, Any]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if QUEUE_LABEL in labels:
        return dict(_typed("v1", "Pod")(obj))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": (obj.get("metadata") or {}).get("name")}}


NODES = Kind("Node", "/api/v1/nodes", False, _typed("v1", "Node"))
PODS = Kind("Pod", "/api/v1/pods", True, _managed_pod)
NAMESPACES = Kind("Namespace", "/api/v1/namespaces", False, _typed("v1", "Namespace"))
DEVICE_CLASSES = Kind("DeviceClass", f"{RESOURCE}/deviceclasses", False, _typed("resource.k8s.io/v1", "DeviceClass"))
SLICES = Kind("ResourceSlice", f"{RESOURCE}/resourceslices", False, _typed("resource.k8s.io/v1", "ResourceSlice"))
CLAIMS = Kind("ResourceClaim", f"{RESOURCE}/resourceclaims", True, _typed("resource.k8s.io/v1", "ResourceClaim"))
TEMPLATES = Kind("ResourceClaimTemplate", f"{RESOURCE}/resourceclaimtemplates", True,
                 _typed("resource.k8s.io/v1", "ResourceClaimTemplate"))
CLUSTER_QUEUES = Kind("ClusterQueue", f"{DRAQ}/clusterqueues", False, _typed("draq.io/v1alpha1", "ClusterQueue"))
LOCAL_QUEUES = Kind("LocalQueue", f"{DRAQ}/localqueues", True, _typed("draq.io/v1alpha1", "LocalQueue"))
QUOTA_UNITS = Kind("QuotaUnit", f"{DRAQ}/quotaunits", False, _typed("draq.io/v1alpha1", "QuotaUnit"))
POD_GROUPS = Kind("PodGroup", f"{DRAQ}/podgroups", True, _typed("draq.io/v1alpha1", "PodGroup"))
OPERATOR_KINDS = (NODES, PODS, NAMESPACES, DEVICE_CLASSES, SLICES, CLAIMS, TEMPLATES, CLUSTER_QUEUES,
                  LOCAL_QUEUES, QUOTA_UNITS, POD_GROUPS)
KINDS_BY_NAME = {k.name: k for k in OPERATOR_KINDS}
ASSUME_SECONDS = 30.0


class OperatorCache:
    """Objects by kind, as the reflectors see them, overlaid with the operator's newer writes."""

    def __init__(self, api: ObservedApi) -> None:
        self.api = api
        self._cache = ClusterCache(api, OPERATOR_KINDS)
        self._assumed: dict[str, dict[Key, tuple[float, dict[str, Any]]]] = {k.name: {} for k in OPERATOR_KINDS}

    @property
    def changed(self) -> asyncio.Event:
        return self.api.changed

    async def start(self, timeout: float = 60.0) -> None:
        await self._cache.start(timeout)

    async def stop(self) -> None:
        await self._cache.stop()

    def assume(self, kind: str, obj: Mapping[str, Any]) -> None:
        """Take an object the operator just wrote as current until the watch delivers it or a newer one."""
        reflector = self._cache.reflectors[kind]
        projected = reflector.kind.project(obj)
        self._assumed[kind][reflector.key(projected)] = (time.monotonic(), projected)

    def objects(self, kind: str) -> list[dict[str, Any]]:
        store = dict(self._cache.reflectors[kind].store)
        assumed = self._assumed[kind]
        now = time.monotonic()
        for key, (when, obj) in list(assumed.items()):
            seen = store.get(key)
            if (seen is not None and _version(seen) >= _version(obj)) or now - when > ASSUME_SECONDS:
                del assumed[key]  # the watch caught up (or the object went away meanwhile)
            else:
                store[key] = obj
        return list(store.values())


def _version(obj: Mapping[str, Any]) -> int:
    text = str((obj.get("metadata") or {}).get("resourceVersion") or "0")
    return int(text) if text.isdigit() else 0
