"""The DRA `device` variable: the DeviceLike protocol and read-only CEL views of a device."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Final, Protocol

from admission.core.cel.errors import CelRuntimeError
from admission.core.cel.types import BOOL, DYN, QUANTITY, STRING, Type, map_of
from admission.core.quantity import Quantity
from admission.core.semver import Semver

AttributeValue = int | bool | str | Semver | tuple["AttributeValue", ...]


class DeviceLike(Protocol):
    """What a selector reads of a device. Attribute and capacity names are grouped by domain;
    names without a domain are under the driver's domain."""

    @property
    def driver(self) -> str: ...

    @property
    def attributes(self) -> Mapping[str, Mapping[str, AttributeValue]]: ...

    @property
    def capacity(self) -> Mapping[str, Mapping[str, Quantity]]: ...

    @property
    def allow_multiple_allocations(self) -> bool: ...


def device_fields(allow_multiple_allocations: bool) -> dict[str, Type]:
    fields = {
        "driver": STRING,
        "attributes": map_of(STRING, map_of(STRING, DYN)),
        "capacity": map_of(STRING, map_of(STRING, QUANTITY)),
    }
    if allow_multiple_allocations:
        fields["allowMultipleAllocations"] = BOOL
    return fields


_EMPTY: Final[Mapping[str, object]] = {}


class MissingValue:
    """Marks an attribute or capacity a device does not have."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


MISSING: Final = MissingValue()


def unsupported_list(name: str) -> CelRuntimeError:
    return CelRuntimeError(f"attribute {name}: unsupported attribute value")


class AttributeMap(Mapping[str, object]):
    """One domain's attributes; a list value is an error unless list attributes are enabled."""

    __slots__ = ("_lists", "_values")

    def __init__(self, values: Mapping[str, object], lists: bool) -> None:
        self._values = values
        self._lists = lists

    def __getitem__(self, key: str) -> object:
        value = self._values[key]
        if type(value) is tuple and not self._lists:
            raise unsupported_list(key)
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


class DomainMap(Mapping[str, Mapping[str, object]]):
    """domain -> names; an unknown domain is an empty map, as in Kubernetes."""

    __slots__ = ("_attributes", "_domains", "_lists")

    def __init__(self, domains: Mapping[str, Mapping[str, object]], attributes: bool, lists: bool) -> None:
        self._domains = domains
        self._attributes = attributes
        self._lists = lists

    def __getitem__(self, key: str) -> Mapping[str, object]:
        values = self._domains.get(key, _EMPTY)
        return AttributeMap(values, self._lists) if self._attributes else values

    def __contains__(self, key: object) -> bool:
        return key in self._domains

    def __iter__(self) -> Iterator[str]:
        return iter(self._domains)

    def __len__(self) -> int:
        return len(self._domains)


class DeviceView(Mapping[str, object]):
    """The `device` variable as CEL sees it."""

    __slots__ = ("_fields",)

    def __init__(self, device: DeviceLike, allow_multiple_allocations: bool, lists: bool) -> None:
        self._fields: dict[str, object] = {
            "driver": device.driver,
            "attributes": DomainMap(device.attributes, True, lists),
            "capacity": DomainMap(device.capacity, False, lists),
        }
        if allow_multiple_allocations:
            self._fields["allowMultipleAllocations"] = device.allow_multiple_allocations

    def __getitem__(self, key: str) -> object:
        return self._fields[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)


_SCALARS: Final = frozenset({int, bool, str, Semver})
VALIDATED_SIZE: Final = 65536
# id(attributes) -> (attributes, driver, problem without list attributes, problem with them).
# The mapping itself is kept, so its id cannot be reused while the entry exists.
_validated: dict[int, tuple[object, str, str | None, str | None]] = {}


def attribute_problem(device: DeviceLike, lists: bool) -> str | None:
    """Why the device's attributes cannot be converted for CEL, or None.

    As in Kubernetes, every attribute is converted before a selector runs, so one unusable value
    fails every selector on the device. Results are remembered per attributes mapping (treated as
    immutable), because the same devices are swept again and again.
    """
    attributes = device.attributes
    entry = _validated.get(id(attributes))
    if entry is None or entry[0] is not attributes or entry[1] != device.driver:
        entry = (attributes, device.driver, _problem(device, False), _problem(device, True))
        if len(_validated) >= VALIDATED_SIZE:
            del _validated[next(iter(_validated))]
        _validated[id(attributes)] = entry
    return entry[3] if lists else entry[2]


def _problem(device: DeviceLike, lists: bool) -> str | None:
    for domain, values in device.attributes.items():
        for name, value in values.items():
            if type(value) in _SCALARS:
                continue
            if lists and type(value) is tuple and all(type(item) in _SCALARS for item in value):
                continue
            shown = name if domain == device.driver else f"{domain}/{name}"
            return f"attribute {shown}: unsupported attribute value"
    return None
