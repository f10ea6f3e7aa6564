"""Single-node allocation: what fits, what does not, and which devices first fit picks."""

from __future__ import annotations

import time
from typing import Any

from admission.core import features
from admission.core.allocator import DEFAULT_BUDGET, Allocator, Status
from tests.support.builders import (
    DRIVER,
    all_devices,
    claim,
    device,
    device_class,
    exactly,
    first_available,
    holding,
    node,
    resource_slice,
)
from tests.unit.allocator.builders import allocator, devices_of, gpus


def claims_of(alloc, *names):  # type: ignore[no-untyped-def]
    return [alloc.snapshot.claims[f"default/{n}"] for n in names]


def test_first_fit_takes_devices_in_slice_order() -> None:
    alloc = allocator(node("n1"), device_class(), gpus("n1", 4), claim("c", exactly(count=2)))
    outcome = alloc.allocate("n1", claims_of(alloc, "c"))
    assert outcome.status is Status.ALLOCATED
    assert devices_of(outcome, "default/c") == {"gpu": [f"{DRIVER}/n1/gpu-0", f"{DRIVER}/n1/gpu-1"]}
    assert outcome.allocations["default/c"].node_selector is not None


def test_devices_held_by_allocated_claims_are_not_handed_out_again() -> None:
    alloc = allocator(node("n1"), device_class(), gpus("n1", 2), claim("c", exactly(count=1)),
                      claim("old", allocation=holding(f"{DRIVER}/n1/gpu-0")))
    outcome = alloc.allocate("n1", claims_of(alloc, "c"))
    assert devices_of(outcome, "default/c") == {"gpu": [f"{DRIVER}/n1/gpu-1"]}
    two = allocator(node("n1"), device_class(), gpus("n1", 2), claim("c", exactly(count=2)),
                    claim("old", allocation=holding(f"{DRIVER}/n1/gpu-0")))
    assert two.allocate("n1", claims_of(two, "c")).status is Status.UNFIT


def test_claims_allocated_together_do_not_share_devices() -> None:
    alloc = allocator(node("n1"), device_class(), gpus("n1", 3), claim("a", exactly(count=2)),
                      claim("b", exactly(count=2)))
    assert alloc.allocate("n1", claims_of(alloc, "a")).allocatable
    assert alloc.allocate("n1", claims_of(alloc, "a", "b")).status is Status.UNFIT


def test_devices_of_other_nodes_are_invisible() -> None:
    alloc = allocator(node("n1"), node("n2"), device_class(), gpus("n2", 8), claim("c"))
    assert alloc.allocate("n1", claims_of(alloc, "c")).status is Status.UNFIT
    assert alloc.allocate("n2", claims_of(alloc, "c")).allocatable


def test_match_attribute_across_requests_backtracks_to_a_matching_pair() -> None:
    devices = [device("gpu-0", {"model": "A"}), device("gpu-1", {"model": "B"}), device("gpu-2", {"model": "B"})]
    alloc = allocator(node("n1"), device_class(), resource_slice("n1", *devices, name="s"),
                      claim("c", exactly("x", selector=f'device.attributes["{DRIVER}"].model == "A" || true'),
                            exactly("y", selector=f'device.attributes["{DRIVER}"].model == "B"'),
                            constraints=[{"matchAttribute": f"{DRIVER}/model"}]))
    outcome = alloc.allocate("n1", claims_of(alloc, "c"))
    # x first takes gpu-0 (model A); y finds no model A, so x moves on to gpu-1.
    assert devices_of(outcome, "default/c") == {"x": [f"{DRIVER}/n1/gpu-1"], "y": [f"{DRIVER}/n1/gpu-2"]}


def test_distinct_attribute_needs_different_values() -> None:
    devices = [device("gpu-0", {"numa": 0}), device("gpu-1", {"numa": 0}), device("gpu-2", {"numa": 1})]
    alloc = allocator(node("n1"), device_class(), resource_slice("n1", *devices, name="s"),
                      claim("c", exactly(count=2), constraints=[{"distinctAttribute": f"{DRIVER}/numa"}]),
                      gates=features.exactly("1.36", ["DRAConsumableCapacity"]))
    outcome = alloc.allocate("n1", claims_of(alloc, "c"))
    assert devices_of(outcome, "default/c") == {"gpu": [f"{DRIVER}/n1/gpu-0", f"{DRIVER}/n1/gpu-2"]}


