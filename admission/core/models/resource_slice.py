"""resource.k8s.io/v1 ResourceSlice and its devices.

Attribute and capacity names are qualified once at parse time: an id without a domain belongs to the
driver's domain, so `model` and `gpu.example.com/model` are the same attribute of a
`gpu.example.com` device. Devices carry domain-grouped maps, as CEL selectors see them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from admission.core.errors import InvalidInput
from admission.core.models._fields import Fields
from admission.core.models.meta import ObjectMeta, parse_meta
from admission.core.models.node_selector import NodeSelector, parse_node_selector
from admission.core.quantity import Quantity
from admission.core.semver import Semver, SemverError, parse_semver

ScalarValue = int | bool | str | Semver
AttributeValue = ScalarValue | tuple[ScalarValue, ...]

_SCALAR_KINDS = ("int", "bool", "string", "version")
_LIST_KINDS = ("ints", "bools", "strings", "versions")


def qualify(name: str, driver: str) -> tuple[str, str]:
    """(domain, id) of an attribute or capacity name; no domain means the driver's."""
    domain, sep, ident = name.rpartition("/")
    return (domain, ident) if sep else (driver, name)


def qualified_name(name: str, driver: str) -> str:
    domain, ident = qualify(name, driver)
    return f"{domain}/{ident}"


@dataclass(frozen=True, slots=True)
class CapacityRange:
    min: Quantity
    max: Quantity | None = None
    step: Quantity | None = None


@dataclass(frozen=True, slots=True)
class RequestPolicy:
    """How a request consumes a shareable capacity (consumable capacity, KEP 5075)."""

    default: Quantity | None = None
    valid_values: tuple[Quantity, ...] = ()
    valid_range: CapacityRange | None = None


@dataclass(frozen=True, slots=True)
class DeviceCapacity:
    qualified: str
    value: Quantity
    request_policy: RequestPolicy | None = None


@dataclass(frozen=True, slots=True)
class CounterConsumption:
    counter_set: str
    counters: Mapping[str, Quantity]
    # DRADeviceCompatibilityGroups (1.37): devices drawing on one counter set must share a group.
    compatibility_groups: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CounterSet:
    name: str
    counters: Mapping[str, Quantity]


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    effect: str
    value: str = ""
    time_added: str = ""

    def to_manifest(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "effect": self.effect}
        if self.value:
            out["value"] = self.value
        return out


@dataclass(frozen=True, slots=True)
class Device:
    """One device of a slice; satisfies the CEL `DeviceLike` protocol."""

    name: str
    driver: str
    pool: str
    slice_name: str
    attributes: Mapping[str, Mapping[str, AttributeValue]] = field(default_factory=dict)
    capacity: Mapping[str, Mapping[str, Quantity]] = field(default_factory=dict)
    # Capacities keyed as written in the slice (results quote these keys).
    capacities: Mapping[str, DeviceCapacity] = field(default_factory=dict)
    # Attribute names given without any value: an error once a selector looks at the device.
    valueless_attributes: tuple[str, ...] = ()
    consumes_counters: tuple[CounterConsumption, ...] = ()
    taints: tuple[DeviceTaint, ...] = ()
    binds_to_node: bool = False
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    allow_multiple_allocations: bool = False
    # The slice's spec.skipNodeOperations (DRAOptionalNodeOperations), on each of its devices.
    skip_node_operations: tuple[str, ...] = ()
    # Per-device node selection (slices with perDeviceNodeSelection).
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool = False

    # "driver/pool/name", unique in the cluster; filled in from the other fields.
    id: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.id:
            object.__setattr__(self, "id", f"{self.driver}/{self.pool}/{self.name}")

    def attribute(self, qualified: str) -> AttributeValue | None:
        domain, _, ident = qualified.rpartition("/")
        return self.attributes.get(domain, {}).get(ident)

    def list_attribute_names(self) -> tuple[str, ...]:
        return tuple(ident for values in self.attributes.values()
                     for ident, value in values.items() if isinstance(value, tuple))


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    meta: ObjectMeta
    driver: str
    pool_name: str
    pool_generation: int
    resource_slice_count: int
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    per_device_node_selection: bool = False
    devices: tuple[Device, ...] = ()
    shared_counters: tuple[CounterSet, ...] = ()

    @property
    def name(self) -> str:
        return self.meta.name


