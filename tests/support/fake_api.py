"""A small in-memory fake of `admission.kube.client.Client`, for unit tests of the shell's own logic.

It keeps objects by resource, namespace and name, bumps one resourceVersion counter on every write,
answers 404 / 409 / 422 where the API server would (missing objects, existing names, stale
resourceVersion preconditions, failed JSON-patch `test` operations), and streams watch events to
open watches. Every write is recorded in `writes`, in order. The proof that draq works against
Kubernetes stays the e2e tests on the real control plane; this only makes the shell testable.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import itertools
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from admission.kube.client import KubeApiError

Key = tuple[str, str, str]  # (plural, namespace, name)


@dataclass(frozen=True)
class Target:
    plural: str
    namespace: str
    name: str
    subresource: str


@dataclass(frozen=True)
class Write:
    method: str
    path: str
    body: Any


def parse_path(path: str) -> Target:
    parts = path.strip("/").split("/")
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    return Target(rest[0], namespace, rest[1] if len(rest) > 1 else "", rest[2] if len(rest) > 2 else "")


def _equalities(selector: str) -> dict[str, str]:
    """A label selector of `key=value` terms (the only form the fake answers)."""
    return dict(term.split("=", 1) for term in selector.split(",") if term)


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge(result.get(key), value)
    return result


class FakeApi:
    def __init__(self) -> None:
        self.objects: dict[Key, dict[str, Any]] = {}
        self.writes: list[Write] = []
        self._versions = itertools.count(1)
        self._uids = itertools.count(1)
        self._version = 0
        self._watchers: dict[str, list[asyncio.Queue[dict[str, Any] | None]]] = {}
        self.fail: Callable[[str, str], KubeApiError | None] = lambda method, path: None
        self.last_body: Any = None
        self.server_now: dt.datetime | None = None  # what `server_time` answers: unknown unless a test sets it
        # Discovery: group/version -> the plurals it serves (none unless a test serves some).
        self.discovery: dict[str, list[str]] = {}
        self.git_version: str | None = None  # what /version answers: not found unless a test sets it

    # ----- seeding and inspection -------------------------------------------------------------------
    def add(self, *manifests: Mapping[str, Any]) -> None:
        """Put objects in place as if created earlier (not recorded as writes)."""
        for manifest in manifests:
            obj = copy.deepcopy(dict(manifest))
            meta = obj.setdefault("metadata", {})
            plural = _plural(str(obj["kind"]))
            self._give_uid(plural, meta)
            self._stamp(obj)
            self.objects[(plural, str(meta.get("namespace", "")), str(meta["name"]))] = obj
            self._notify(plural, "ADDED", obj)

    def get_object(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((_plural(kind), namespace, name))

    def writes_to(self, fragment: str) -> list[Write]:
        return [w for w in self.writes if fragment in w.path]

    # ----- the Client interface ---------------------------------------------------------------------
    async def get(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        self._maybe_fail("GET", path)
        if path == "/version":
            if self.git_version is None:
                raise KubeApiError("GET", path, 404, "the server could not find the requested resource")
            return {"gitVersion": self.git_version}
        parts = path.strip("/").split("/")
        if len(parts) == (2 if parts[0] == "api" else 3):  # discovery of one group/version
            served = self.discovery.get("/".join(parts[1:]))
            if served is None:
                raise KubeApiError("GET", path, 404, "the server could not find the requested resource")
            return {"resources": [{"name": plural} for plural in served]}
        target = parse_path(path)
        if not target.name:
            wanted = _equalities((params or {}).get("labelSelector", ""))
            items = [copy.deepcopy(o) for (plural, ns, _), o in sorted(self.objects.items())
                     if plural == target.plural and (not target.namespace or ns == target.namespace)
                     and wanted.items() <= ((o.get("metadata") or {}).get("labels") or {}).items()]
            return {"metadata": {"resourceVersion": str(self._version)}, "items": items}
        return copy.deepcopy(self._existing("GET", path, target))

    async def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        self._record("POST", path, body)
        target = parse_path(path)
        obj = copy.deepcopy(dict(body))
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{self._version + 1:05d}"
        if target.namespace:
            meta["namespace"] = target.namespace
        key = (target.plural, target.namespace, str(meta["name"]))
        if key in self.objects:
            raise KubeApiError("POST", path, 409, f"{target.plural} {meta['name']!r} already exists")
        self._give_uid(target.plural, meta)
        self._stamp(obj)
        self.objects[key] = obj
        self._notify(target.plural, "ADDED", obj)
        return copy.deepcopy(obj)

    async def merge_patch(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        self._record("PATCH", path, body)
        target = parse_path(path)
        current = self._existing("PATCH", path, target)
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise KubeApiError("PATCH", path, 409, "the object has been modified")
        return self._store(target, merge(current, body))

    async def json_patch(self, path: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
        self._record("PATCH", path, operations)
        target = parse_path(path)
        obj = copy.deepcopy(self._existing("PATCH", path, target))
        for op in operations:
            _apply(obj, op, path)
        return self._store(target, obj)

    async def replace(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        self._record("PUT", path, body)
        target = parse_path(path)
        current = self._existing("PUT", path, target)
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise KubeApiError("PUT", path, 409, "the object has been modified")
        return self._store(target, copy.deepcopy(dict(body)))

    async def delete(self, path: str, resource_version: str | None = None) -> dict[str, Any]:
        self._record("DELETE", path, {"resourceVersion": resource_version} if resource_version else None)
        target = parse_path(path)
        obj = self._existing("DELETE", path, target)
        if resource_version and resource_version != obj["metadata"]["resourceVersion"]:
            raise KubeApiError("DELETE", path, 409, "precondition failed: the object has been modified")
        del self.objects[(target.plural, target.namespace, target.name)]
        self._notify(target.plural, "DELETED", obj)
        return obj

    async def watch(self, path: str, resource_version: str, timeout_seconds: int = 300) -> AsyncIterator[
        dict[str, Any]
    ]:
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        plural = parse_path(path).plural
        self._watchers.setdefault(plural, []).append(queue)
        try:
            while (event := await queue.get()) is not None:
                yield event
        finally:
            self._watchers[plural].remove(queue)

    def server_time(self) -> dt.datetime | None:
        return self.server_now

    async def close(self) -> None:
        for queues in self._watchers.values():
            for queue in queues:
                queue.put_nowait(None)

    # ----- internals --------------------------------------------------------------------------------
    def _maybe_fail(self, method: str, path: str) -> None:
        error = self.fail(method, path)
        if error is not None:
            raise error

    def _record(self, method: str, path: str, body: Any) -> None:
        self.last_body = body  # what the request being decided carries, for `fail` to look at
        self._maybe_fail(method, path)
        self.writes.append(Write(method, path, copy.deepcopy(body)))

    def _existing(self, method: str, path: str, target: Target) -> dict[str, Any]:
        obj = self.objects.get((target.plural, target.namespace, target.name))
        if obj is None:
            raise KubeApiError(method, path, 404, f"{target.plural} {target.name!r} not found")
        return obj

    def _give_uid(self, plural: str, meta: dict[str, Any]) -> None:
        """A PodGroup gets a uid at creation, as from the API server: its record's seal is bound to it."""
        if plural == "podgroups":
            meta.setdefault("uid", f"uid-{next(self._uids)}")

    def _stamp(self, obj: dict[str, Any]) -> None:
        self._version = next(self._versions)
        obj.setdefault("metadata", {})["resourceVersion"] = str(self._version)

    def _store(self, target: Target, obj: dict[str, Any]) -> dict[str, Any]:
        self._stamp(obj)
        self.objects[(target.plural, target.namespace, target.name)] = obj
        self._notify(target.plural, "MODIFIED", obj)
        return copy.deepcopy(obj)

    def _notify(self, plural: str, kind: str, obj: Mapping[str, Any]) -> None:
        for queue in self._watchers.get(plural, []):
            queue.put_nowait({"type": kind, "object": copy.deepcopy(dict(obj))})


