"""The admission cycle on plain manifests: two nodes with four H100 each (8 GPUs) unless said otherwise."""

from __future__ import annotations

from fractions import Fraction

from admission.core.cycle import Admit, Wait, WaitReason
from admission.core.models import AllocationResult, DeviceAllocation
from admission.core.quantity import parse_quantity
from admission.core.quota import QueueingStrategy
from tests.support.builders import claim, cluster_queue, exactly, local_queue, model, models, quota
from tests.unit.cycle.cycle_builders import NS, cycle, gang, gpu_claim, gpu_node, gpu_queue, group_record, member

NODES = gpu_node("node-a") + gpu_node("node-b")


def devices_of(admit: Admit) -> list[str]:
    return [device for claim in admit.plan.claims for _, device in claim.devices]


def test_two_groups_compete_for_eight_gpus_the_first_takes_all() -> None:
    first = gang("first", 2, 4, created="2026-01-01T00:00:00Z")
    second = gang("second", 2, 2, created="2026-01-01T00:01:00Z")
    result = cycle(NODES + first + second, [gpu_queue("main", 16)])

    admitted = result.decision(f"{NS}/first")
    assert isinstance(admitted, Admit)
    assert admitted.charge.get("gpus") == 8
    assert sorted(admitted.placement.nodes.values()) == ["node-a", "node-b"]
    assert len(set(devices_of(admitted))) == 8
    waiting = result.decision(f"{NS}/second")
    assert isinstance(waiting, Wait) and waiting.reason is WaitReason.DEVICES
    assert "second-0" in waiting.message and "0 free" in waiting.message
    assert result.state.usage("main").get("gpus") == 8


def test_groups_that_both_fit_get_different_devices() -> None:
    result = cycle(NODES + gang("a", 2, 2) + gang("b", 2, 2), [gpu_queue("main", 16)])
    assert len(result.admitted) == 2
    devices = [d for admit in result.admitted for d in devices_of(admit)]
    assert len(devices) == len(set(devices)) == 8


def test_quota_denial_names_unit_used_nominal_and_needed() -> None:
    objects = NODES + gang("first", 1, 4) + gang("big", 2, 3, created="2026-01-01T00:00:05Z")
    result = cycle(objects, [gpu_queue("main", 8)])
    waiting = result.decision(f"{NS}/big")
    assert isinstance(waiting, Wait) and waiting.reason is WaitReason.QUOTA  # not yet: "first" holds 4 of 8
    assert "gpus" in waiting.message and "6" in waiting.message and "4" in waiting.message
    assert "ClusterQueue main" in waiting.message
    assert result.state.usage("main").get("gpus") == 4


def test_a_group_over_what_its_queue_can_ever_hold_waits_as_never_admissible_with_the_fix() -> None:
    result = cycle(NODES + gang("big", 2, 3), [gpu_queue("main", 4)])
    waiting = result.decision(f"{NS}/big")
    assert isinstance(waiting, Wait) and waiting.reason is WaitReason.NEVER_FITS
    assert waiting.message.startswith("its 2 members need gpus 6, more than ClusterQueue main can ever hold")
    assert "raise the queue's nominal quota or borrowing limit" in waiting.message
    assert result.state.usage("main").get("gpus") == 0


def test_a_pod_larger_than_any_node_waits_as_never_admissible_not_for_devices() -> None:
    waiting = cycle(NODES + gang("huge", 1, 10), [gpu_queue("main", 64)]).decision(f"{NS}/huge")
    assert isinstance(waiting, Wait) and waiting.reason is WaitReason.NEVER_FITS
    assert waiting.message.startswith(f"its pod {NS}/huge-0 fits on no set of nodes even with nothing else running")
    assert waiting.message.endswith("shrink the workload or add nodes or devices that can hold it")


