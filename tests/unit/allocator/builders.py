"""Short builders for allocator tests: manifests in, models out."""

from __future__ import annotations

from typing import Any

from admission.core.allocator import Allocator, Snapshot
from admission.core.features import FeatureGates, exactly
from admission.core.models import Model, parse_objects

DRIVER = "gpu.example.com"


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def device_class(name: str = "gpu", expression: str = f'device.driver == "{DRIVER}"',
                 config: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
    if config:
        spec["config"] = config
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def device(name: str, **attributes: Any) -> dict[str, Any]:
    attrs = {}
    for key, value in attributes.items():
        kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "string"
        attrs[key] = {kind: value}
    return {"name": name, "attributes": attrs}


def slice_(name: str, node_name: str | None, devices: list[dict[str, Any]], *, pool: str | None = None,
           driver: str = DRIVER, count: int = 1, generation: int = 1, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": driver, "pool": {"name": pool or node_name or name, "generation": generation,
                                                       "resourceSliceCount": count}, "devices": devices}
    if node_name is not None:
        spec["nodeName"] = node_name
    spec.update(extra)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def gpus(node_name: str, n: int, **attributes: Any) -> dict[str, Any]:
    return slice_(f"{node_name}-gpus", node_name, [device(f"gpu-{i}", index=i, **attributes) for i in range(n)])


def request(name: str = "gpu", count: int = 1, cls: str = "gpu", **fields: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": cls, "count": count, **fields}}


def claim(name: str, *requests: dict[str, Any], namespace: str = "default",
          constraints: list[dict[str, Any]] | None = None, allocation: dict[str, Any] | None = None,
          config: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests or [request()])}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    manifest: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                "metadata": {"name": name, "namespace": namespace},
                                "spec": {"devices": devices}}
    if allocation is not None:
        manifest["status"] = {"allocation": allocation}
    return manifest


def holding(*device_ids: str, request_name: str = "gpu", **extra: Any) -> dict[str, Any]:
    """An allocation holding the given `driver/pool/device` ids."""
    results = []
    for device_id in device_ids:
        driver, pool, name = device_id.rsplit("/", 2)
        results.append({"request": request_name, "driver": driver, "pool": pool, "device": name, **extra})
    return {"devices": {"results": results}}


def allocator(*manifests: dict[str, Any], gates: FeatureGates | None = None, budget: int | None = None,
              ) -> Allocator:
    models: list[Model] = parse_objects(list(manifests))
    return Allocator(Snapshot.from_models(models), gates or exactly("1.36", []), budget=budget)


def devices_of(outcome: Any, claim_key: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for result in outcome.allocations[claim_key].results:
        found.setdefault(result.request, []).append(result.device_id)
    return found
