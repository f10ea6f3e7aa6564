"""After admission: phases from pods, accounting rebuilt from PodGroups, promised devices, releases to finish."""

from __future__ import annotations

from admission.core.cycle import (
    Admit,
    admitted_status,
    next_phase,
    planned_allocation,
    promised_devices,
    rebuild_state,
    run_cycle,
    unreleased_members,
)
from admission.core.quota import Phase, PlannedClaim, cluster_queue_status
from tests.support.builders import claim, exactly, model, pod, pod_group, result
from tests.unit.cycle.cycle_builders import (
    NS,
    cycle,
    cycle_input,
    gang,
    gpu_node,
    gpu_queue,
    group_record,
    groups_of,
    member,
)

NODES = gpu_node("node-a") + gpu_node("node-b")


def admitted(name: str, phase: str = "Admitted", pods: tuple[str, ...] = ("g-0", "g-1"),
             claims: tuple[tuple[str, tuple[str, ...]], ...] = ()) -> dict[str, object]:
    return {"phase": phase, "clusterQueue": "main", "charge": [{"unit": "gpus", "amount": "4"}],
            "plan": {"pods": [{"name": p, "node": "node-a"} for p in pods],
                     "claims": [{"name": c, "devices": [{"request": "gpus", "device": d} for d in devices]}
                                for c, devices in claims]}}


def test_recorded_admission_round_trips_through_podgroup_status() -> None:
    result = cycle(NODES + gang("g", 2, 2), [gpu_queue("main", 8)])
    [admit] = result.admitted
    status = admitted_status(admit, 2, "2026-01-01T00:00:00Z")
    parsed = model(pod_group("g", 2, "lq", namespace=NS, status=status))
    assert parsed.phase is Phase.ADMITTED and parsed.charge == admit.charge and parsed.plan == admit.plan
    assert {name for name, _ in parsed.plan.nodes} == {"g-0", "g-1"}
    assert [c.name for c in parsed.plan.claims] == ["g-0/gpu", "g-1/gpu"]


def test_restart_rebuilds_usage_and_holds_back_planned_devices() -> None:
    first = cycle(NODES + gang("g", 2, 4), [gpu_queue("main", 16)])
    [admit] = first.admitted
    record = model(pod_group("g", 2, "lq", namespace=NS, status=admitted_status(admit, 2, "2026-01-01T00:00:00Z")))
    objects = NODES + gang("g", 2, 4) + gang("h", 1, 1)
    groups = groups_of(objects, [record])
    state = rebuild_state([gpu_queue("main", 16)], groups)
    assert state.usage("main").get("gpus") == 8 and state.reserved["main"].get("gpus") == 8
    promised = promised_devices(groups, {})
    assert sorted(r.device_id for a in promised for r in a.results) == sorted(
        d for c in admit.plan.claims for _, d in c.devices)
    again = run_cycle(cycle_input(objects, [gpu_queue("main", 16)], pod_groups=[record], promised=promised))
    waiting = again.decision(f"{NS}/h")
    assert not isinstance(waiting, Admit), "all 8 GPUs are promised to g"
    assert unreleased_members(next(v for v in groups if v.name == "g")) == ("g-0", "g-1")


def test_phases_follow_the_pods() -> None:
    group = group_record("g", 2, status=admitted("g"))
    bound = [member("g-0", "g", gated=False, node="node-a"), member("g-1", "g", gated=False, node="node-a")]
    half = [bound[0], member("g-1", "g", gated=False)]
    done = [member("g-0", "g", gated=False, node="node-a", phase="Succeeded"),
            member("g-1", "g", gated=False, node="node-a", phase="Failed")]
    assert next_phase(groups_of(half, [group])[0]) is None
    assert next_phase(groups_of(bound, [group])[0]) is Phase.RUNNING
    assert next_phase(groups_of(done, [group])[0]) is Phase.FINISHED
    running = group_record("g", 2, status=admitted("g", "Running"))
    assert next_phase(groups_of(bound, [running])[0]) is None
    assert next_phase(groups_of([], [running])[0]) is Phase.FINISHED