def parse_resource_slice(obj: str, manifest: Fields) -> ResourceSlice:
    meta = parse_meta(obj, manifest, namespaced=False)
    spec = manifest.map("spec")
    driver = spec.str("driver", required=True)
    pool = spec.map("pool")
    pool_name = pool.str("name", required=True)
    count = pool.int("resourceSliceCount", required=True)
    if count < 1:
        raise pool.fail("resourceSliceCount", f"must be at least 1, got {count}")
    node_name, node_selector, all_nodes = _node_selection(spec)
    per_device = spec.bool("perDeviceNodeSelection")
    chosen = sum((node_name is not None, node_selector is not None, all_nodes, per_device))
    if chosen > 1:
        raise spec.fail("nodeName", "at most one of nodeName, nodeSelector, allNodes and "
                        "perDeviceNodeSelection may be set")
    devices = []
    seen: dict[str, int] = {}
    skip_operations = spec.str_list("skipNodeOperations")
    for index, entry in enumerate(spec.maps("devices")):
        device = _parse_device(entry, driver, pool_name, meta.name, per_device, skip_operations)
        if device.name in seen:
            raise entry.fail("name", f"duplicate device name {device.name} "
                             f"(also spec.devices[{seen[device.name]}])")
        seen[device.name] = index
        devices.append(device)
    counter_sets = tuple(_parse_counter_set(c) for c in spec.maps("sharedCounters"))
    names = [c.name for c in counter_sets]
    for index, name in enumerate(names):
        if name in names[:index]:
            raise InvalidInput(obj, f"spec.sharedCounters[{index}].name",
                               f"duplicate counter set name {name}")
    return ResourceSlice(
        meta=meta, driver=driver, pool_name=pool_name, pool_generation=pool.int("generation"),
        resource_slice_count=count, node_name=node_name, node_selector=node_selector,
        all_nodes=all_nodes, per_device_node_selection=per_device, devices=tuple(devices),
        shared_counters=counter_sets,
    )


def _node_selection(fields: Fields) -> tuple[str | None, NodeSelector | None, bool]:
    node_name = fields.str("nodeName") or None
    selector = parse_node_selector(fields.map("nodeSelector")) if fields.has("nodeSelector") else None
    return node_name, selector, fields.bool("allNodes")


