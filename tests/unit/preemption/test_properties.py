"""Properties of preemption on random clusters: a preemption evicts whole groups and the group is then
admitted; when none is found, evicting every allowed group would not admit it either; and a victim could
never in turn preempt its preemptor under the same policies (no two groups evicting each other)."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import event, given, settings
from hypothesis import strategies as st

from admission.core.cycle import Admit
from admission.core.cycle.preemption import Holding, Preemptor, candidates, holdings, may_preempt
from tests.unit.cycle.cycle_builders import NS
from tests.unit.preemption.scenes import NOW, Scene, queue

GPUS = 4


@dataclass(frozen=True)
class Running:
    name: str
    queue: str
    priority: int
    age: int
    pods: tuple[tuple[int, int], ...]  # (node index, GPUs)


@dataclass(frozen=True)
class World:
    nodes: int
    main: int
    other: int
    reclaim: str
    borrow: str
    running: tuple[Running, ...]
    size: int
    gpus_each: int
    priority: int

    def scene(self, without: frozenset[str] = frozenset()) -> Scene:
        scene = Scene().nodes([f"n{i}" for i in range(self.nodes)], GPUS)
        scene.cluster_queue(queue("main", self.main, cohort="pool", within="LowerPriority", reclaim=self.reclaim,
                                  borrow=self.borrow))
        scene.cluster_queue(queue("other", self.other, cohort="pool"))
        for group in self.running:
            if f"{NS}/{group.name}" not in without:
                scene.running(group.name, group.queue, [(f"n{n}", g) for n, g in group.pods],
                              priority=group.priority, admitted_minutes_ago=group.age)
        return scene.waiting("new", "main", self.size, self.gpus_each, priority=self.priority)


@st.composite
def worlds(draw: st.DrawFn) -> World:
    nodes = draw(st.integers(2, 4))
    free = [GPUS] * nodes
    running = []
    for i in range(draw(st.integers(1, 8))):
        pods = []
        for _ in range(draw(st.integers(1, 2))):
            node = draw(st.integers(0, nodes - 1))
            gpus = draw(st.integers(1, 2))
            if free[node] >= gpus:
                free[node] -= gpus
                pods.append((node, gpus))
        if pods:
            running.append(Running(f"g{i}", draw(st.sampled_from(["main", "other"])), draw(st.integers(0, 3)),
                                   draw(st.integers(1, 100)), tuple(pods)))
    return World(nodes, draw(st.integers(2, 12)), draw(st.integers(0, 8)),
                 draw(st.sampled_from(["Never", "Any", "LowerPriority"])),
                 draw(st.sampled_from(["Never", "LowerPriority"])), tuple(running),
                 draw(st.integers(1, 3)), draw(st.integers(1, GPUS)), draw(st.integers(0, 5)))


@settings(deadline=None, max_examples=200)
@given(worlds())
def test_preemption_admits_the_group_or_nothing_would(world: World) -> None:
    cycle, result, plan = world.scene().run()
    key = f"{NS}/new"
    if isinstance(result.decision(key), Admit):
        assert plan.preempts == ()
        event("admitted without preemption")
        return
    if plan.preempts:
        event("preempted")
        [preempt] = plan.preempts
        admitted = {g.key for g in cycle.groups if g.holds_quota}
        assert preempt.victims and set(preempt.victims) <= admitted  # whole admitted groups, by name
        _, after_result, _ = world.scene(frozenset(preempt.victims)).run()
        decision = after_result.decision(key)
        assert isinstance(decision, Admit), decision
        # No oscillation: no victim, waiting again with its priority in its queue, may evict the preemptor.
        preemptor_holding = Holding(key, "main", world.priority, NOW, decision.charge, (), ())
        for victim in (g for g in world.running if f"{NS}/{g.name}" in preempt.victims):
            again = Preemptor(f"{NS}/{victim.name}", victim.queue, victim.priority)
            assert may_preempt(again, preemptor_holding, after_result.state, NOW), victim
        return
    # Nothing preempted: evicting every group the policies allow would not admit it either.
    allowed = candidates(Preemptor(key, "main", world.priority),
                         holdings(cycle.groups, cycle.snapshot.claims, result.state), result.state, NOW)
    _, everything, _ = world.scene(frozenset(h.group for h in allowed)).run()
    decision = everything.decision(key)
    if not isinstance(decision, Admit):
        event("no victims")
        return
    event("no victims: borrowing policy")
    # ... unless it would borrow from the cohort, where borrowWithinCohort decides: Never preempts for no
    # borrowing admission; LowerPriority evicts only lower-priority groups of its own queue.
    assert any(amount > 0 for _, amount in decision.borrowed), decision
    if world.borrow == "LowerPriority":
        own = frozenset(h.group for h in allowed if h.cluster_queue == "main" and h.priority < world.priority)
        _, restricted, _ = world.scene(own).run()
        assert not isinstance(restricted.decision(key), Admit)
