"""What changes between the releases draq models: 1.37's gate defaults, locked gates, the gates draq
does not model, and where a pool's counter sets come from."""

from __future__ import annotations

import pytest

from admission.core import features
from admission.core.allocator import Status
from admission.core.errors import InvalidInput
from tests.support.builders import Manifest, claim, device, device_class, node, resource_slice, result
from tests.unit.allocator.builders import allocator


def test_1_37_defaults_follow_its_versioned_gate_specs() -> None:
    gates = features.gates_for("v1.37.2")
    assert gates.minor == 37
    for on in ("DRADeviceTaints", "DRADeviceTaintRules", "DRAExtendedResource", "DRAPartitionableDevices",
               "DRAConsumableCapacity", "DRADeviceBindingConditions", "DRAFractionalCapacityRange"):
        assert on in gates, on
    for off in ("DRAListTypeAttributes", "DRADeviceCompatibilityGroups", "DRADerivedAttributes",
                "DRAOptionalNodeOperations"):
        assert off not in gates, off


def test_1_36_keeps_device_taint_rules_off_and_has_no_1_37_gates() -> None:
    gates = features.gates_for("1.36")
    assert "DRADeviceTaintRules" not in gates
    assert "DRADeviceTaints" in gates
    with pytest.raises(InvalidInput, match=r"DRADerivedAttributes.*not a gate of Kubernetes 1\.36"):
        features.gates_for("1.36", {"DRADerivedAttributes": True})


@pytest.mark.parametrize(("version", "gate"), [("1.37", "DRAPrioritizedList"), ("1.37", "DRAExtendedResource"),
                                               ("1.36", "DRAAdminAccess")])
def test_turning_off_a_locked_ga_gate_is_refused(version: str, gate: str) -> None:
    with pytest.raises(InvalidInput, match=f"{gate}.*GA and locked to true in {version}"):
        features.gates_for(version, {gate: False})
    assert gate in features.gates_for(version, {gate: True})


def test_1_35_may_still_turn_off_the_prioritized_list() -> None:
    assert "DRAPrioritizedList" not in features.gates_for("1.35", {"DRAPrioritizedList": False})


def test_every_1_37_gate_is_modelled() -> None:
    everything = features.gates_for("1.37", {g: True for g in features.KNOWN_GATES
                                             if g not in ("DRAAdminAccess", "DRAPrioritizedList", "DRAExtendedResource",
                                                          "DRAResourceClaimDeviceStatus")})
    assert "DRADerivedAttributes" in everything
    assert everything.unmodelled() == ()
    assert features.gates_for("1.36").unmodelled() == ()


def test_unmodelled_gates_are_named_with_their_release(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(features.UNMODELLED_GATES, "DRAListTypeAttributes", "lists are not compared")
    assert features.gates_for("1.37").unmodelled() == ()
    notes = features.gates_for("1.37", {"DRAListTypeAttributes": True, "DRAOptionalNodeOperations": True}).unmodelled()
    assert notes == ("DRAListTypeAttributes is on (1.37): lists are not compared; answers that depend on it are "
                     "not the scheduler's",)


def _pool_with_counters_on_another_node() -> list[Manifest]:
    """Pool `shared` of two slices: the partition on node `b`, its counter set in a slice bound to node `a`."""
    part = device("part-0", consumes={"gpu-0": {"memory": "40Gi"}})
    return [node("a"), node("b"), device_class(),
            resource_slice("b", part, name="shared-devices", pool="shared", count=2),
            resource_slice("a", name="shared-counters", pool="shared", count=2, counters={"gpu-0": {"memory": "80Gi"}}),
            claim("c")]


@pytest.mark.parametrize("version", ["1.35", "1.36", "1.37"])
def test_counter_sets_bound_to_another_node_still_serve_the_pool(version: str) -> None:
    gates = features.gates_for(version, {"DRAPartitionableDevices": True})
    alloc = allocator(*_pool_with_counters_on_another_node(), gates=gates)
    snapshot = alloc.snapshot
    outcome = alloc.allocate(snapshot.node("b"), [snapshot.claims["default/c"]])
    assert outcome.status is Status.ALLOCATED, outcome.message


@pytest.mark.parametrize(("version", "status"), [("1.36", Status.UNFIT), ("1.37", Status.ALLOCATED)])
def test_a_share_that_took_no_capacity_holds_the_counters_once_from_1_37(version: str, status: Status) -> None:
    """A shareable partition using every counter of its set, shared once without capacity: 1.36 checks its
    counters again for the next share (and finds them taken); 1.37 counts the device as in use and does not."""
    part = device("part-0", consumes={"gpu-0": {"memory": "80Gi"}}, allowMultipleAllocations=True)
    taken = result("gpu", "part-0", "n1", shareID="00000000-0000-0000-0000-000000000001")
    alloc = allocator(node("n1"), device_class(),
                      resource_slice("n1", part, name="n1-parts", count=2),
                      resource_slice("n1", name="n1-counters", count=2, counters={"gpu-0": {"memory": "80Gi"}}),
                      claim("held", allocation=[taken]), claim("c"),
                      gates=features.gates_for(version))
    snapshot = alloc.snapshot
    outcome = alloc.allocate(snapshot.node("n1"), [snapshot.claims["default/c"]])
    assert outcome.status is status, outcome.message


@pytest.mark.parametrize(("version", "status"), [
    ("1.35", Status.UNFIT), ("1.36", Status.ALLOCATED), ("1.37", Status.ALLOCATED)])
def test_a_device_refused_for_its_taint_gives_its_counters_back_from_1_36_3(version: str, status: Status) -> None:
    """Two partitions of one GPU, each using all its memory; the first is tainted. 1.35 keeps the
    counters the tainted one took, so the second does not fit; v1.36.3 and 1.37 roll them back and take it."""
    tainted = device("part-a", consumes={"gpu-0": {"memory": "80Gi"}},
                     taints=[{"key": "broken", "effect": "NoSchedule"}])
    clean = device("part-b", consumes={"gpu-0": {"memory": "80Gi"}})
    alloc = allocator(node("n1"), device_class(),
                      resource_slice("n1", tainted, clean, name="n1-parts", count=2),
                      resource_slice("n1", name="n1-counters", count=2, counters={"gpu-0": {"memory": "80Gi"}}),
                      claim("c"), gates=features.gates_for(version, {"DRAPartitionableDevices": True,
                                                                      "DRADeviceTaints": True}))
    snapshot = alloc.snapshot
    outcome = alloc.allocate(snapshot.node("n1"), [snapshot.claims["default/c"]])
    assert outcome.status is status, outcome.message