def test_distinct_attribute_compares_with_every_picked_device_from_1_37() -> None:
    # Up to 1.36 the constraint remembers one value per request, the last device's: a third device only
    # has to differ from the second. 1.37 compares it with every device picked so far.
    devices = [device("gpu-0", {"numa": 0}), device("gpu-1", {"numa": 1}), device("gpu-2", {"numa": 0})]
    objects = (node("n1"), device_class(), resource_slice("n1", *devices, name="s"),
               claim("c", exactly(count=3), constraints=[{"distinctAttribute": f"{DRIVER}/numa"}]))
    older = allocator(*objects, gates=features.exactly("1.36", ["DRAConsumableCapacity"]))
    assert devices_of(older.allocate("n1", claims_of(older, "c")), "default/c") == {
        "gpu": [f"{DRIVER}/n1/gpu-0", f"{DRIVER}/n1/gpu-1", f"{DRIVER}/n1/gpu-2"]}
    newer = allocator(*objects, gates=features.exactly("1.37", ["DRAConsumableCapacity"]))
    assert newer.allocate("n1", claims_of(newer, "c")).status is Status.UNFIT


def test_distinct_attribute_is_an_empty_constraint_without_consumable_capacity() -> None:
    # Only the allocator variants that do consumable capacity know distinctAttribute (the API server
    # drops the field otherwise); the others see an empty constraint.
    alloc = allocator(node("n1"), device_class(), gpus("n1", 2),
                      claim("c", exactly(count=2), constraints=[{"distinctAttribute": f"{DRIVER}/numa"}]))
    outcome = alloc.allocate("n1", claims_of(alloc, "c"))
    assert outcome.status is Status.ERROR
    assert "constraint #0: empty constraint" in (outcome.message or "")


def test_first_available_takes_the_first_subrequest_that_completes_the_whole_search() -> None:
    big, small = exactly("big", count=2), exactly("small", count=1)
    alloc = allocator(node("n1"), device_class(), gpus("n1", 3),
                      claim("a", first_available("r", big, small)), claim("b", exactly(count=2)),
                      gates=features.exactly("1.36", ["DRAPrioritizedList"]))
    outcome = alloc.allocate("n1", claims_of(alloc, "a", "b"))
    assert devices_of(outcome, "default/a") == {"r/small": [f"{DRIVER}/n1/gpu-0"]}
    assert devices_of(outcome, "default/b") == {"gpu": [f"{DRIVER}/n1/gpu-1", f"{DRIVER}/n1/gpu-2"]}


def test_first_available_needs_the_prioritized_list_gate() -> None:
    alloc = allocator(node("n1"), device_class(), gpus("n1", 1), claim("c", first_available("r", exactly("s"))),
                      gates=features.exactly("1.35", []))
    outcome = alloc.allocate("n1", claims_of(alloc, "c"))
    assert outcome.status is Status.ERROR
    assert "DRAPrioritizedList feature is disabled" in (outcome.message or "")


def test_all_mode_fails_when_one_matching_device_is_in_use() -> None:
    manifests = [node("n1"), device_class(), gpus("n1", 3), claim("c", all_devices())]
    free = allocator(*manifests)
    outcome = free.allocate("n1", claims_of(free, "c"))
    assert len(devices_of(outcome, "default/c")["gpu"]) == 3
    busy = allocator(*manifests, claim("old", allocation=holding(f"{DRIVER}/n1/gpu-2")))
    assert busy.allocate("n1", claims_of(busy, "c")).status is Status.UNFIT


def test_admin_access_may_use_devices_in_use_but_needs_the_gate() -> None:
    manifests = [node("n1"), device_class(), gpus("n1", 1), claim("c", exactly(adminAccess=True)),
                 claim("old", allocation=holding(f"{DRIVER}/n1/gpu-0"))]
    on = allocator(*manifests, gates=features.exactly("1.36", ["DRAAdminAccess"]))
    outcome = on.allocate("n1", claims_of(on, "c"))
    assert outcome.allocatable and outcome.allocations["default/c"].results[0].admin_access is True
    off = allocator(*manifests, gates=features.exactly("1.36", []))
    assert off.allocate("n1", claims_of(off, "c")).status is Status.ERROR


