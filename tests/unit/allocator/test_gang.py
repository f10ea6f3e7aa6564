"""Gang placement: pods one after another, shared claims once, promised devices respected."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from admission.core.allocator import GangMember, Outcome, Usage, place_gang
from admission.core.models import AllocationResult, DeviceAllocation, Node, ResourceClaim, parse_object
from tests.support.builders import DRIVER, claim, device_class, exactly, node
from tests.unit.allocator.builders import allocator, gpus


def claim_model(name: str, count: int) -> ResourceClaim:
    model = parse_object(claim(name, exactly(count=count)))
    assert isinstance(model, ResourceClaim)
    return model


def test_every_pod_gets_its_own_node_when_each_needs_a_whole_node() -> None:
    alloc = allocator(*(node(f"n{i}") for i in range(4)), device_class(), *(gpus(f"n{i}", 4) for i in range(4)))
    members = [GangMember(f"default/p{i}", (claim_model(f"p{i}-gpu", 4),)) for i in range(3)]
    plan = place_gang(alloc, members)
    assert plan.feasible
    assert len(set(plan.placements.values())) == 3
    taken = [r.device_id for a in plan.allocations.values() for r in a.results]
    assert len(taken) == len(set(taken)) == 12


def test_small_pods_are_packed_onto_the_first_node() -> None:
    alloc = allocator(node("n0"), node("n1"), device_class(), gpus("n0", 4), gpus("n1", 4))
    members = [GangMember(f"default/p{i}", (claim_model(f"p{i}-gpu", 2),)) for i in range(2)]
    assert set(place_gang(alloc, members).placements.values()) == {"n0"}


def test_a_gang_that_does_not_fit_says_which_pod_and_why() -> None:
    alloc = allocator(node("n0"), node("n1"), device_class(), gpus("n0", 4), gpus("n1", 4))
    members = [GangMember(f"default/p{i}", (claim_model(f"p{i}-gpu", 4),)) for i in range(3)]
    plan = place_gang(alloc, members)
    assert not plan.feasible
    assert plan.failed_member == "default/p2"
    assert plan.explanation is not None
    assert all(r.free == 0 for r in plan.explanation.requests)
    assert "p2" in (plan.reason or "")


def test_a_shared_claim_is_allocated_once_and_pulls_its_users_to_the_same_node() -> None:
    alloc = allocator(node("n0"), node("n1"), device_class(), gpus("n0", 1), gpus("n1", 1))
    shared = claim_model("shared", 1)
    members = [GangMember("default/a", (shared,)), GangMember("default/b", (shared,))]
    plan = place_gang(alloc, members)
    assert plan.feasible
    assert plan.placements["default/a"] == plan.placements["default/b"]
    assert len(plan.allocations) == 1


def test_devices_promised_to_other_groups_are_taken() -> None:
    alloc = allocator(node("n0"), device_class(), gpus("n0", 2))
    promised = AllocationResult((DeviceAllocation("gpu", DRIVER, "n0", "gpu-0"),
                                 DeviceAllocation("gpu", DRIVER, "n0", "gpu-1")))
    members = [GangMember("default/a", (claim_model("a-gpu", 1),))]
    assert place_gang(alloc, members).feasible
    assert not place_gang(alloc, members, promised=[promised]).feasible


def test_backtracking_moves_an_earlier_pod_when_a_later_one_only_fits_elsewhere() -> None:
    # p0 fits anywhere; p1 may only use n0, which p0 would take first.
    alloc = allocator(node("n0"), node("n1"), device_class(), gpus("n0", 2), gpus("n1", 2))
    members = [GangMember("default/p0", (claim_model("p0-gpu", 2),)),
               GangMember("default/p1", (claim_model("p1-gpu", 2),), nodes=("n0",))]
    plan = place_gang(alloc, members)
    assert plan.feasible
    assert plan.placements == {"default/p0": "n1", "default/p1": "n0"}
    assert not place_gang(alloc, members, max_backtracks=0).feasible


def test_a_member_does_not_try_the_node_the_member_before_it_filled(monkeypatch: pytest.MonkeyPatch) -> None:
    alloc = allocator(*(node(f"n{i}") for i in range(4)), device_class(), *(gpus(f"n{i}", 4) for i in range(4)))
    members = [GangMember(f"default/p{i}", (claim_model(f"p{i}-gpu", 4),)) for i in range(4)]
    tried: list[str] = []
    allocate = alloc.allocate

    def recorded(target: Node | str, claims: Sequence[ResourceClaim], usage: Usage | None = None) -> Outcome:
        tried.append(target if isinstance(target, str) else target.name)
        return allocate(target, claims, usage)

    monkeypatch.setattr(alloc, "allocate", recorded)
    plan = place_gang(alloc, members)
    assert dict(plan.placements) == {f"default/p{i}": f"n{i}" for i in range(4)}
    assert tried == ["n0", "n1", "n2", "n3"]  # one allocation per member, none on a node left full
