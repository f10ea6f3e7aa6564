"""Consumable capacity (KEP 5075): what a request consumes of a device, and whether it still fits."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from math import ceil

from admission.core.models import Device, DeviceCapacity, qualified_name
from admission.core.quantity import Quantity

Consumption = dict[str, Fraction]  # qualified capacity name -> amount


def consumption(device: Device, requests: Mapping[str, Quantity]) -> Consumption | None:
    """What a request takes of each capacity of the device; None if the device cannot serve it."""
    wanted = {qualified_name(name, device.driver): q.value for name, q in requests.items()}
    result: Consumption = {}
    for capacity in device.capacities.values():
        amount = _consumed(capacity, wanted.pop(capacity.qualified, None))
        if amount is None:
            return None
        result[capacity.qualified] = amount
    if wanted:
        return None  # asks for a capacity this device does not have
    return result


def _consumed(capacity: DeviceCapacity, requested: Fraction | None) -> Fraction | None:
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
        amount = max(amount, rng.min.value)
        if rng.step is not None and rng.step.value > 0:
            steps = ceil((amount - rng.min.value) / rng.step.value)
            amount = rng.min.value + steps * rng.step.value
        allowed = rng.max is None or amount <= rng.max.value
    elif policy.valid_values:
        larger = [v.value for v in policy.valid_values if v.value >= amount]
        if larger:
            amount = larger[0]
        allowed = amount in {v.value for v in policy.valid_values}
    if not allowed and amount != default:
        return None
    return amount


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