def test_finished_groups_no_longer_count() -> None:
    groups = groups_of([], [group_record("g", 1, status=admitted("g", "Finished"))])
    assert rebuild_state([gpu_queue("main", 8)], groups).usage("main").get("gpus") == 0


def test_running_groups_count_as_used_and_show_in_queue_status() -> None:
    groups = groups_of([], [group_record("g", 1, status=admitted("g", "Running"))])
    state = rebuild_state([gpu_queue("main", 8)], groups)
    status = cluster_queue_status(state, "main", pending_groups=2)
    assert status["summary"] == "gpus 4/8"
    assert status["quotas"] == [{"unit": "gpus", "used": "4", "reserved": "0", "borrowed": "0", "nominal": "8"}]
    assert (status["pendingGroups"], status["admittedGroups"]) == (2, 1)


def test_planned_device_ids_keep_pool_names_with_slashes() -> None:
    allocation = planned_allocation(PlannedClaim("c", (("gpus", "gpu.example.com/rack-1/node-a/gpu-3"),)))
    [result] = allocation.results
    assert (result.driver, result.pool, result.device) == ("gpu.example.com", "rack-1/node-a", "gpu-3")


def test_allocated_claims_are_not_promised_again() -> None:
    shared = claim("shared", exactly("gpus"), namespace=NS, allocation=[result("gpus", "gpu-0", "node-a")])
    record = group_record("g", 1, status=admitted("g", claims=(("shared", ("gpu.example.com/node-a/gpu-0",)),)))
    snapshot = cycle_input([shared], [gpu_queue("main", 8)]).snapshot
    assert promised_devices(groups_of([], [record]), snapshot.claims) == ()
    assert len(promised_devices(groups_of([], [record]), {})) == 1


def test_running_groups_hold_their_plan_until_the_allocation_is_seen() -> None:
    """The pod watch can report a member bound before the claim watch reports its allocation: the group is
    Running by then, and its planned devices must not look free in between."""
    shared = claim("shared", exactly("gpus"), namespace=NS, allocation=[result("gpus", "gpu-0", "node-a")])
    planned = (("shared", ("gpu.example.com/node-a/gpu-0",)),)
    running = group_record("g", 1, status=admitted("g", "Running", claims=planned))
    unallocated = claim("shared", exactly("gpus"), namespace=NS)
    waiting = cycle_input([unallocated], [gpu_queue("main", 8)]).snapshot
    assert len(promised_devices(groups_of([], [running]), waiting.claims)) == 1
    snapshot = cycle_input([shared], [gpu_queue("main", 8)]).snapshot
    assert promised_devices(groups_of([], [running]), snapshot.claims) == ()
    assert promised_devices(groups_of([], [running]), {}) == (), "a claim gone holds nothing once running"
    finished = group_record("g", 1, status=admitted("g", "Finished", claims=planned))
    assert promised_devices(groups_of([], [finished]), {}) == ()


def test_running_members_that_finished_or_left_hold_no_promise() -> None:
    planned = (("g-0/gpu", ("gpu.example.com/node-a/gpu-0",)), ("g-1/gpu", ("gpu.example.com/node-a/gpu-1",)))
    running = group_record("g", 2, status=admitted("g", "Running", claims=planned))
    pods = [pod(f"g-{i}", NS, queue="lq", group="g", group_min=2, gated=False, node="node-a", phase=phase,
                templates={"gpu": "g-gpus"}, claim_statuses={"gpu": f"g-{i}-gpu"})
            for i, phase in enumerate(("Succeeded", "Running"))]
    claims = [claim("g-0-gpu", exactly("gpus"), namespace=NS), claim("g-1-gpu", exactly("gpus"), namespace=NS)]
    snapshot = cycle_input(pods + claims, [gpu_queue("main", 8)]).snapshot
    [promise] = promised_devices(groups_of(pods, [running]), snapshot.claims)
    assert [r.device for r in promise.results] == ["gpu-1"]
