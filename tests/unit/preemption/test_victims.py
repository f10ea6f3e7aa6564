"""Victim selection by hand-checkable cases: whole groups, chosen so that the waiting group can be
placed, not only so that its quota fits; the policies; what a victim's record says."""

from __future__ import annotations

from admission.core.cycle import Wait, WaitReason
from admission.core.cycle.preemption import NoVictims, Preemptor, candidates, holdings, preempted_status, victims_of
from admission.core.models import ObjectRef
from admission.core.quota import Amounts
from tests.unit.cycle.cycle_builders import NS
from tests.unit.preemption.scenes import NOW, Scene, queue, search

SMALL = [f"n{i}" for i in range(8)]
BLOCK = [f"b{i}" for i in range(4)]


def spread_scene(**policies: object) -> Scene:
    """Eight nodes each with seven GPUs of high-priority work and one 1-GPU pod of low priority admitted
    five minutes ago; four nodes held whole by one low-priority gang admitted an hour ago; a gang of
    4 x 8 GPUs of middle priority waits. Quota: 120 GPUs, 96 in use, so 8 must be freed."""
    scene = Scene().nodes(SMALL + BLOCK).cluster_queue(queue("main", 120, within="LowerPriority", **policies))
    for node in SMALL:
        scene.running(f"keep-{node}", "main", [(node, 7)], priority=10, admitted_minutes_ago=300)
        scene.running(f"small-{node}", "main", [(node, 1)], admitted_minutes_ago=5)
    scene.running("block", "main", [(b, 8) for b in BLOCK], admitted_minutes_ago=60)
    return scene.waiting("big", "main", 4, 8, priority=5)


def test_the_spread_small_pods_free_quota_but_only_the_block_makes_the_gang_placeable() -> None:
    cycle, result, plan = spread_scene().run()
    wait = result.decision(f"{NS}/big")
    assert isinstance(wait, Wait) and wait.reason is WaitReason.QUOTA
    preemptor = Preemptor(f"{NS}/big", "main", 5)
    ordered = candidates(preemptor, holdings(cycle.groups, cycle.snapshot.claims, result.state), result.state, NOW)
    # Preference: lower priority, then the most recently admitted: the eight small pods, then the block.
    assert [h.group for h in ordered] == [*sorted(f"{NS}/small-{n}" for n in SMALL), f"{NS}/block"]
    # A quota-only choice takes candidates in that order until 32 GPUs fit: the eight small pods ...
    state, quota_only = result.state, []
    for holding in ordered:
        if state.fits("main", Amounts.of({"gpus": 32})).ok:
            break
        state = state.evict(holding.group)
        quota_only.append(holding)
    assert [h.group for h in quota_only] == [h.group for h in ordered[:8]]
    # ... which frees one GPU on each of eight nodes and places nothing.
    assert isinstance(search(cycle, result, preemptor, quota_only), NoVictims)
    # The search evicts the block alone, and the gang is to go to its four nodes.
    assert len(plan.preempts) == 1
    preempt = plan.preempts[0]
    assert preempt.victims == (f"{NS}/block",) and preempt.nodes == tuple(BLOCK)
    assert plan.waits[f"{NS}/big"].message.endswith("; preempting group(s) team/block to make room")


def test_the_victims_record_names_the_preemptor_and_requeues_at_once() -> None:
    cycle, _, plan = spread_scene().run()
    [(preempt, victim)] = victims_of(plan, cycle.groups)
    status = preempted_status(preempt, victim, NOW, [ObjectRef("Job", NS, "job-a")])
    assert status["phase"] == "Evicted" and status["charge"] is None and status["plan"] is None
    assert status["requeueAt"] == "2026-03-01T12:00:00Z" and status["suspended"] == [{"kind": "Job", "name": "job-a"}]
    [condition] = status["conditions"]
    assert condition["reason"] == "Preempted" and condition["status"] == "False"
    assert "preempted by group team/big (ClusterQueue main, priority 5)" in condition["message"]
    assert "b0, b1, b2, b3" in condition["message"]


def test_without_a_policy_nothing_is_preempted() -> None:
    scene = Scene().nodes(BLOCK).cluster_queue(queue("main", 64))
    scene.running("block", "main", [(b, 8) for b in BLOCK])
    _, result, plan = scene.waiting("big", "main", 4, 8, priority=5).run()
    assert plan.preempts == () and not plan.waits
    assert isinstance(result.decision(f"{NS}/big"), Wait)


def test_equal_or_higher_priority_is_never_preempted_within_the_queue() -> None:
    scene = Scene().nodes(BLOCK).cluster_queue(queue("main", 64, within="LowerPriority"))
    scene.running("block", "main", [(b, 8) for b in BLOCK], priority=5)
    _, _, plan = scene.waiting("big", "main", 4, 8, priority=5).run()
    assert plan.preempts == ()
    assert "no preemption: no admitted group may be preempted" in plan.waits[f"{NS}/big"].message