def test_missing_device_class_is_an_error_naming_the_class() -> None:
    alloc = allocator(node("n1"), gpus("n1", 1), claim("c", exactly(device_class="nope")))
    outcome = alloc.allocate("n1", claims_of(alloc, "c"))
    assert outcome.status is Status.ERROR and outcome.missing_class == "nope"
    assert "claim default/c, request gpu: could not retrieve device class nope" in (outcome.message or "")


def test_missing_class_of_a_later_alternative_is_reported_before_anything_else() -> None:
    # The scheduler checks every class of every pending claim first, also of alternatives that the
    # search would never reach, and before a CEL error of another claim.
    alloc = allocator(node("n1"), device_class(expression="device.nope("), gpus("n1", 1), claim("a"),
                      claim("b", first_available("r", exactly("s0"), exactly("s1", device_class="nope"))),
                      gates=features.exactly("1.36", ["DRAPrioritizedList"]))
    outcome = alloc.allocate("n1", claims_of(alloc, "a", "b"))
    assert outcome.status is Status.ERROR and outcome.missing_class == "nope"
    assert "request r/s1: could not retrieve device class nope" in (outcome.message or "")


def test_a_cel_compile_error_is_a_hard_error() -> None:
    alloc = allocator(node("n1"), device_class(expression="device.nope("), gpus("n1", 1), claim("c"))
    outcome = alloc.allocate("n1", claims_of(alloc, "c"))
    assert outcome.status is Status.ERROR and "class gpu: selector #0: CEL compile error" in (outcome.message or "")


def test_a_cel_runtime_error_is_a_hard_error() -> None:
    expression = f'device.attributes["{DRIVER}"].missing == 1'
    alloc = allocator(node("n1"), device_class(expression=expression), gpus("n1", 1), claim("c"))
    outcome = alloc.allocate("n1", claims_of(alloc, "c"))
    assert outcome.status is Status.ERROR and "CEL runtime error" in (outcome.message or "")


def test_incomplete_pool_hides_devices_and_makes_all_mode_an_error() -> None:
    part = resource_slice("n1", device("gpu-0"), name="s1", pool="p", count=2)
    exact = allocator(node("n1"), device_class(), part, claim("c"))
    assert exact.allocate("n1", claims_of(exact, "c")).status is Status.UNFIT
    every = allocator(node("n1"), device_class(), part, claim("c", all_devices()))
    outcome = every.allocate("n1", claims_of(every, "c"))
    assert outcome.status is Status.ERROR and "is currently being updated" in (outcome.message or "")


def test_newer_generation_replaces_older_slices() -> None:
    old = resource_slice("n1", device("gpu-0"), device("gpu-1"), name="old", pool="p", generation=1)
    new = resource_slice("n1", device("gpu-9"), name="new", pool="p", generation=2)
    alloc = allocator(node("n1"), device_class(), old, new, claim("c"))
    assert devices_of(alloc.allocate("n1", claims_of(alloc, "c")), "default/c") == {"gpu": [f"{DRIVER}/p/gpu-9"]}


def test_taints_block_unless_tolerated() -> None:
    tainted = device("gpu-0", taints=[{"key": "broken", "value": "yes", "effect": "NoSchedule"}])
    gates = features.exactly("1.36", ["DRADeviceTaints"])
    manifests = [node("n1"), device_class(), resource_slice("n1", tainted, name="s")]
    blocked = allocator(*manifests, claim("c"), gates=gates)
    assert blocked.allocate("n1", claims_of(blocked, "c")).status is Status.UNFIT
    toleration = {"key": "broken", "operator": "Exists", "effect": "NoSchedule"}
    tolerant = allocator(*manifests, claim("c", exactly(tolerations=[toleration])), gates=gates)
    outcome = tolerant.allocate("n1", claims_of(tolerant, "c"))
    assert outcome.allocatable and outcome.allocations["default/c"].results[0].tolerations


