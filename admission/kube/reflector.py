"""List+watch: one reflector keeps one resource's objects in memory, in step with the API server.

A reflector lists, then watches from the list's resourceVersion, and lists again when the watch
ends or its resourceVersion is too old. A resource whose CRD is not installed yet is empty and
retried. Only the reflector writes its store, from what the API server listed or watched.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from admission.core.errors import DraqError
from admission.kube.client import Client, KubeApiError
from admission.kube.paths import Resource

log = logging.getLogger(__name__)

RETRY_FIRST = 0.25
RETRY_CAP = 1.0
"""After a failed list or watch, the next try comes after RETRY_FIRST seconds, doubling up to RETRY_CAP:
one list a second per resource while the API server is away, and the caches are current again within
about a second of its return (a longer backoff would delay the next admission by as much)."""

LIST_PAGE = 1000
"""Objects per list request: a page of pods is a few MB of JSON, and 100,000 pods are 100 requests."""

Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped resources
Projection = Callable[[Mapping[str, Any]], dict[str, Any]]


def metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def typed(resource: Resource, obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """Items of a list response carry no apiVersion/kind; parsers of cached objects need them."""
    if "kind" in obj and "apiVersion" in obj:
        return obj
    return {"apiVersion": resource.api_version, "kind": resource.kind, **obj}


def without_managed_fields(resource: Resource) -> Projection:
    """The whole object, typed, less `metadata.managedFields` (large, and never read)."""
    def project(obj: Mapping[str, Any]) -> dict[str, Any]:
        meta = {k: v for k, v in metadata(obj).items() if k != "managedFields"}
        return {**obj, "apiVersion": resource.api_version, "kind": resource.kind, "metadata": meta}
    return project


class Reflector:
    """Keeps one resource's store in step with the API server; `on_change` is called after every
    list and every watch event that is not a bookmark, `on_delete` with the key of a deleted object."""

    def __init__(self, api: Client, resource: Resource, project: Projection,
                 on_change: Callable[[], None] | None = None, retry_absent_after: float = 10.0,
                 on_delete: Callable[[Key], None] | None = None) -> None:
        self.resource = resource
        self.project = project
        self.store: dict[Key, dict[str, Any]] = {}
        self.synced = asyncio.Event()
        self._api = api
        self._on_change = on_change or (lambda: None)
        self._on_delete = on_delete or (lambda key: None)
        self._retry_absent_after = retry_absent_after
        # Every change of the store, for one reader that keeps what it derived from it (`track_changes`
        # on): `relisted` says the whole store was replaced since `take_changes`; `dirty` names the keys
        # changed since, in order, True for a key that went to the end of the store (added or deleted).
        self.generation = 0
        self.track_changes = False
        self.relisted = True
        self.dirty: dict[Key, bool] = {}
        self.pages = 0  # list pages received: a long first list is making progress (`start_all`)

    def key(self, obj: Mapping[str, Any]) -> Key:
        meta = metadata(obj)
        return (str(meta.get("namespace", "")) if self.resource.namespaced else "", str(meta.get("name")))

    def projected(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        return self.project(typed(self.resource, obj))

    async def run(self) -> None:
        """List, then watch; a watch the server ends (its timeout) is resumed from the last version seen, and
        only an expired version (410 Gone), a missing kind or an error lists again: a relist re-reads and
        re-parses every object of the kind, which on a large cluster costs the API server and the next pass."""
        backoff = RETRY_FIRST
        version: str | None = None
        while True:
            try:
                if version is None:
                    version = await self._list()
                    backoff = RETRY_FIRST
                    if version is None:
                        await asyncio.sleep(self._retry_absent_after)
                        continue
                version = await self._watch(version)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # the API may be briefly away: relist after a pause
                version = None
                log.warning("cache of %s: %s; listing again in %.1fs", self.resource.kind, err, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, RETRY_CAP)

    async def _list(self) -> str | None:
        try:
            store, version = await self._list_pages()
        except KubeApiError as err:
            if err.status != 404:
                raise
            if self.synced.is_set() and not self.store:
                return None  # still not served: nothing changed (a change would wake parked groups every retry)
            self.store = {}  # the CRD is not installed (yet)
            self._relist()
            self.synced.set()
            self._on_change()
            return None
        self.store = store
        self._relist()
        self.synced.set()
        self._on_change()
        return version

    async def _list_pages(self) -> tuple[dict[Key, dict[str, Any]], str]:
        """Every object, projected page by page (a page's raw objects are dropped before the next is read:
        one answer of 100,000 pods would hold them all at once, in the API server's memory and ours), and
        the list's resourceVersion. A continue token that expired mid-list (410) starts the list over."""
        store: dict[Key, dict[str, Any]] = {}
        params = {"limit": str(LIST_PAGE)}
        while True:
            try:
                listing = await self._api.get(self.resource.list_path(), params)
            except KubeApiError as err:
                if err.status != 410 or "continue" not in params:
                    raise
                log.info("cache of %s: the list's continue token expired; listing again", self.resource.kind)
                store, params = {}, {"limit": str(LIST_PAGE)}
                continue
            self.pages += 1
            for obj in listing.get("items") or []:
                if isinstance(obj, Mapping):
                    projected = self.projected(obj)
                    store[self.key(projected)] = projected
            token, version = metadata(listing).get("continue"), str(metadata(listing).get("resourceVersion", ""))
            del listing  # the page's raw objects go before the collector's view is frozen
            self.page_listed()
            if not token:
                return store, version
            params = {"limit": str(LIST_PAGE), "continue": str(token)}

    def page_listed(self) -> None:
        """Called after each page of a list has been projected into the store being built."""

    async def _watch(self, version: str) -> str | None:
        """Apply the watch's events; the version to watch from next when the server ends the watch, None to
        list again."""
        async for event in self._api.watch(self.resource.list_path(), version):
            kind, obj = event.get("type"), event.get("object")
            if not isinstance(obj, Mapping):
                continue
            if kind == "ERROR":
                return None  # usually 410 Gone: list again
            version = str(metadata(obj).get("resourceVersion") or version)  # bookmarks too
            self.apply_event(str(kind), obj)
        return version

    def apply_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        """One watch event on the store (ADDED, MODIFIED, DELETED; others, e.g. BOOKMARK, change nothing)."""
        key = self.key(obj)
        if kind in ("ADDED", "MODIFIED"):
            moved = key not in self.store
            self.store[key] = self.projected(obj)
        elif kind == "DELETED":
            moved = True
            self.store.pop(key, None)
            self._on_delete(key)
        else:
            return
        self.generation += 1
        if self.track_changes and not self.relisted:
            if moved:
                self.dirty.pop(key, None)
                self.dirty[key] = True
            else:
                self.dirty.setdefault(key, False)
        self._on_change()

    def _relist(self) -> None:
        self.generation += 1
        self.relisted = True
        self.dirty.clear()

    def take_changes(self) -> tuple[bool, dict[Key, bool]]:
        """What changed since the last call: (whole store replaced, `dirty`); for one reader only."""
        changes = (self.relisted, self.dirty)
        self.relisted, self.dirty = False, {}
        return changes


async def start_all(reflectors: list[Reflector], timeout: float) -> list[asyncio.Task[None]]:
    """Start reflectors and wait until each has listed once. A reflector that has not listed and received
    no list page for `timeout` seconds stops them all, named in the error; one still receiving pages
    (100,000 pods on a busy API server) is waited for."""
    tasks = [asyncio.create_task(r.run(), name=f"cache-{r.resource.kind}") for r in reflectors]
    try:
        while True:
            pages = [r.pages for r in reflectors]
            try:
                # asyncio.timeout, not wait_for: wait_for (3.11) can swallow a cancellation that arrives just
                # as the last list completes, and the caller would never stop.
                async with asyncio.timeout(timeout):
                    await asyncio.gather(*(r.synced.wait() for r in reflectors))
                return tasks
            except TimeoutError:
                stalled = [r.resource.kind for r, before in zip(reflectors, pages, strict=True)
                           if not r.synced.is_set() and r.pages == before]
                if stalled:
                    raise DraqError(f"could not list {', '.join(stalled)} from the API server within "
                                    f"{timeout:.0f}s; check the kubeconfig, the server's address and draq's "
                                    "RBAC rights") from None
    except BaseException:
        await stop_all(tasks)  # cancelled or failed while listing: no reflector is left running
        raise


async def stop_all(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