def test_quota_counts_what_earlier_groups_of_the_cycle_took() -> None:
    result = cycle(NODES + gang("a", 1, 3, created="2026-01-01T00:00:00Z")
                   + gang("b", 1, 3, created="2026-01-01T00:00:01Z"), [gpu_queue("main", 5)])
    assert isinstance(result.decision(f"{NS}/a"), Admit)
    waiting = result.decision(f"{NS}/b")
    assert isinstance(waiting, Wait) and waiting.reason is WaitReason.QUOTA


def test_incomplete_group_says_how_many_members_exist() -> None:
    pods = [member("p0", "g", group_min=3), member("p1", "g", group_min=3)]
    waiting = cycle(NODES + pods, [gpu_queue("main", 8)]).decision(f"{NS}/g")
    assert isinstance(waiting, Wait) and waiting.reason is WaitReason.INCOMPLETE
    assert "2 of 3" in waiting.message


def test_podgroup_minimum_overrides_labels() -> None:
    pods = [member("p0", "g", group_min=1), member("p1", "g", group_min=1)]
    waiting = cycle(NODES + pods, [gpu_queue("main", 8)], pod_groups=[group_record("g", 3)]).decision(f"{NS}/g")
    assert isinstance(waiting, Wait) and "2 of 3" in waiting.message


def test_shared_claim_is_charged_and_allocated_once() -> None:
    pods = [gpu_claim("shared", 2), member("p0", "g", group_min=2, claim="shared"),
            member("p1", "g", group_min=2, claim="shared")]
    admitted = cycle(NODES + pods, [gpu_queue("main", 8)]).decision(f"{NS}/g")
    assert isinstance(admitted, Admit)
    assert admitted.charge.get("gpus") == 2
    assert [c.name for c in admitted.plan.claims] == ["shared"]
    assert len(set(admitted.placement.nodes.values())) == 1  # both pods where the claim's devices are


def test_higher_priority_goes_first_even_when_created_later() -> None:
    low = gang("low", 1, 4, created="2026-01-01T00:00:00Z", priority=1)
    high = gang("high", 1, 4, created="2026-01-02T00:00:00Z", priority=10)
    result = cycle(NODES + low + high, [gpu_queue("main", 4)])
    assert isinstance(result.decision(f"{NS}/high"), Admit)
    assert isinstance(result.decision(f"{NS}/low"), Wait)


def test_equal_priority_is_first_in_first_out() -> None:
    later, earlier = gang("later", 1, 4, created="2026-01-02T00:00:00Z"), gang("earlier", 1, 4)
    result = cycle(NODES + later + earlier, [gpu_queue("main", 4)])
    assert [a.group for a in result.admitted] == [f"{NS}/earlier"]


def test_cluster_queues_take_turns() -> None:
    queues = [gpu_queue("red", 8), gpu_queue("blue", 8)]
    locals_ = models(local_queue("r", "red", NS), local_queue("b", "blue", NS))
    objects = NODES[:]
    for index, (name, queue) in enumerate([("r1", "r"), ("r2", "r"), ("r3", "r"), ("b1", "b"), ("b2", "b")]):
        objects += gang(name, 1, 1, queue=queue, created=f"2026-01-01T00:00:0{index}Z")
    result = cycle(objects, queues, locals_)
    assert [a.group.split("/")[1] for a in result.admitted] == ["r1", "b1", "r2", "b2", "r3"]


def test_strict_fifo_blocks_later_groups_best_effort_does_not() -> None:
    objects = (NODES + gang("first", 1, 4) + gang("huge", 2, 3, created="2026-01-01T00:00:03Z")
               + gang("small", 1, 1, created="2026-01-01T00:00:05Z"))
    strict = cycle(objects, [gpu_queue("main", 8, QueueingStrategy.STRICT_FIFO)])
    blocked = strict.decision(f"{NS}/small")
    assert isinstance(blocked, Wait) and blocked.reason is WaitReason.BLOCKED and "huge" in blocked.message
    best_effort = cycle(objects, [gpu_queue("main", 8)])
    assert isinstance(best_effort.decision(f"{NS}/small"), Admit)


