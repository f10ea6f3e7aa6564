"""The charge's sums in whole numbers where they are whole, and one valuation per selection where no unit looks
at the device: the same charges as summing every device's fractions, on random inputs."""

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from admission.core.models import Device, ResourceClaim, parse_objects
from admission.core.quota.amounts import Amounts
from admission.core.quota.charging import ChargeLine, _total
from admission.core.quota.device_values import CompiledUnit, device_value
from tests.support.builders import claim, device_class, exactly, gpu, pod, resource_slice, result
from tests.unit.quota.charging_harness import NS, STANDARD_UNITS, charge, unit

UNITS = (*STANDARD_UNITS, unit("gpus-plain", {"devices": {"deviceClassNames": ["gpu"]}}),
         unit("nics", {"devices": {"deviceClassNames": ["nic"]}}))
CLUSTER: list[dict[str, Any]] = [
    device_class("gpu"), device_class("nic"),
    resource_slice("node-a", *(gpu(f"gpu-{i}") for i in range(4))),
    resource_slice("node-b", *(gpu(f"gpu-{i}", "A100", "40Gi") for i in range(4))),
]
DEVICES = [(f"gpu-{i}", node) for node in ("node-a", "node-b") for i in range(4)]

values = st.one_of(st.integers(-10**6, 10**6),
                   st.fractions(min_value=-1000, max_value=1000, max_denominator=64))
amounts = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), values), max_size=4).map(Amounts.of)


@settings(max_examples=300, deadline=None)
@given(st.lists(amounts, min_size=1, max_size=5), st.lists(st.integers(0, 4), max_size=40))
def test_the_total_is_the_sum_of_every_lines_amounts(pool: list[Amounts], picks: list[int]) -> None:
    # Lines share Amounts objects as the devices valued alike do.
    charged = [ChargeLine(f"line {i}", pool[pick % len(pool)]) for i, pick in enumerate(picks)]
    assert _total(charged) == Amounts.of(pair for line in charged for pair in line.amounts)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(UNITS), min_size=1, max_size=4, unique_by=lambda u: u.name),
       st.lists(st.lists(st.sampled_from(DEVICES), min_size=1, max_size=3, unique=True), min_size=1, max_size=3,
                unique_by=lambda ds: tuple(ds)))
def test_every_devices_line_is_what_the_device_counts(units: list[CompiledUnit],
                                                      claims: list[list[tuple[str, str]]]) -> None:
    taken: set[tuple[str, str]] = set()
    objects: list[dict[str, Any]] = list(CLUSTER)
    for i, devices in enumerate(claims):
        devices = [d for d in devices if d not in taken]
        taken.update(devices)
        if devices:
            objects.append(claim(f"c{i}", exactly("gpu", count=len(devices)), namespace=NS,
                                 allocation=[result("gpu", name, node) for name, node in devices]))
            objects.append(pod(f"p{i}", NS, claims={"g": f"c{i}"}))
    charged = charge(objects, tuple(units))
    models = parse_objects(objects)
    by_id = {d.id: d for m in models if hasattr(m, "devices") for d in m.devices if isinstance(d, Device)}
    expected = []
    for item in models:
        if isinstance(item, ResourceClaim) and item.allocation is not None:
            [request] = item.spec.requests
            assert request.exactly is not None
            for res in item.allocation.results:
                expected.append(Amounts.of({u.name: device_value(u, by_id[res.device_id], request.exactly)
                                            for u in units}))
    assert [line.amounts for line in charged.lines] == expected
    assert charged.total == Amounts.of(pair for amounts in expected for pair in amounts)
