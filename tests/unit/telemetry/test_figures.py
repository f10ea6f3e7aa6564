"""The figures metrics are rendered from: queue usage and borrowing, groups by phase and reason, release
latency, published and allocated devices, bounded review labels, and the loop's health decisions."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from fractions import Fraction

from admission.core.allocator import Snapshot
from admission.core.cycle import GroupView, WaitReason, run_cycle
from admission.core.cycle.steps import ALLOCATOR, CHARGING, StepTimer
from admission.core.gaps import Gap, GapKind, GapReport
from admission.core.quota import Amounts, LocalQueue, QueueState
from admission.core.review.envelope import Decision, render_response
from admission.core.telemetry import (
    GROUP_PHASES,
    LocalQueueFigure,
    PodQueue,
    QueueFigure,
    allocated_devices,
    gap_figures,
    group_figures,
    local_queue_figures,
    loop_stall,
    loop_unready,
    pod_queues,
    published_devices,
    queue_figures,
    release_latency,
    review_outcome,
)
from tests.support.builders import DRIVER, claim, device, models, resource_slice
from tests.unit.cycle.cycle_builders import (
    GPU_CLASS,
    LOCAL_QUEUES,
    NS,
    cycle,
    cycle_input,
    gang,
    gpu_node,
    gpu_queue,
    groups_of,
)
from tests.unit.webhook.builders import POD, pod, request


def test_an_admitted_and_a_waiting_group_are_counted_by_phase_and_reason() -> None:
    objects = [*gpu_node("n1"), *gpu_node("n2"), *gang("big", 2, 4), *gang("late", 1, 4)]
    queues = [gpu_queue("main", 8)]
    result = cycle(objects, queues)
    figures = group_figures(groups_of(objects), result.decisions, {q.key: q for q in LOCAL_QUEUES}, ["main"])
    assert figures.phases[("main", "Admitted")] == 1 and figures.phases[("main", "Pending")] == 1
    assert figures.waiting[("main", WaitReason.QUOTA.value)] == 1
    # every phase and reason of a known queue has a series, zeros included
    assert {p.value for p in GROUP_PHASES} == {phase for queue, phase in figures.phases if queue == "main"}
    assert sum(figures.waiting.values()) == 1 and len(figures.waiting) == len(WaitReason)
    assert queue_figures(result.state) == (QueueFigure("main", "gpus", used=0.0, reserved=8.0, borrowed=0.0,
                                                       nominal=8.0),)


def test_borrowing_from_the_cohort_is_shown_per_unit() -> None:
    state = QueueState.empty([gpu_queue("a", 4, cohort="c"), gpu_queue("b", 4, cohort="c")])
    state = state.admit("team/g", "a", Amounts.of({"gpus": 6}))
    by_queue = {f.cluster_queue: f for f in queue_figures(state)}
    assert by_queue["a"].borrowed == 2.0 and by_queue["a"].reserved == 6.0
    assert by_queue["b"].borrowed == 0.0 and by_queue["b"].nominal == 4.0 and by_queue["b"].borrowing_limit is None


def test_usage_per_local_queue_and_so_per_namespace() -> None:
    state = QueueState.empty([gpu_queue("a", 16)])
    state = state.admit("team/g1", "a", Amounts.of({"gpus": 4}), "team/train").bind("team/g1")
    state = state.admit("team/g2", "a", Amounts.of({"gpus": 2}), "team/train")
    state = state.admit("lab/g3", "a", Amounts.of({"gpus": 1}), "lab/gone")  # its LocalQueue was deleted
    locals_ = {q.key: q for q in (LocalQueue("team", "train", "a"), LocalQueue("team", "idle", "a"),
                                  LocalQueue("x", "orphan", "missing"))}
    assert local_queue_figures(state, locals_) == (
        LocalQueueFigure("lab", "gone", "a", "gpus", usage=1.0, reserved=1.0),
        LocalQueueFigure("team", "idle", "a", "gpus", usage=0.0, reserved=0.0),  # a series from the start
        LocalQueueFigure("team", "train", "a", "gpus", usage=6.0, reserved=2.0),
    )


def test_release_latency_runs_from_the_groups_creation() -> None:
    group = GroupView(NS, "g", "lq", 1, 0, "2026-01-01T00:00:00Z", ())
    assert release_latency(group, dt.datetime(2026, 1, 1, 0, 0, 42, tzinfo=dt.UTC)) == 42.0
    assert release_latency(GroupView(NS, "g", "lq", 1, 0, "", ()), dt.datetime.now(dt.UTC)) is None


def test_each_allocated_device_is_mapped_to_its_uuid_claim_pod_and_queue() -> None:
    slice_ = resource_slice("n1", device("gpu-0", {"uuid": "GPU-aaaa"}), device("gpu-1"))
    held = claim("train-0-gpu", namespace=NS, allocation=[{"request": "gpu", "driver": DRIVER, "pool": "n1",
                                                         "device": "gpu-0"}], reserved_for=["train-0"])
    spare = claim("spare", namespace=NS, allocation=[{"request": "gpu", "driver": DRIVER, "pool": "n1",
                                                    "device": "gpu-1"}])
    snapshot = Snapshot.from_models(models(GPU_CLASS, slice_, held, spare))
    rows = allocated_devices(snapshot, {f"{NS}/train-0": PodQueue("n1", "main", "lq")})
    assert [(r.node, r.device, r.uuid, r.claim, r.pod, r.cluster_queue, r.local_queue) for r in rows] == [
        ("n1", "gpu-0", "GPU-aaaa", "train-0-gpu", "train-0", "main", "lq"),
        ("n1", "gpu-1", "", "spare", "", "", ""),
    ]
    assert published_devices(snapshot) == {("n1", DRIVER): 2}


def test_members_of_groups_know_their_queues() -> None:
    objects = [*gpu_node("n1"), *gang("g", 2, 1)]
    groups = cycle_input(objects, [gpu_queue("main", 8)]).groups
    found = pod_queues(groups, {q.key: q for q in LOCAL_QUEUES})
    assert found[f"{NS}/g-0"] == PodQueue("", "main", "lq") and set(found) == {f"{NS}/g-0", f"{NS}/g-1"}


def test_gaps_are_counted_per_kind_and_sized_per_kind_and_measure() -> None:
    report = GapReport((Gap(GapKind.OUTSIDE_QUEUES, "gpus", Fraction(2), "m"),
                        Gap(GapKind.OUTSIDE_QUEUES, "gpus", Fraction(1), "m"),
                        Gap(GapKind.CHARGE_DIFFERS, "gpu-memory", Fraction(-80 * 2**30), "m")))
    figures = gap_figures(report)
    assert figures.counts[GapKind.OUTSIDE_QUEUES.value] == 2 and figures.counts[GapKind.CHARGE_DIFFERS.value] == 1
    assert set(figures.counts) == {k.value for k in GapKind} and figures.counts[GapKind.DOUBLE_OFFERED.value] == 0
    assert figures.sizes == {("OutsideQueues", "gpus"): 3.0, ("ChargeDiffers", "gpu-memory"): 80.0 * 2**30}


def test_review_labels_stay_within_the_known_vocabulary() -> None:
    denied = render_response("u", Decision.deny("no", "Forbidden"))
    outcome = review_outcome(request(POD, pod("x")), denied)
    assert (outcome.kind, outcome.operation, outcome.allowed, outcome.reason) == ("Pod", "CREATE", False, "Forbidden")
    odd = render_response("u", Decision.deny("no", "SomethingNew-" + "x" * 50))
    assert review_outcome(None, odd).reason == "Other" and review_outcome(None, odd).kind == "Other"
    assert review_outcome(None, render_response("u", Decision.allow())).reason == ""


def test_a_long_pass_or_long_pending_changes_mean_the_loop_is_stuck() -> None:
    assert loop_stall(now=100, pass_started=None, pending_since=None, bound=60) == ""
    assert loop_stall(now=100, pass_started=50, pending_since=None, bound=60) == ""
    assert "running for 70s" in loop_stall(now=120, pass_started=50, pending_since=None, bound=60)
    assert "pending for 61s" in loop_stall(now=100, pass_started=None, pending_since=39, bound=60)


def test_ready_once_synced_and_for_a_leader_after_its_first_pass() -> None:
    assert "caches" in loop_unready(synced=False, leading=False, completed_passes=0)
    assert loop_unready(synced=True, leading=False, completed_passes=0) == ""
    assert "first admission cycle" in loop_unready(synced=True, leading=True, completed_passes=0)
    assert loop_unready(synced=True, leading=True, completed_passes=1) == ""


def test_step_times_add_up_on_the_injected_clock_and_are_zero_without_one() -> None:
    ticks = iter([0.0, 0.5, 1.0, 1.25, 2.0, 2.5])
    timer = StepTimer(lambda: next(ticks))
    for name in (ALLOCATOR, CHARGING, ALLOCATOR):
        with timer.step(name):
            pass
    assert timer.totals() == {ALLOCATOR: 1.0, CHARGING: 0.25}
    untimed = StepTimer(None)
    with untimed.step(ALLOCATOR):
        pass
    assert untimed.totals() == {ALLOCATOR: 0.0, CHARGING: 0.0}


def test_a_timed_cycle_reports_its_allocator_and_charging_time() -> None:
    objects = [*gpu_node("n1"), *gang("g", 1, 2)]
    clock = iter(float(i) for i in range(100))
    result = run_cycle(replace(cycle_input(objects, [gpu_queue("main", 8)]), timer=lambda: next(clock)))
    assert result.step_seconds[ALLOCATOR] > 0 and result.step_seconds[CHARGING] > 0