def test_network_attached_devices_carry_the_slice_node_selector() -> None:
    selector = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]}
    shared = resource_slice(None, device("nic-0"), name="net", pool="fabric", nodeSelector=selector)
    alloc = allocator(node("n1", {"rack": "r1"}), node("n2", {"rack": "r2"}), device_class(), shared, claim("c"))
    outcome = alloc.allocate("n1", claims_of(alloc, "c"))
    assert outcome.allocations["default/c"].node_selector is not None
    assert outcome.allocations["default/c"].node_selector.to_manifest() == selector
    assert alloc.allocate("n2", claims_of(alloc, "c")).status is Status.UNFIT


def test_class_and_claim_config_are_copied_into_the_result() -> None:
    opaque = {"opaque": {"driver": DRIVER, "parameters": {"mode": "x"}}}
    alloc = allocator(node("n1"), device_class(config=[opaque]), gpus("n1", 1),
                      claim("c", config=[{"requests": ["gpu"], **opaque}]))
    config = alloc.allocate("n1", claims_of(alloc, "c")).allocations["default/c"].config
    assert [(c.source, c.requests) for c in config] == [("FromClass", ("gpu",)), ("FromClaim", ("gpu",))]


def test_search_budget_gives_up_instead_of_running_forever() -> None:
    devices = [device(f"gpu-{i}", {"numa": 0}) for i in range(20)]
    alloc = allocator(node("n1"), device_class(), resource_slice("n1", *devices, name="s"),
                      claim("c", exactly(count=3), constraints=[{"distinctAttribute": f"{DRIVER}/numa"}]),
                      gates=features.exactly("1.36", ["DRAConsumableCapacity"]), budget=50)
    outcome = alloc.allocate("n1", claims_of(alloc, "c"))
    assert outcome.status is Status.UNFIT and outcome.gave_up


