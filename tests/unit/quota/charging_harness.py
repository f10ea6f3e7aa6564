"""Runs charge_group on manifests, with a tiny table of CEL expressions evaluated in Python.

The quota tests' objects live in namespace NS.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from admission.core.models import (
    Device,
    DeviceClass,
    DeviceSelection,
    Node,
    Pod,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    parse_objects,
)
from admission.core.quota.charging import ChargeResult, GroupObjects, Inventory, Placement, charge_group
from admission.core.quota.device_values import CompiledUnit, compile_unit
from tests.support.builders import model, quota_unit

NS = "ns"


def model_of(device: Device) -> object:
    return device.attributes["gpu.example.com"]["model"]


PREDICATES: dict[str, Callable[[Device], bool]] = {
    'device.driver == "gpu.example.com"': lambda d: d.driver == "gpu.example.com",
    'device.driver == "nic.example.com"': lambda d: d.driver == "nic.example.com",
    'model == "H100"': lambda d: model_of(d) == "H100",
    'model == "A100"': lambda d: model_of(d) == "A100",
}
NUMBERS: dict[str, Callable[[Device], object]] = {
    'model == "H100" ? 1.0 : 0.5': lambda d: 1.0 if model_of(d) == "H100" else 0.5,
    "-1": lambda d: -1,
}


class TableCel:
    def selector(self, expression: str) -> Callable[[Device], bool]:
        return PREDICATES[expression]

    def number(self, expression: str) -> Callable[[Device], object]:
        return NUMBERS[expression]


def matches(device: Device, device_class: DeviceClass, selection: DeviceSelection) -> bool:
    selectors = (*device_class.selectors, *selection.selectors)
    return all(PREDICATES[s](device) for s in selectors if s is not None)


def unit(name: str, spec: dict[str, Any]) -> CompiledUnit:
    return compile_unit(model(quota_unit(name, spec)), TableCel())


STANDARD_UNITS = (
    unit("gpus", {"devices": {"deviceClassNames": ["gpu"]}, "extendedResources": [{"name": "nvidia.com/gpu"}]}),
    unit("gpu-memory", {"capacity": {"deviceClassNames": ["gpu"], "name": "gpu.example.com/memory"},
                        "extendedResources": [{"name": "nvidia.com/gpu", "countsAs": "24Gi"}]}),
    unit("gpu-weight", {"weight": {"deviceClassNames": ["gpu"], "expression": 'model == "H100" ? 1.0 : 0.5'}}),
    unit("h100s", {"devices": {"deviceClassNames": ["gpu"], "selector": 'model == "H100"'}}),
    unit("cpu", {"core": {"resource": "cpu"}}),
)


def charge(objects: list[dict[str, Any]], units: tuple[CompiledUnit, ...] = STANDARD_UNITS,
           placement: Placement | None = None, allocated_only: bool = False) -> ChargeResult:
    models = parse_objects(objects)
    devices: dict[str, list[Device]] = {}
    for item in models:
        if isinstance(item, ResourceSlice):
            devices.setdefault(item.node_name or "", []).extend(item.devices)
    inventory = Inventory.of([m for m in models if isinstance(m, DeviceClass)], devices,
                             [m for m in models if isinstance(m, Node)])
    group = GroupObjects(
        pods=tuple(m for m in models if isinstance(m, Pod)),
        claims={m.key: m for m in models if isinstance(m, ResourceClaim)},
        templates={f"{m.namespace}/{m.name}": m for m in models if isinstance(m, ResourceClaimTemplate)},
    )
    return charge_group(group, units, inventory, matches, placement, allocated_only=allocated_only)