def _parse_device(fields: Fields, driver: str, pool: str, slice_name: str, per_device: bool,
                  skip_operations: tuple[str, ...] = ()) -> Device:
    name = fields.str("name", required=True)
    attributes: dict[str, dict[str, AttributeValue]] = {}
    valueless: list[str] = []
    for key, raw in fields.map("attributes").items():
        value = _attribute_value(Fields(fields.obj, raw, fields.where(f"attributes.{key}")))
        domain, ident = qualify(str(key), driver)
        if value is None:
            valueless.append(str(key))
        else:
            attributes.setdefault(domain, {})[ident] = value
    capacities: dict[str, DeviceCapacity] = {}
    grouped: dict[str, dict[str, Quantity]] = {}
    for key, raw in fields.map("capacity").items():
        cap = _parse_capacity(Fields(fields.obj, raw, fields.where(f"capacity.{key}")), str(key), driver)
        capacities[str(key)] = cap
        domain, ident = qualify(str(key), driver)
        grouped.setdefault(domain, {})[ident] = cap.value
    node_name, node_selector, all_nodes = _node_selection(fields)
    if not per_device and (node_name or node_selector or all_nodes):
        raise fields.fail("nodeName", "per-device node selection needs spec.perDeviceNodeSelection: true")
    if per_device and sum((node_name is not None, node_selector is not None, all_nodes)) != 1:
        raise fields.fail("nodeName", "with perDeviceNodeSelection exactly one of nodeName, nodeSelector "
                          "and allNodes must be set")
    return Device(
        name=name, driver=driver, pool=pool, slice_name=slice_name, skip_node_operations=skip_operations,
        attributes=attributes, capacity=grouped, capacities=capacities,
        valueless_attributes=tuple(valueless),
        consumes_counters=tuple(
            CounterConsumption(c.str("counterSet", required=True), _counter_values(c),
                               c.str_list("compatibilityGroups"))
            for c in fields.maps("consumesCounters")),
        taints=tuple(parse_taint(t) for t in fields.maps("taints")),
        binds_to_node=fields.bool("bindsToNode"),
        binding_conditions=fields.str_list("bindingConditions"),
        binding_failure_conditions=fields.str_list("bindingFailureConditions"),
        allow_multiple_allocations=fields.bool("allowMultipleAllocations"),
        node_name=node_name, node_selector=node_selector, all_nodes=all_nodes,
    )


def _attribute_value(fields: Fields) -> AttributeValue | None:
    present = [k for k in (*_SCALAR_KINDS, *_LIST_KINDS) if fields.has(k)]
    if len(present) > 1:
        raise fields.fail(present[1], f"an attribute holds exactly one value, found {', '.join(present)}")
    if not present:
        return None
    kind = present[0]
    if kind in _LIST_KINDS:
        items = fields.list(kind)
        return tuple(_scalar(fields, f"{kind}[{i}]", kind[:-1], item) for i, item in enumerate(items))
    return _scalar(fields, kind, kind, fields.raw(kind))


def _scalar(fields: Fields, where: str, kind: str, value: object) -> ScalarValue:
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise fields.fail(where, f"expected an integer, got {value!r}")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise fields.fail(where, f"expected true or false, got {value!r}")
        return value
    if not isinstance(value, str):
        raise fields.fail(where, f"expected a string, got {value!r}")
    if kind == "version":
        try:
            return parse_semver(value)
        except SemverError as err:
            raise fields.fail(where, str(err)) from None
    return value


def _parse_capacity(fields: Fields, key: str, driver: str) -> DeviceCapacity:
    policy = None
    if fields.has("requestPolicy"):
        raw = fields.map("requestPolicy")
        valid_range = None
        if raw.has("validRange"):
            rng = raw.map("validRange")
            valid_range = CapacityRange(
                min=rng.quantity("min"),
                max=rng.quantity("max") if rng.has("max") else None,
                step=rng.quantity("step") if rng.has("step") else None,
            )
        values: tuple[Quantity, ...] = tuple(sorted(raw.quantity_list("validValues")))
        if valid_range and values:
            raise raw.fail("validValues", "validValues and validRange are mutually exclusive")
        policy = RequestPolicy(
            default=raw.quantity("default") if raw.has("default") else None,
            valid_values=values, valid_range=valid_range,
        )
    return DeviceCapacity(qualified_name(key, driver), fields.quantity("value"), policy)


def _counter_values(fields: Fields) -> dict[str, Quantity]:
    counters = fields.map("counters")
    return {str(name): Fields(fields.obj, raw, counters.where(str(name))).quantity("value")
            for name, raw in counters.items()}


def _parse_counter_set(fields: Fields) -> CounterSet:
    return CounterSet(fields.str("name", required=True), _counter_values(fields))


def parse_taint(fields: Fields) -> DeviceTaint:
    return DeviceTaint(
        key=fields.str("key", required=True), effect=fields.str("effect", required=True),
        value=fields.str("value"), time_added=str(fields.raw("timeAdded") or ""),
    )
