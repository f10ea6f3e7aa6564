"""What one device counts in a quota unit: the unit's CEL programs and the per-kind valuation."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Protocol, TypeVar

from admission.core.errors import DraqError, InvalidInput
from admission.core.models import Device, DeviceSelection, RequestPolicy, qualified_name
from admission.core.quantity import Quantity
from admission.core.quota.problems import Unchargeable
from admission.core.quota.units import Counting, QuotaUnit

T = TypeVar("T")
DevicePredicate = Callable[[Device], bool]
DeviceNumber = Callable[[Device], object]


class CelCompiler(Protocol):
    """Compiles DRA CEL over `device`; raises a DraqError for an expression that does not compile."""

    def selector(self, expression: str) -> DevicePredicate: ...

    def number(self, expression: str) -> DeviceNumber: ...


@dataclass(frozen=True, slots=True)
class CompiledUnit:
    """A QuotaUnit with its selector and weight expression compiled."""

    unit: QuotaUnit
    select: DevicePredicate | None = None
    weigh: DeviceNumber | None = None

    @property
    def name(self) -> str:
        return self.unit.name


def compile_unit(unit: QuotaUnit, cel: CelCompiler | None) -> CompiledUnit:
    """Compile the unit's CEL; InvalidInput names the unit and field when it does not compile."""
    field = f"spec.{unit.counting.value}"
    select = weigh = None
    if unit.selector is not None:
        select = _compiled(unit, f"{field}.selector", unit.selector, cel, lambda c, e: c.selector(e))
    if unit.counting is Counting.WEIGHT:
        weigh = _compiled(unit, f"{field}.expression", unit.expression, cel, lambda c, e: c.number(e))
    return CompiledUnit(unit, select, weigh)


def _compiled(unit: QuotaUnit, field: str, expression: str, cel: CelCompiler | None,
                 build: Callable[[CelCompiler, str], T]) -> T:
    if cel is None:
        raise InvalidInput(unit.label, field, "CEL expressions cannot be compiled here (no CEL engine)")
    try:
        return build(cel, expression)
    except DraqError as err:
        raise InvalidInput(unit.label, field, f"does not compile: {err}") from None


def device_value(unit: CompiledUnit, device: Device | None, selection: DeviceSelection,
                 consumed: Mapping[str, Quantity] | None = None) -> Fraction:
    """What `device`, taken for `selection`, counts in `unit` (0 if the unit does not count it).

    `consumed` is the capacity an allocation result says a shared device gave (consumable capacity).
    `device` None means the device is not in the inventory: only a plain device count can do without it.
    """
    spec = unit.unit
    if spec.counting is Counting.CORE or not spec.counts_class(selection.device_class_name):
        return Fraction(0)
    if spec.counting is Counting.DEVICES and unit.select is None:
        return Fraction(1)
    if device is None:
        raise Unchargeable(f"{spec.label} needs to look at the device, but it is not in any ResourceSlice",
                           permanent=False)
    if not selects(unit, device):
        return Fraction(0)
    match spec.counting:
        case Counting.DEVICES:
            return Fraction(1)
        case Counting.CAPACITY:
            return _capacity(spec, device, selection, consumed or {})
        case Counting.COUNTERS:
            return _counters(spec, device)
        case _:
            assert unit.weigh is not None
            return _weight(spec, device, _run(spec, device, "expression", unit.weigh))


def selects(unit: CompiledUnit, device: Device) -> bool:
    """Whether the unit's own selector (if any) takes the device; Unchargeable names the unit, the device and
    the CEL error when it fails on it."""
    return unit.select is None or _run(unit.unit, device, "selector", unit.select)


def _run(unit: QuotaUnit, device: Device, what: str, program: Callable[[Device], T]) -> T:
    try:
        return program(device)
    except DraqError as err:
        message = f"{unit.label}: {what} fails on device {device.id}: {err}"
        raise Unchargeable(message, permanent=True) from None


def _capacity(unit: QuotaUnit, device: Device, selection: DeviceSelection,
              consumed: Mapping[str, Quantity]) -> Fraction:
    wanted = qualified_name(unit.capacity, device.driver)
    capacity = next((c for c in device.capacities.values() if c.qualified == wanted), None)
    if capacity is None:
        raise Unchargeable(f"{unit.label}: device {device.id} has no capacity {wanted}", permanent=True)
    given = _lookup(consumed, wanted, device.driver)
    if given is not None:
        return given.value
    if not device.allow_multiple_allocations:
        return capacity.value.value  # a dedicated device is taken whole
    requested = _lookup(selection.capacity_requests, wanted, device.driver)
    return requested_share(capacity.request_policy, requested, capacity.value).value


def _lookup(values: Mapping[str, Quantity], wanted: str, driver: str) -> Quantity | None:
    return next((v for k, v in values.items() if qualified_name(k, driver) == wanted), None)


def requested_share(policy: RequestPolicy | None, requested: Quantity | None, whole: Quantity) -> Quantity:
    """What a request consumes of a shared capacity: rounded up by the device's policy (KEP 5075)."""
    if requested is None:
        return policy.default if policy is not None and policy.default is not None else whole
    if policy is None:
        return requested
    if policy.valid_range is not None:
        low, step = policy.valid_range.min, policy.valid_range.step
        value = max(requested.value, low.value)
        if step is not None and step.value > 0:
            steps = -((low.value - value) // step.value)
            value = low.value + steps * step.value
        return Quantity(value, requested.format)
    bigger = [v for v in policy.valid_values if v >= requested]
    return min(bigger) if bigger else requested


def _counters(unit: QuotaUnit, device: Device) -> Fraction:
    found = [c.counters[unit.counter] for c in device.consumes_counters
             if unit.counter in c.counters and unit.counter_set in (None, c.counter_set)]
    if not found:
        where = f" from counter set {unit.counter_set}" if unit.counter_set else ""
        raise Unchargeable(f"{unit.label}: device {device.id} consumes no counter {unit.counter}{where}",
                           permanent=True)
    return sum((q.value for q in found), Fraction(0))


def _weight(unit: QuotaUnit, device: Device, value: object) -> Fraction:
    number: Fraction
    if isinstance(value, bool):
        raise Unchargeable(f"{unit.label}: expression gives a bool for device {device.id}, "
                           "expected a number", permanent=True)
    if isinstance(value, int | Fraction):
        number = Fraction(value)
    elif isinstance(value, float) and math.isfinite(value):
        number = Fraction(Decimal(repr(value)))
    elif isinstance(value, Quantity):
        number = value.value
    else:
        raise Unchargeable(f"{unit.label}: expression gives {type(value).__name__} for device {device.id}, "
                           "expected a number", permanent=True)
    if number < 0:
        raise Unchargeable(f"{unit.label}: expression gives {value} for device {device.id}, "
                           "a weight must not be negative", permanent=True)
    return number
