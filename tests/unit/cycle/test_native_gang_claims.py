"""A claim shared inside a native gang: the scheduler (1.35) allocates it for the first member, which waits
at the gang's Permit step, and refuses the others while the claim is being allocated, so the gang never
binds. Such a group waits with that reason (on 1.36 with another: members may be bound away from the
claim's devices); the same group outside native gangs, in a 1.37 PodGroup gang, or with the shared claim
already allocated, is admitted."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from admission.core.cycle import Admit, Wait, WaitReason, run_cycle
from admission.core.features import gates_for
from admission.core.quota import PodGroup
from tests.support.builders import Manifest
from tests.unit.cycle.cycle_builders import NS, cycle, cycle_input, gpu_claim, gpu_node, gpu_queue, member


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


def in_pod_group_gang() -> list[Manifest]:
    objects = sharing(None)
    for pod in objects:
        if pod["kind"] == "Pod":
            pod["spec"]["schedulingGroup"] = {"podGroupName": "s"}
    return objects


def decided_on(release: str, objects: list[Manifest]) -> Any:
    given = cycle_input(objects, [gpu_queue("main", 8)])
    return run_cycle(replace(given, gates=gates_for(release))).decision(f"{NS}/s")


def test_on_1_37_a_pod_group_gang_sharing_an_unallocated_claim_is_admitted() -> None:
    """kube-scheduler 1.37 gives the claim's pending allocation to the other members of the same PodGroup
    scheduling cycle and keeps them to its devices' nodes (the group-level differential on v1.37.2)."""
    assert isinstance(decided_on("1.37", in_pod_group_gang()), Admit)


def test_on_1_36_a_pod_group_gang_sharing_an_unallocated_claim_waits_saying_why() -> None:
    """kube-scheduler 1.36 gives the pending allocation to the other members but binds them anywhere: on
    v1.36.3 the differential saw a member bound on a node its shared claim's devices are not on."""
    waiting = decided_on("1.36", in_pod_group_gang())
    assert isinstance(waiting, Wait) and waiting.reason is WaitReason.UNSUPPORTED
    assert "kube-scheduler 1.36 gives the claim's pending allocation" in waiting.message
