"""Read the cluster's DRA inventory (ResourceSlices) and summarise devices per node."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kubernetes import client

from admission.core.quantity import format_quantity, parse_quantity


@dataclass
class NodeDevices:
    node: str
    driver: str
    devices: int = 0
    products: set[str] = field(default_factory=set)
    memory: Fraction = Fraction(0)
    partitions: int = 0


def _attribute(device: dict[str, Any], name: str) -> Any:
    value = (device.get("attributes") or {}).get(name) or {}
    return next(iter(value.values()), None)


def summarise_slices(slices: list[dict[str, Any]]) -> list[NodeDevices]:
    """One row per (node, driver): whole devices, partitions (devices consuming counters), memory."""
    rows: dict[tuple[str, str], NodeDevices] = {}
    for rs in slices:
        spec = rs.get("spec", {})
        node = spec.get("nodeName") or ("(all nodes)" if spec.get("allNodes") else "(selected nodes)")
        row = rows.setdefault((node, spec.get("driver", "")), NodeDevices(node, spec.get("driver", "")))
        for device in spec.get("devices") or []:
            if device.get("consumesCounters") and _attribute(device, "type") not in ("gpu", "amdgpu"):
                row.partitions += 1
                continue
            row.devices += 1
            if product := _attribute(device, "productName"):
                row.products.add(str(product))
            memory = ((device.get("capacity") or {}).get("memory") or {}).get("value")
            if memory:
                row.memory += parse_quantity(str(memory)).value
    return sorted(rows.values(), key=lambda r: (r.node, r.driver))


def list_resource_slices(api: client.ApiClient) -> list[dict[str, Any]]:
    custom = client.CustomObjectsApi(api)
    listing = custom.list_cluster_custom_object("resource.k8s.io", "v1", "resourceslices")
    assert isinstance(listing, dict)
    return list(listing["items"])


def format_device_table(rows: list[NodeDevices]) -> str:
    header = ("NODE", "DRIVER", "DEVICES", "PARTITIONS", "MEMORY", "PRODUCT")
    lines = [header] + [
        (r.node, r.driver, str(r.devices), str(r.partitions), memory_text(r.memory),
         ", ".join(sorted(r.products)) or "-") for r in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines)


def memory_text(value: Fraction) -> str:
    """Memory in its largest exact binary unit, and in GiB to one decimal when that unit is smaller
    (8 MI300X publish 196592Mi each: `1572736Mi (1535.9Gi)`, not a rounded `1536Gi`)."""
    exact = format_quantity(value, "BinarySI")
    gib = value / 2**30
    if gib < 1 or gib.denominator == 1 or exact.endswith(("Gi", "Ti", "Pi", "Ei")):
        return exact
    return f"{exact} ({float(gib):.1f}Gi)"
