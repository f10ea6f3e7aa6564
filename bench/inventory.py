"""The synthetic GPU inventory the benchmarks share: one class, nodes with one pool of GPUs each."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DRIVER = "gpu.example.com"
MEMORY = {"H100": "80Gi", "A100": "40Gi"}


NODE_ALLOCATABLE = {"cpu": "64", "memory": "512Gi", "ephemeral-storage": "2Ti", "pods": "110"}


def cluster_manifests(nodes: int, gpus: int, models: tuple[str, ...] = ("H100",),
                      allocatable: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Class `gpu`, and `nodes` nodes of `gpus` GPUs each; node n has model `models[n % len(models)]`.
    With `allocatable` (e.g. NODE_ALLOCATABLE) the nodes report it, so the node filters check resources."""
    manifests: list[dict[str, Any]] = [{
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }]
    for n in range(nodes):
        name = f"node-{n:05d}"
        model = models[n % len(models)]
        node: dict[str, Any] = {"apiVersion": "v1", "kind": "Node",
                                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}
        if allocatable is not None:
            node["status"] = {"allocatable": dict(allocatable)}
        manifests.append(node)
        manifests.append({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{name}-gpus"},
            "spec": {
                "driver": DRIVER, "nodeName": name,
                "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                "devices": [{
                    "name": f"gpu-{g}",
                    "attributes": {"model": {"string": model}, "index": {"int": g},
                                   "uuid": {"string": f"GPU-{n:05d}-{g}"},
                                   "driverVersion": {"version": "550.54.15"}},
                    "capacity": {"memory": {"value": MEMORY.get(model, "80Gi")}},
                } for g in range(gpus)],
            },
        })
    return manifests