def _plural(kind: str) -> str:
    from admission.kube.kinds import BY_KIND, WORKLOAD_KINDS

    return (BY_KIND.get(kind) or WORKLOAD_KINDS[kind]).plural


def _child(node: Any, part: str) -> Any:
    if isinstance(node, list):
        return node[int(part)] if int(part) < len(node) else None
    return node.get(part) if isinstance(node, dict) else None


def _apply(obj: dict[str, Any], op: Mapping[str, Any], path: str) -> None:
    *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in str(op["path"]).split("/")[1:]]
    node: Any = obj
    for part in parents:
        node = _child(node, part)
        if node is None:
            raise KubeApiError("PATCH", path, 422, f"path {op['path']} does not exist")
    if op["op"] == "test":
        actual = node[int(last)] if isinstance(node, list) and int(last) < len(node) else (
            node.get(last) if isinstance(node, dict) else None)
        if actual != op["value"]:
            raise KubeApiError("PATCH", path, 422, f"test of {op['path']} failed")
    elif op["op"] == "remove":
        if isinstance(node, list):
            if int(last) >= len(node):
                raise KubeApiError("PATCH", path, 422, f"path {op['path']} does not exist")
            node.pop(int(last))
        else:
            node.pop(last)
    elif op["op"] in ("add", "replace"):
        if isinstance(node, list):
            node.append(op["value"]) if last == "-" else node.insert(int(last), op["value"])
        else:
            node[last] = op["value"]
