"""QuotaUnit: how devices (or pod requests) become quota, parsed from its manifest."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from typing import Any

from admission.core.errors import InvalidInput
from admission.core.labels import API_VERSION
from admission.core.models._fields import Fields
from admission.core.models.meta import object_label


class Counting(StrEnum):
    """The one way a unit counts (the key under `spec`)."""

    DEVICES = "devices"
    CAPACITY = "capacity"
    COUNTERS = "counters"
    WEIGHT = "weight"
    CORE = "core"


@dataclass(frozen=True, slots=True)
class ExtendedResource:
    """A device-plugin resource (e.g. nvidia.com/gpu) counted in a unit: each one counts as `counts_as`."""

    name: str
    counts_as: Fraction = Fraction(1)


@dataclass(frozen=True, slots=True)
class QuotaUnit:
    name: str
    counting: Counting
    device_class_names: tuple[str, ...] = ()
    selector: str | None = None
    capacity: str = ""
    counter: str = ""
    counter_set: str | None = None
    expression: str = ""
    resource: str = ""
    extended_resources: tuple[ExtendedResource, ...] = ()

    @property
    def label(self) -> str:
        return f"QuotaUnit {self.name}"

    def counts_class(self, class_name: str) -> bool:
        return class_name in self.device_class_names

    def extended(self, resource: str) -> ExtendedResource | None:
        return next((e for e in self.extended_resources if e.name == resource), None)

    def describe(self) -> str:
        """What one unit is, for status and `kubectl get quotaunits`."""
        classes = ", ".join(self.device_class_names)
        narrowed = " (selected)" if self.selector else ""
        match self.counting:
            case Counting.DEVICES:
                text = f"devices of {classes}{narrowed}"
            case Counting.CAPACITY:
                text = f"{self.capacity} of {classes}{narrowed}"
            case Counting.COUNTERS:
                where = f" in {self.counter_set}" if self.counter_set else ""
                text = f"counter {self.counter}{where} of {classes}{narrowed}"
            case Counting.WEIGHT:
                text = f"weighted devices of {classes}{narrowed}"
            case Counting.CORE:
                text = f"pod requests of {self.resource}"
        if self.extended_resources:
            text += " + " + ", ".join(e.name for e in self.extended_resources)
        return text


def parse_quota_unit(manifest: Mapping[str, Any]) -> QuotaUnit:
    """A QuotaUnit manifest to its model; InvalidInput names the unit, the field and the reason."""
    fields = check_kind(manifest, "QuotaUnit")
    name = fields.map("metadata").str("name", required=True)
    spec = fields.map("spec")
    ways = [way for way in Counting if spec.has(way.value)]
    if len(ways) != 1:
        found = ", ".join(w.value for w in ways) or "none"
        raise InvalidInput(fields.obj, "spec", "set exactly one way of counting: devices, capacity, "
                           f"counters, weight or core (found: {found})")
    counting = ways[0]
    body = spec.map(counting.value)
    extended = _extended_resources(spec)
    if counting is Counting.CORE:
        if extended:
            raise spec.fail("extendedResources", "a core unit counts pod requests directly; "
                            "name the resource in spec.core.resource instead")
        return QuotaUnit(name, counting, resource=body.str("resource", required=True))
    classes = body.str_list("deviceClassNames")
    if not classes:
        raise body.fail("deviceClassNames", "name at least one DeviceClass")
    selector = body.opt_str("selector")
    if selector is not None and not selector.strip():
        raise body.fail("selector", "must not be empty (leave it out to count every device)")
    return QuotaUnit(
        name, counting, classes, selector,
        capacity=body.str("name", required=True) if counting is Counting.CAPACITY else "",
        counter=body.str("counter", required=True) if counting is Counting.COUNTERS else "",
        counter_set=body.opt_str("counterSet") if counting is Counting.COUNTERS else None,
        expression=body.str("expression", required=True) if counting is Counting.WEIGHT else "",
        extended_resources=extended,
    )


def _extended_resources(spec: Fields) -> tuple[ExtendedResource, ...]:
    seen: set[str] = set()
    result = []
    for entry in spec.maps("extendedResources"):
        name = entry.str("name", required=True)
        if name in seen:
            raise entry.fail("name", f"duplicate extended resource {name}")
        seen.add(name)
        counts_as = entry.quantity("countsAs").value if entry.has("countsAs") else Fraction(1)
        if counts_as < 0:
            raise entry.fail("countsAs", f"must not be negative, got {counts_as}")
        result.append(ExtendedResource(name, counts_as))
    return tuple(result)


def check_kind(manifest: Mapping[str, Any], kind: str) -> Fields:
    """The manifest's fields after checking it is a draq.io/v1alpha1 object of `kind`."""
    if not isinstance(manifest, Mapping):
        raise InvalidInput(kind, "", f"expected a mapping, got {type(manifest).__name__}")
    fields = Fields(object_label(kind, manifest), manifest)
    if fields.raw("apiVersion") != API_VERSION or fields.raw("kind") != kind:
        found = f"{fields.raw('apiVersion')} {fields.raw('kind')}"
        raise InvalidInput(fields.obj, "apiVersion/kind", f"expected {API_VERSION} {kind}, got {found}")
    return fields
