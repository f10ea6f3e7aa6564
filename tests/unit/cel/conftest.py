"""Small devices that fit the DeviceLike protocol, for selector tests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from admission.core.quantity import Quantity, parse_quantity
from admission.core.semver import parse_semver

DRIVER = "gpu.example.com"


@dataclass(frozen=True, slots=True)
class FakeDevice:
    driver: str = DRIVER
    attributes: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    capacity: Mapping[str, Mapping[str, Quantity]] = field(default_factory=dict)
    allow_multiple_allocations: bool = False


def gpu(model: str = "H100", memory: str = "80Gi", **attributes: object) -> FakeDevice:
    """A GPU of the example driver; extra keyword attributes go under the driver's domain."""
    values: dict[str, object] = {"model": model, "driverVersion": parse_semver("1.2.3"), **attributes}
    return FakeDevice(attributes={DRIVER: values}, capacity={DRIVER: {"memory": parse_quantity(memory)}})
