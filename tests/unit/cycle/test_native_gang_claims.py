"""A claim shared inside a native gang: the scheduler (1.35) allocates it for the first member, which waits
at the gang's Permit step, and refuses the others while the claim is being allocated, so the gang never
binds. Such a group waits with that reason; the same group outside native gangs, or with the shared claim
already allocated, is admitted."""

from __future__ import annotations

from typing import Any

from admission.core.cycle import Admit, Wait, WaitReason
from admission.core.quota import PodGroup
from tests.support.builders import Manifest
from tests.unit.cycle.cycle_builders import NS, cycle, gpu_claim, gpu_node, gpu_queue, member


def sharing(workload: str | None) -> list[Manifest]:
    members = [member(f"s-{i}", "s", group_min=2, claim="team-gpus") for i in range(2)]
    if workload:
        for pod in members:
            pod["spec"]["workloadRef"] = {"name": workload, "podGroup": "members"}
    return [*gpu_node("node-a"), gpu_claim("team-gpus", 2), *members]


def decided(objects: list[Manifest], pod_groups: tuple[PodGroup, ...] = ()) -> Any:
    return cycle(objects, [gpu_queue("main", 8)], pod_groups=pod_groups).decision(f"{NS}/s")


def test_members_of_a_native_gang_sharing_an_unallocated_claim_wait_saying_why() -> None:
    waiting = decided(sharing("s"))
    assert isinstance(waiting, Wait) and waiting.reason is WaitReason.UNSUPPORTED
    assert "pods s-0, s-1 share ResourceClaim team/team-gpus" in waiting.message
    assert "native gang s" in waiting.message


def test_the_same_group_outside_native_gangs_is_admitted() -> None:
    assert isinstance(decided(sharing(None)), Admit)


def test_a_shared_claim_already_allocated_does_not_hold_the_gang_back() -> None:
    objects = sharing("s")
    shared = next(o for o in objects if o["kind"] == "ResourceClaim")
    shared["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpus", "driver": "gpu.example.com", "pool": "node-a", "device": f"gpu-{i}"} for i in range(2)]}}}
    admitted = decided(objects)
    assert isinstance(admitted, Admit), admitted
    assert sorted(admitted.placement.nodes.values()) == ["node-a", "node-a"]
