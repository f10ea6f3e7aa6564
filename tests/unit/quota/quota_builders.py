"""Builders for quota test objects: short, readable manifests and models."""

from __future__ import annotations

from typing import Any

from admission.core.quantity import parse_quantity
from admission.core.quota.queues import ClusterQueue, UnitQuota


def quota(unit: str, nominal: str | int, borrowing: str | int | None = None,
          lending: str | int | None = None) -> UnitQuota:
    return UnitQuota(unit, parse_quantity(nominal),
                     None if borrowing is None else parse_quantity(borrowing),
                     None if lending is None else parse_quantity(lending))


def cq(name: str, *quotas: UnitQuota, cohort: str | None = None) -> ClusterQueue:
    return ClusterQueue(name, tuple(quotas), cohort)


def manifest(kind: str, name: str, spec: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "draq.io/v1alpha1", "kind": kind, "metadata": meta, "spec": spec}


# ----- DRA objects ---------------------------------------------------------------------------------
def device_class(name: str, driver: str = "gpu.example.com", extended: str | None = None,
                 created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}
    if extended:
        spec["extendedResourceName"] = extended
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": name, "creationTimestamp": created}, "spec": spec}


def gpu(name: str, model: str = "H100", memory: str = "80Gi", **extra: Any) -> dict[str, Any]:
    device: dict[str, Any] = {"name": name, "attributes": {"model": {"string": model}},
                              "capacity": {"memory": {"value": memory}}}
    device.update(extra)
    return device


def resource_slice(node: str, *devices: dict[str, Any], driver: str = "gpu.example.com",
                   pool: str | None = None) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{driver}"},
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": pool or node, "generation": 1, "resourceSliceCount": 1},
                     "devices": list(devices)}}


def exactly(name: str, device_class_name: str = "gpu", count: int | None = None,
            selector: str | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": device_class_name, **extra}
    if count is not None:
        body["count"] = count
    if selector:
        body["selectors"] = [{"cel": {"expression": selector}}]
    return {"name": name, "exactly": body}


def first_available(name: str, *subs: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "firstAvailable": [{"name": s["name"], **s["exactly"]} for s in subs]}


def claim(name: str, *requests: dict[str, Any], namespace: str = "ns",
          allocation: list[dict[str, Any]] | None = None, reserved_for: tuple[str, ...] = (),
          annotations: dict[str, str] | None = None) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations or {}},
        "spec": {"devices": {"requests": list(requests)}}}
    status: dict[str, Any] = {}
    if allocation is not None:
        status["allocation"] = {"devices": {"results": allocation}}
    if reserved_for:
        status["reservedFor"] = [{"resource": "pods", "name": p, "uid": p} for p in reserved_for]
    if status:
        manifest["status"] = status
    return manifest


def result(request: str, device: str, pool: str = "node-a", **extra: Any) -> dict[str, Any]:
    return {"request": request, "driver": "gpu.example.com", "pool": pool, "device": device, **extra}


def template(name: str, *requests: dict[str, Any], namespace: str = "ns") -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": list(requests)}}}}


def pod(name: str, claims: dict[str, str] | None = None, templates: dict[str, str] | None = None,
        requests: dict[str, str] | None = None, node: str = "", namespace: str = "ns",
        init_requests: dict[str, str] | None = None) -> dict[str, Any]:
    entries = [{"name": k, "resourceClaimName": v} for k, v in (claims or {}).items()]
    entries += [{"name": k, "resourceClaimTemplateName": v} for k, v in (templates or {}).items()]
    spec: dict[str, Any] = {"containers": [{"name": "main", "resources": {"requests": requests or {}}}],
                            "resourceClaims": entries}
    if init_requests:
        spec["initContainers"] = [{"name": "init", "resources": {"requests": init_requests}}]
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": spec}
