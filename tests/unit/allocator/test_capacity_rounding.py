"""How a capacity request is rounded on a device's `validRange`: on whole units (every release, and 1.37
with DRAFractionalCapacityRange off) or on milli-units (1.37 with the gate on, its default)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from admission.core.allocator.capacity import consumption
from admission.core.models import Device, parse_objects
from admission.core.models.resource_slice import ResourceSlice
from admission.core.quantity import parse_quantity
from tests.support.builders import device, resource_slice


def _device(value: str, *, low: str, step: str | None = None, high: str | None = None) -> Device:
    policy: dict[str, object] = {"min": low}
    if step is not None:
        policy["step"] = step
    if high is not None:
        policy["max"] = high
    manifest = resource_slice("n1", device("d0", capacity={"bandwidth": {
        "value": value, "requestPolicy": {"default": low, "validRange": policy}}}, allowMultipleAllocations=True))
    [rs] = [m for m in parse_objects([manifest]) if isinstance(m, ResourceSlice)]
    return rs.devices[0]


def _taken(dev: Device, request: str | None, fractional: bool) -> Fraction | None:
    requests = {} if request is None else {"bandwidth": parse_quantity(request)}
    amount = consumption(dev, requests, fractional)
    return None if amount is None else next(iter(amount.values()))


@pytest.mark.parametrize(("low", "step", "asked", "whole", "milli"), [
    ("500m", "250m", "600m", "1", "750m"),      # request, min and step each count as 1 on whole units
    ("500m", "1", "700m", "1", "1500m"),        # 700m counts as 1, on the step from min 500m (also 1)
    ("1", "2", "1500m", "3", "3"),              # whole numbers: both ways alike
    ("500m", "250m", "400m", "500m", "500m"),   # below min: min as written, either way
    ("250m", "100m", "251m", "1", "350m"),
])
def test_steps_round_on_whole_units_unless_the_gate_is_on(low: str, step: str, asked: str, whole: str,
                                                          milli: str) -> None:
    dev = _device("4", low=low, step=step)
    assert _taken(dev, asked, fractional=False) == parse_quantity(whole).value
    assert _taken(dev, asked, fractional=True) == parse_quantity(milli).value


def test_max_refuses_what_rounding_pushes_past_it() -> None:
    dev = _device("4", low="500m", step="250m", high="1")
    assert _taken(dev, "800m", fractional=True) == 1
    assert _taken(dev, "1100m", fractional=True) is None  # 1250m > max 1
    assert _taken(dev, "1100m", fractional=False) is None  # whole units: 2 > max 1


def test_a_range_not_in_whole_milli_units_rounds_on_whole_units() -> None:
    dev = _device("4", low="500m", step="2500u")  # a step of 2.5m is no whole number of milli-units
    assert _taken(dev, "600m", fractional=True) == 1


def test_no_request_takes_the_default_without_rounding() -> None:
    dev = _device("4", low="500m", step="250m")
    assert _taken(dev, None, fractional=False) == Fraction(1, 2)
