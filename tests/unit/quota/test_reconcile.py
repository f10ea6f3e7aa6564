"""Reconciliation of recorded charges with real allocations, and worst case >= any real outcome."""

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from admission.core.quota import Amounts, charge_status, reconcile, reconciliation_status
from tests.support.builders import CREATED, claim, device_class, exactly, gpu, pod, resource_slice, result
from tests.unit.quota.charging_harness import NS, charge

GI = 2**30
MODELS = [("H100", "80Gi"), ("A100", "40Gi"), ("A100", "80Gi")]


def cluster(models: list[int]) -> list[dict[str, Any]]:
    devices = [gpu(f"gpu-{i}", *MODELS[m]) for i, m in enumerate(models)]
    return [device_class("gpu", created=CREATED), resource_slice("node-a", *devices)]


def test_differences_are_reported_per_unit_and_none_dropped() -> None:
    objects = [*cluster([0, 1]),
               claim("c", exactly("gpu"), namespace=NS, allocation=[result("gpu", "gpu-1", "node-a")]),
               pod("p0", NS, claims={"g": "c"}, requests={"cpu": "1"})]
    recorded = charge([*objects[:-2], claim("c", exactly("gpu"), namespace=NS), objects[-1]]).total
    real = charge(objects, allocated_only=True)
    outcome = reconcile(recorded, real)
    # Charged the worst case (an H100: 80Gi, weight 1, one H100); got an A100 (40Gi, weight 0.5).
    assert {d.unit: (d.charged, d.allocated) for d in outcome.differences} == {
        "gpu-memory": (80 * GI, 40 * GI), "gpu-weight": (1, 0.5), "h100s": (1, 0)}
    assert outcome.complete and not outcome.agrees
    assert reconciliation_status(outcome)[0] == {"unit": "gpu-memory", "charged": "80Gi", "allocated": "40Gi"}
    assert "gpu-memory: charged 80Gi, allocated 40Gi" in outcome.describe()


def test_unallocated_claims_keep_the_reconciliation_open() -> None:
    objects = [*cluster([0]), claim("c", exactly("gpu"), namespace=NS), pod("p0", NS, claims={"g": "c"})]
    outcome = reconcile(charge(objects).total, charge(objects, allocated_only=True))
    assert outcome.unallocated == ("ResourceClaim ns/c",)
    assert "not allocated yet: ResourceClaim ns/c" in outcome.describe()


def test_matching_charge_agrees() -> None:
    objects = [*cluster([0]), claim("c", exactly("gpu"), namespace=NS, allocation=[result("gpu", "gpu-0", "node-a")]),
               pod("p0", NS, claims={"g": "c"})]
    recorded = charge(objects).total
    assert reconcile(recorded, charge(objects, allocated_only=True)).agrees
    assert charge_status(recorded)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 2), min_size=1, max_size=6), st.data())
def test_the_worst_case_is_never_below_a_real_allocation(models: list[int], data: st.DataObject) -> None:
    count = data.draw(st.integers(1, len(models)))
    picked = data.draw(st.lists(st.integers(0, len(models) - 1), min_size=count, max_size=count, unique=True))
    estimate = charge([*cluster(models), claim("c", exactly("gpu", count=count), namespace=NS),
                       pod("p0", NS, claims={"g": "c"})])
    allocated = charge([*cluster(models), claim("c", exactly("gpu", count=count), namespace=NS,
                                                allocation=[result("gpu", f"gpu-{i}", "node-a") for i in picked]),
                        pod("p0", NS, claims={"g": "c"})])
    for unit in set(estimate.total.units) | set(allocated.total.units):
        assert allocated.total.get(unit) <= estimate.total.get(unit)
    # The estimate is tight: the most expensive devices are a possible allocation.
    assert estimate.total.get("gpus") == count
    assert isinstance(estimate.total, Amounts)