def test_already_allocated_claim_only_needs_to_be_usable_on_the_node() -> None:
    pinned = holding(f"{DRIVER}/n1/gpu-0")
    pinned["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}
    alloc = allocator(node("n1"), node("n2"), device_class(), gpus("n1", 1), claim("c", allocation=pinned))
    assert alloc.allocate("n1", claims_of(alloc, "c")).allocatable
    assert alloc.allocate("n2", claims_of(alloc, "c")).status is Status.UNFIT


def test_more_than_32_devices_per_claim_is_an_error() -> None:
    alloc = allocator(node("n1"), device_class(), gpus("n1", 1), claim("c", exactly(count=33)))
    outcome = alloc.allocate("n1", claims_of(alloc, "c"))
    assert outcome.status is Status.ERROR and "exceeds the claim limit of 32" in (outcome.message or "")


def _infeasible_first_alternative(devices: int) -> Allocator:
    return allocator(node("n1"), device_class(), gpus("n1", devices),
                     claim("c", first_available("r", exactly("all", count=30), exactly("one", count=1))),
                     gates=features.exactly("1.35", ["DRAPrioritizedList"]), budget=DEFAULT_BUDGET)


def test_an_alternative_the_permuting_scheduler_cannot_finish_is_reported_as_giving_up() -> None:
    # 1.35 tries every ordering of 10 devices for the first alternative (about 40 million device
    # checks) and runs into its 10 s filter timeout; draq's combinations would find the second one.
    alloc = _infeasible_first_alternative(10)
    outcome = alloc.allocate("n1", claims_of(alloc, "c"))
    assert outcome.status is Status.UNFIT and outcome.gave_up
    assert "longer than its filter timeout" in (outcome.message or "")


def test_a_smaller_search_the_scheduler_finishes_is_answered() -> None:
    alloc = _infeasible_first_alternative(9)
    outcome = alloc.allocate("n1", claims_of(alloc, "c"))
    assert devices_of(outcome, "default/c") == {"r/one": [f"{DRIVER}/n1/gpu-0"]}


def test_the_combining_release_is_not_held_to_the_permuting_one() -> None:
    alloc = allocator(node("n1"), device_class(), gpus("n1", 12),
                      claim("c", first_available("r", exactly("all", count=30), exactly("one", count=1))),
                      gates=features.exactly("1.36", ["DRAPrioritizedList", "DRAConsumableCapacity"]),
                      budget=DEFAULT_BUDGET)
    assert devices_of(alloc.allocate("n1", claims_of(alloc, "c")), "default/c") == {"r/one": [f"{DRIVER}/n1/gpu-0"]}


def _estimated_work(devices: int, *requests: dict) -> tuple[int, int]:  # type: ignore[type-arg]
    """The scheduler's work the search estimates (forced on), and the bound that lets it skip estimating."""
    alloc = allocator(node("n1"), device_class(), gpus("n1", devices), claim("c", *requests),
                      gates=features.exactly("1.35", ["DRAPrioritizedList"]), budget=DEFAULT_BUDGET)
    search = alloc.search(alloc.snapshot.node("n1"))
    search.prepare(claims_of(alloc, "c"))
    search.estimate_upstream = True
    found = search.run()
    depth = sum(p.depth for p in search.plans)
    choices = 1
    for plan in search.plans:
        choices *= plan.choices
    return search.frames[0][1 if found else 0], choices * depth * devices ** depth


def test_the_bound_that_skips_estimating_the_schedulers_work_is_never_below_it() -> None:
    shapes = [
        (exactly("a", count=3),),  # fails on fewer than 3 devices: every ordering is tried
        (exactly("a", count=2), exactly("b", count=2)),
        (first_available("r", exactly("big", count=4), exactly("small", count=1)),),
        (exactly("a", count=1), first_available("r", exactly("x", count=3), exactly("y", count=2))),
    ]
    for devices in range(1, 7):
        for shape in shapes:
            work, bound = _estimated_work(devices, *shape)
            assert 0 < work <= bound, (devices, shape, work, bound)


def test_small_searches_skip_the_estimate_and_large_ones_keep_it() -> None:
    small = allocator(node("n1"), device_class(), gpus("n1", 8), claim("c", exactly(count=2)),
                      gates=features.exactly("1.35", []), budget=DEFAULT_BUDGET)
    search = small.search(small.snapshot.node("n1"))
    search.prepare(claims_of(small, "c"))
    assert not search.estimate_upstream
    large = _infeasible_first_alternative(10)
    search = large.search(large.snapshot.node("n1"))
    search.prepare(claims_of(large, "c"))
    assert search.estimate_upstream


def _many_combinations(gates: features.FeatureGates) -> Any:
    """Four of 40 GPUs, then a request no device matches: every combination of four is tried."""
    never = exactly("none", selector='device.driver == "other.example.com"')
    return allocator(node("n1"), device_class(), gpus("n1", 40), claim("c", exactly(count=4), never),
                     gates=gates, budget=DEFAULT_BUDGET)


def test_the_budget_counts_the_devices_each_loop_checks_and_gives_up_within_it() -> None:
    # 1.36 with consumable capacity searches combinations as the scheduler does: C(40, 4) = 91,390 sets of
    # four, each followed by 40 checks of the second request, past the budget.
    alloc = _many_combinations(features.exactly("1.36", ["DRAConsumableCapacity"]))
    started = time.process_time()
    outcome = alloc.allocate("n1", claims_of(alloc, "c"))
    assert outcome.status is Status.UNFIT and outcome.gave_up
    assert outcome.message is not None and outcome.message.startswith(
        f"search gave up after {DEFAULT_BUDGET:,} device checks: too many combinations of devices to try")
    assert time.process_time() - started < 10  # about a second on a loaded 2-core machine


def test_counters_a_device_takes_count_in_the_budget() -> None:
    parts = [device(f"p-{i}", {"index": i}, consumes={"set": {"slices": "1"}})
             for i in range(12)]
    never = exactly("none", selector='device.driver == "other.example.com"')
    gates = features.exactly("1.36", ["DRAConsumableCapacity", "DRAPartitionableDevices"])
    objects = (node("n1"), device_class(), resource_slice("n1", *parts, name="s", counters={"set": {"slices": "40"}}),
               claim("c", exactly(count=3), never))
    # The loops check devices about 2,900 times; the 298 partitions taken (12 + 66 + 220) count ten each for
    # their counter, about 5,900 in all.
    within = allocator(*objects, gates=gates, budget=4_000)
    assert within.allocate("n1", claims_of(within, "c")).gave_up
    enough = allocator(*objects, gates=gates, budget=8_000)
    outcome = enough.allocate("n1", claims_of(enough, "c"))
    assert outcome.status is Status.UNFIT and not outcome.gave_up