def test_promised_devices_are_not_offered_again() -> None:
    promised = AllocationResult(tuple(DeviceAllocation("gpus", "gpu.example.com", "node-a", f"gpu-{i}")
                                      for i in range(4)))
    result = cycle(NODES + gang("g", 2, 4), [gpu_queue("main", 16)], promised=(promised,))
    waiting = result.decision(f"{NS}/g")
    assert isinstance(waiting, Wait) and waiting.reason is WaitReason.DEVICES


def test_missing_queues_and_bad_labels_are_reported() -> None:
    missing = cycle(NODES + gang("g", 1, 1, queue="nope"), [gpu_queue("main", 8)]).decision(f"{NS}/g")
    assert isinstance(missing, Wait) and missing.reason is WaitReason.NO_QUEUE and f"{NS}/nope" in missing.message
    no_cq = cycle(NODES + gang("g", 1, 1), [gpu_queue("other", 8)]).decision(f"{NS}/g")
    assert isinstance(no_cq, Wait) and "ClusterQueue main" in no_cq.message
    bad = cycle([*NODES, member("p", "g", group_min="two")], [gpu_queue("main", 8)]).decision(f"{NS}/g")
    assert isinstance(bad, Wait) and bad.reason is WaitReason.INVALID and "'two'" in bad.message


def test_borrowing_from_the_cohort_is_recorded() -> None:
    queues = [gpu_queue("main", 2, cohort="pool"), gpu_queue("idle", 6, cohort="pool")]
    admitted = cycle(NODES + gang("g", 1, 4), queues).decision(f"{NS}/g")
    assert isinstance(admitted, Admit)
    assert admitted.borrowed.get("gpus") == Fraction(2)


def test_admitted_groups_are_not_decided_again() -> None:
    status = {"phase": "Admitted", "clusterQueue": "main", "charge": [{"unit": "gpus", "amount": "4"}]}
    result = cycle(NODES + gang("g", 1, 4) + gang("h", 1, 2), [gpu_queue("main", 5)],
                   pod_groups=[group_record("g", 1, status=status)])
    assert result.decision(f"{NS}/g") is None
    waiting = result.decision(f"{NS}/h")
    assert isinstance(waiting, Wait) and waiting.reason is WaitReason.QUOTA


def test_a_deleted_unit_blocks_new_admissions_and_keeps_recorded_charges() -> None:
    quoting_deleted = model(cluster_queue("main", quota("gpus", 16), quota("gpu-memory", "640Gi")))
    status = {"phase": "Admitted", "clusterQueue": "main",
              "charge": [{"unit": "gpus", "amount": "4"}, {"unit": "gpu-memory", "amount": "320Gi"}]}
    result = cycle(NODES + gang("g", 1, 4) + gang("h", 1, 2), [quoting_deleted],
                   pod_groups=[group_record("g", 1, status=status)])
    waiting = result.decision(f"{NS}/h")
    assert isinstance(waiting, Wait) and waiting.reason is WaitReason.NO_UNIT
    assert "QuotaUnit gpu-memory, which does not exist" in waiting.message
    assert result.state.usage("main").get("gpu-memory") == parse_quantity("320Gi").value
    assert result.state.usage("main").get("gpus") == 4


def test_a_group_whose_search_gives_up_waits_for_devices_not_as_never_admissible() -> None:
    # Four of 40 GPUs, then a request no device matches: too many combinations to try, so the allocator gives up
    # on the empty cluster too; that proves nothing about the group, which waits and is tried again.
    never = exactly("none", selector='device.driver == "other.example.com"')
    objects = [*gpu_node("node-a", gpus=40), claim("odd", exactly("gpus", count=4), never, namespace=NS),
               member("odd-0", "odd", claim="odd")]
    waiting = cycle(objects, [gpu_queue("main", 64)]).decision(f"{NS}/odd")
    assert isinstance(waiting, Wait) and waiting.reason is WaitReason.DEVICES
    assert "whether it fits is not known, it waits and is tried again (node node-a: " in waiting.message
    assert "device checks" in waiting.message or "filter timeout" in waiting.message
