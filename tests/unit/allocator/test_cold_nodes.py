"""A node whose view is not built yet answers "does not fit" from its slices' device count when all of its
devices are in use and its slices are plain; anything less plain goes through the view, with the same answers."""

from __future__ import annotations

from typing import Any

import pytest

from admission.core.allocator import Allocator
from admission.core.allocator.inventory import SnapshotInventory
from admission.core.features import exactly as gates_exactly
from admission.core.features import gates_for
from tests.support.builders import (
    DRIVER,
    claim,
    device,
    device_class,
    exactly,
    holding,
    node,
    requirement,
    resource_slice,
)
from tests.unit.allocator.builders import allocator, gpus

GATES = gates_exactly("1.35", ["DRAAdminAccess", "DRAPrioritizedList"])


def full(node_name: str, n: int) -> dict[str, Any]:
    return claim(f"full-{node_name}", exactly(count=n),
                 allocation=holding(*(f"{DRIVER}/{node_name}/gpu-{i}" for i in range(n))))


def views_built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    built: list[str] = []
    original = SnapshotInventory._build_view

    def counting(self: SnapshotInventory, target: Any, gates: Any) -> Any:
        built.append(target.name)
        return original(self, target, gates)
    monkeypatch.setattr(SnapshotInventory, "_build_view", counting)
    return built


@pytest.mark.parametrize("version", ["1.34", "1.35", "1.36", "1.37"])
def test_a_full_plain_node_is_refused_without_its_view(monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    # 1.36 and 1.37 have consumable capacity on: plain slices have no device that may be shared.
    made = allocator(node("n1"), node("n2"), device_class(), gpus("n1", 4), gpus("n2", 4), full("n1", 4),
                     claim("want", exactly(count=1)), gates=gates_for(version))
    want = made.snapshot.claims["default/want"]
    assert made.allocate("n2", [want]).allocatable  # the claim checks, on another node first
    built = views_built(monkeypatch)
    outcome = made.allocate("n1", [want])
    assert not outcome.allocatable and outcome.message is None and not outcome.gave_up
    assert built == []
    search = made.search(made.snapshot.node("n1"))  # the search on the built view agrees
    search.prepare([want])
    assert not search.run()


def test_a_node_with_one_free_device_still_runs_its_search(monkeypatch: pytest.MonkeyPatch) -> None:
    # Any free device is tried against the selectors, whose errors the scheduler reports: not decided by count.
    made = allocator(node("n1"), node("n2"), device_class(), gpus("n1", 4), gpus("n2", 4),
                     claim("three", exactly(count=3), allocation=holding(*(f"{DRIVER}/n1/gpu-{i}" for i in range(3)))),
                     claim("bad", exactly(count=2, selector='device.attributes["x"].missing == 1')), gates=GATES)
    bad = made.snapshot.claims["default/bad"]
    assert made.allocate("n2", [bad]).is_error
    built = views_built(monkeypatch)
    assert made.allocate("n1", [bad]).is_error
    assert built == ["n1"]


def test_admin_access_first_is_not_decided_by_count(monkeypatch: pytest.MonkeyPatch) -> None:
    manifests = (node("n1"), node("n2"), device_class(), gpus("n1", 2), gpus("n2", 2), full("n1", 2),
                 claim("admin", exactly(count=1, adminAccess=True)))
    made = allocator(*manifests, gates=GATES)
    admin = made.snapshot.claims["default/admin"]
    assert made.allocate("n2", [admin]).allocatable
    built = views_built(monkeypatch)
    kept = made.allocate("n1", [admin])
    assert built == ["n1"]  # an admin-access request is not refused by the count of devices in use
    fresh = allocator(*manifests, gates=GATES)
    assert kept.status == fresh.allocate("n1", [fresh.snapshot.claims["default/admin"]]).status


SHARED = resource_slice(None, device("net-0"), name="fabric", pool="fabric",
                        nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [
                            requirement("kubernetes.io/hostname", "In", "n1")]}]})


@pytest.mark.parametrize(("extra", "plain"), [
    ((), True),
    ((SHARED,), False),  # a slice for more than one node: its pool's validity needs the view
    ((resource_slice("n1", device("x-0"), name="n1-a", pool="split", count=2),
      resource_slice("n1", device("x-1"), name="n1-b", pool="split", count=2)), False),
    ((resource_slice("n1", device("c-0"), name="n1-c", pool="counted", counters={"set": {"memory": "1Gi"}}),),
     False),
    ((resource_slice("n1", device("i-0"), name="n1-i", pool="incomplete", count=2),), False),
    ((resource_slice("n1", device("s-0", allowMultipleAllocations=True), name="n1-s", pool="shared"),), False),
])
def test_only_plain_slices_are_counted_without_the_view(extra: tuple[dict[str, Any], ...], plain: bool) -> None:
    made = allocator(node("n1"), device_class(), gpus("n1", 2), *extra, gates=GATES)
    devices = made.snapshot.inventory.plain_devices("n1")
    assert (devices is not None) == plain
    if devices is not None:
        assert {d.id for d in devices} == {d.id for d in made.view("n1").devices}
    assert made.snapshot.inventory.plain_devices("absent") == (() if not extra or extra[0] is not SHARED else None)


def test_full_nodes_agree_with_the_views() -> None:
    made = allocator(node("n1"), node("n2"), node("n3"), node("n4"), device_class(), gpus("n1", 2), gpus("n2", 2),
                     resource_slice("n3", device("d-0"), name="n3-a", pool="dup", count=2),
                     resource_slice("n3", device("d-0"), name="n3-b", pool="dup", count=2), full("n1", 2),
                     claim("half", exactly(count=1), allocation=holding(f"{DRIVER}/n2/gpu-0")),
                     claim("dup", exactly(count=1), allocation=holding(f"{DRIVER}/dup/d-0")), gates=GATES)
    usage = made.usage
    assert made.full_nodes(usage) == {"n1"}  # n3's pool is invalid (a repeated name), n4 has no device
    fresh = Allocator(made.snapshot, GATES)
    by_views = {n for n in made.snapshot.nodes if (v := fresh.view(n)).devices and v.pools_valid
                and all(usage.is_allocated(d.id) for d in v.devices)}
    assert by_views == {"n1"}


@pytest.mark.parametrize("version", ["1.34", "1.35", "1.36", "1.37"])
def test_a_plain_view_is_the_checked_view(version: str) -> None:
    gates = gates_exactly(version, ["DRAAdminAccess", "DRAPrioritizedList", "DRADeviceBindingConditions",
                                    "DRAResourceClaimDeviceStatus"])
    made = allocator(node("n1"), node("n2"), device_class(), gpus("n1", 3),
                     resource_slice("n1", device("b-0", bindingConditions=["ready"], bindsToNode=True),
                                    device("b-1"), name="n1-bound", pool="a-bound"),
                     resource_slice("n1", device("z-0"), name="n1-z", pool="z-pool", driver="other.example.com"),
                     gates=gates)
    inventory = made.snapshot.inventory
    for name in ("n1", "n2"):
        target = made.snapshot.node(name)
        assert inventory.plain_devices(name) is not None
        assert made.view(name) == inventory._checked_view(target, gates)