def test_minimum_run_time_protects_young_groups() -> None:
    _, _, plan = spread_scene(minimum=2 * 3600).run()  # the block has run one hour
    assert plan.preempts == ()
    message = plan.waits[f"{NS}/big"].message
    assert "no preemption" in message
    _, _, plan = spread_scene(minimum=1800).run()
    assert [p.victims for p in plan.preempts] == [(f"{NS}/block",)]


def test_no_victims_when_even_every_candidate_would_not_make_room() -> None:
    # Each node has 7 GPUs of high-priority work: no eviction frees a whole node for 4 x 8 GPUs.
    scene = Scene().nodes(SMALL).cluster_queue(queue("main", 64, within="LowerPriority"))
    for node in SMALL:
        scene.running(f"keep-{node}", "main", [(node, 7)], priority=10)
        scene.running(f"small-{node}", "main", [(node, 1)])
    _, _, plan = scene.waiting("big", "main", 4, 8, priority=5).run()
    assert plan.preempts == ()
    assert "even evicting all 8 group(s) its policies allow would not admit it" in plan.waits[f"{NS}/big"].message


def test_a_gang_spanning_nodes_is_evicted_whole_or_not_at_all() -> None:
    # The preemptor needs one node; the low-priority gang spans two. Evicting it frees both.
    scene = Scene().nodes(["a", "b"]).cluster_queue(queue("main", 16, within="LowerPriority"))
    scene.running("pair", "main", [("a", 8), ("b", 8)])
    _, _, plan = scene.waiting("one", "main", 1, 8, priority=1).run()
    assert [p.victims for p in plan.preempts] == [(f"{NS}/pair",)]


def test_only_the_nodes_needed_are_freed() -> None:
    # Four single-node groups; the preemptor needs two nodes: the two most recently admitted go.
    scene = Scene().nodes(BLOCK).cluster_queue(queue("main", 32, within="LowerPriority"))
    for age, node in zip((40, 30, 20, 10), BLOCK, strict=True):
        scene.running(f"g-{node}", "main", [(node, 8)], admitted_minutes_ago=age)
    _, _, plan = scene.waiting("two", "main", 2, 8, priority=1).run()
    [preempt] = plan.preempts
    assert preempt.victims == (f"{NS}/g-b3", f"{NS}/g-b2") and preempt.nodes == ("b2", "b3")


def test_cohort_reclaim_takes_from_borrowing_queues_only() -> None:
    # `lender` owns 16 GPUs and lent them; `borrower` (nominal 0) runs a 16-GPU gang on them.
    def scene(reclaim: str, borrower_nominal: int = 0) -> Scene:
        s = Scene().nodes(["a", "b"])
        s.cluster_queue(queue("lender", 16, cohort="pool", reclaim=reclaim))
        s.cluster_queue(queue("borrower", borrower_nominal, cohort="pool"))
        s.running("guest", "borrower", [("a", 8), ("b", 8)], priority=3)
        return s.waiting("owner", "lender", 2, 8, priority=0)

    _, _, plan = scene("Any").run()
    assert [p.victims for p in plan.preempts] == [(f"{NS}/guest",)]
    _, _, plan = scene("LowerPriority").run()  # the guest's priority is higher
    assert plan.preempts == ()
    _, _, plan = scene("Never").run()
    assert plan.preempts == ()


def test_reclaim_takes_from_the_queue_with_the_highest_fair_share() -> None:
    # Two borrowers hold one node each; `heavy` has weight 1, `light` weight 4: same usage, so heavy's
    # weighted share is four times light's, and it is reclaimed from first.
    s = Scene().nodes(["a", "b"])
    s.cluster_queue(queue("lender", 16, cohort="pool", reclaim="Any"))
    s.cluster_queue(queue("heavy", 0, cohort="pool"))
    s.cluster_queue(queue("light", 0, cohort="pool", weight="4"))
    s.running("on-a", "light", [("a", 8)], admitted_minutes_ago=5)
    s.running("on-b", "heavy", [("b", 8)], admitted_minutes_ago=50)
    _, _, plan = s.waiting("owner", "lender", 1, 8).run()
    assert [p.victims for p in plan.preempts] == [(f"{NS}/on-b",)]


def test_borrowing_while_preempting_follows_the_policy() -> None:
    # `main` owns 8 GPUs in a cohort with an idle `spare` of 8; its low-priority group holds node a. The
    # preemptor needs 16 GPUs: it would borrow 8, which borrowWithinCohort Never forbids.
    def scene(borrow: str) -> Scene:
        s = Scene().nodes(["a", "b"])
        s.cluster_queue(queue("main", 8, cohort="pool", within="LowerPriority", borrow=borrow))
        s.cluster_queue(queue("spare", 8, cohort="pool"))
        s.running("low", "main", [("a", 8)])
        return s.waiting("wide", "main", 2, 8, priority=2)

    _, _, plan = scene("Never").run()
    assert plan.preempts == () and "borrowWithinCohort Never" in plan.waits[f"{NS}/wide"].message
    _, _, plan = scene("LowerPriority").run()
    assert [p.victims for p in plan.preempts] == [(f"{NS}/low",)]
