"""Consumable capacity (KEP 5075): what a request consumes of a device, and whether it still fits.

A `validRange` with a step is rounded as the scheduler rounds it: on whole units (each of the request,
min and step rounded up to an integer first), or, with DRAFractionalCapacityRange (1.37), on milli-units
(each rounded up to a multiple of 1/1000) where min, max and step are whole 64-bit milli-units.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from math import ceil
from typing import Final

from admission.core.models import CapacityRange, Device, DeviceCapacity, qualified_name
from admission.core.quantity import Quantity

Consumption = dict[str, Fraction]  # qualified capacity name -> amount

# Quantity.MilliValue() is an int64: past this a range is not rounded on milli-units.
_MILLI_LIMIT: Final = Fraction(2**63 - 1, 1000)


def consumption(device: Device, requests: Mapping[str, Quantity], fractional: bool = False) -> Consumption | None:
    """What a request takes of each capacity of the device; None if the device cannot serve it.
    `fractional`: DRAFractionalCapacityRange is on (steps are rounded on milli-units)."""
    wanted = {qualified_name(name, device.driver): q.value for name, q in requests.items()}
    result: Consumption = {}
    for capacity in device.capacities.values():
        amount = _consumed(capacity, wanted.pop(capacity.qualified, None), fractional)
        if amount is None:
            return None
        result[capacity.qualified] = amount
    if wanted:
        return None  # asks for a capacity this device does not have
    return result


def _consumed(capacity: DeviceCapacity, requested: Fraction | None, fractional: bool) -> Fraction | None:
    policy = capacity.request_policy
    default = policy.default.value if policy and policy.default is not None else None
    if requested is None:
        return default if default is not None else capacity.value.value
    if policy is None:
        return requested
    amount = requested
    allowed = True
    if policy.valid_range is not None:
        rng = policy.valid_range
        if amount < rng.min.value:
            amount = rng.min.value
        elif rng.step is not None and rng.step.value > 0:
            amount = _round_up(amount, rng.min.value, rng.step.value, _step_unit(rng, fractional))
        # Rounded on the same units, the amount is always on a step: only max can refuse it.
        allowed = rng.max is None or amount <= rng.max.value
    elif policy.valid_values:
        larger = [v.value for v in policy.valid_values if v.value >= amount]
        if larger:
            amount = larger[0]
        allowed = amount in {v.value for v in policy.valid_values}
    if not allowed and amount != default:
        return None
    return amount


def _step_unit(rng: CapacityRange, fractional: bool) -> int:
    """Units per 1 the scheduler rounds a range's steps on: 1000 with DRAFractionalCapacityRange
    where min, max and step are each a whole number of milli-units within int64, else 1."""
    if fractional and all(q is None or _milli_exact(q.value) for q in (rng.min, rng.max, rng.step)):
        return 1000
    return 1


def _milli_exact(value: Fraction) -> bool:
    return (value * 1000).denominator == 1 and abs(value) <= _MILLI_LIMIT


def _round_up(requested: Fraction, low: Fraction, step: Fraction, unit: int) -> Fraction:
    """The first value of low + n*step at or above the request, each rounded up to 1/unit first."""
    r, m, s = ceil(requested * unit), ceil(low * unit), ceil(step * unit)
    return Fraction(m + s * -((m - r) // s), unit)


def fits(device: Device, amount: Consumption, *already: Mapping[str, Fraction] | None) -> bool:
    """Everything consumed so far plus `amount` stays within each capacity of the device."""
    for capacity in device.capacities.values():
        total = amount.get(capacity.qualified, Fraction(0))
        for used in already:
            if used:
                total += used.get(capacity.qualified, Fraction(0))
        if total > capacity.value.value:
            return False
    return True


def as_quantities(device: Device, amount: Consumption) -> dict[str, Quantity]:
    """Consumed amounts keyed as the device's capacities are written, for allocation results."""
    return {name: Quantity(amount[cap.qualified], cap.value.format)
            for name, cap in device.capacities.items() if cap.qualified in amount}
