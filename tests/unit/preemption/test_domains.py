"""Preemption for a group that requires one topology domain: its victims are chosen inside one domain (two
gangs in one rack, not groups scattered over racks), checked by hand and on random racks."""

from __future__ import annotations

import random

from admission.core.cycle import CycleInput, CycleResult, Wait, WaitReason
from admission.core.cycle.preemption import NoVictims, Preemptor, candidates, holdings
from admission.core.models import Topology, TopologyLevel
from tests.unit.cycle.cycle_builders import NS
from tests.unit.preemption.scenes import Scene, queue, search

RACK_LABEL = "example.com/rack"
LAYOUT = Topology("layout", (TopologyLevel("rack", node_label=RACK_LABEL),))
REQUIRED = {"required": "rack"}


def racks(scene: Scene, shape: dict[str, int], gpus: int = 8) -> Scene:
    """Racks of nodes `<rack>0`, `<rack>1`, ... labelled with their rack."""
    for rack, count in shape.items():
        scene.nodes([f"{rack}{i}" for i in range(count)], gpus, {RACK_LABEL: rack})
    return scene.topology(LAYOUT)


def scattered_scene(topology: dict[str, str] | None) -> Scene:
    """Racks a and b of four 8-GPU nodes, all held. The most preferred victims, x on a0 and y on b0 (priority
    0, admitted five minutes ago), sit in different racks; z on b1 (priority 1) is next; the rest is kept
    (priority 10). A 2 x 8 GPU gang of priority 5 waits."""
    scene = racks(Scene(), {"a": 4, "b": 4}).cluster_queue(queue("main", 80, within="LowerPriority",
                                                                     topology="layout"))
    scene.running("x", "main", [("a0", 8)], admitted_minutes_ago=5)
    scene.running("y", "main", [("b0", 8)], admitted_minutes_ago=5)
    scene.running("z", "main", [("b1", 8)], priority=1)
    for node in ("a1", "a2", "a3", "b2", "b3"):
        scene.running(f"keep-{node}", "main", [(node, 8)], priority=10)
    return scene.waiting("big", "main", 2, 8, priority=5, topology=topology)


def test_without_topology_the_most_preferred_victims_are_taken_wherever_they_are() -> None:
    _, _, plan = scattered_scene(None).run()
    [preempt] = plan.preempts
    assert sorted(preempt.victims) == [f"{NS}/x", f"{NS}/y"]
    assert preempt.nodes == ("a0", "b0")


def test_a_required_rack_takes_its_victims_inside_one_rack() -> None:
    _, result, plan = scattered_scene(REQUIRED).run()
    wait = result.decision(f"{NS}/big")
    assert isinstance(wait, Wait) and wait.reason in (WaitReason.DEVICES, WaitReason.QUOTA)
    [preempt] = plan.preempts
    assert sorted(preempt.victims) == [f"{NS}/y", f"{NS}/z"]
    assert preempt.nodes == ("b0", "b1")
    assert plan.waits[f"{NS}/big"].message.endswith(f"; preempting group(s) {NS}/y, {NS}/z in rack b to make room")


def test_the_rack_needing_the_lowest_priority_victims_wins() -> None:
    # Rack a: two priority-2 gangs; rack b: a priority-0 gang on b0 and half of b1, priority-3 gangs beside it.
    scene = racks(Scene(), {"a": 2, "b": 3}).cluster_queue(queue("main", 40, within="LowerPriority",
                                                                     topology="layout"))
    scene.running("a-one", "main", [("a0", 8)], priority=2)
    scene.running("a-two", "main", [("a1", 8)], priority=2)
    scene.running("b-pair", "main", [("b0", 8), ("b1", 4)], priority=0)
    scene.running("b-high", "main", [("b1", 4)], priority=3)
    scene.running("b-higher", "main", [("b2", 8)], priority=3)
    _, _, plan = scene.waiting("big", "main", 2, 8, priority=5, topology=REQUIRED).run()
    [preempt] = plan.preempts
    # In rack b a priority-3 gang must go with b-pair (two victims, highest priority 3); rack a's are priority 2.
    assert sorted(preempt.victims) == [f"{NS}/a-one", f"{NS}/a-two"]


def test_no_rack_can_be_freed_when_its_candidates_are_too_few() -> None:
    scene = racks(Scene(), {"a": 2, "b": 2}).cluster_queue(queue("main", 32, within="LowerPriority",
                                                                     topology="layout"))
    scene.running("x", "main", [("a0", 8)])
    scene.running("keep-a1", "main", [("a1", 8)], priority=10)
    scene.running("y", "main", [("b0", 8)])
    scene.running("keep-b1", "main", [("b1", 8)], priority=10)
    _, _, plan = scene.waiting("big", "main", 2, 8, priority=5, topology=REQUIRED).run()
    assert plan.preempts == ()
    assert "no preemption: no rack would have the 16 devices the gang needs after evicting the groups its " \
           "policies allow there" in plan.waits[f"{NS}/big"].message


def test_victims_never_span_racks_for_a_required_preemptor() -> None:
    preempted = sum(_preempts_inside_one_rack(seed) for seed in range(24))
    assert preempted >= 8  # the random scenes do preempt, so the check above is not vacuous


def _preempts_inside_one_rack(seed: int) -> int:
    """On random racks with random running groups, a required-rack gang's victims and planned nodes all lie
    in one rack; how many preemptions were planned."""
    rng = random.Random(seed)
    shape = {rack: rng.randint(2, 4) for rack in "abc"}
    scene = racks(Scene(), shape, gpus=4).cluster_queue(queue("main", 200, within="LowerPriority",
                                                                  topology="layout"))
    rack_of = {f"{rack}{i}": rack for rack, count in shape.items() for i in range(count)}
    free = {node: 4 for node in rack_of}
    for index in range(rng.randint(3, 10)):
        rack = rng.choice(list(shape))
        nodes = [n for n in rack_of if rack_of[n] == rack and free[n]]
        if not nodes:
            continue
        spread = rng.sample(nodes, rng.randint(1, len(nodes)))
        placement = [(n, rng.randint(1, free[n])) for n in spread]
        for n, count in placement:
            free[n] -= count
        scene.running(f"r{index}", "main", placement, priority=rng.randint(0, 3),
                      admitted_minutes_ago=rng.randint(1, 90))
    # Mostly larger than any rack's free devices, so that the gang waits and preempts.
    scene.waiting("big", "main", rng.randint(2, 4), rng.choice([2, 4]), priority=5, topology=REQUIRED)
    cycle, _, plan = scene.run()
    groups = {g.key: g for g in cycle.groups}
    for preempt in plan.preempts:
        planned = {rack_of[n] for n in preempt.nodes}
        victims = {rack_of[p.node_name] for v in preempt.victims for p in groups[v].pods}
        assert len(planned) == 1, (seed, preempt)
        assert victims <= planned, (seed, preempt, victims)
    return len(plan.preempts)


def test_the_chosen_rack_is_the_cheapest_of_every_rack_searched_in_full() -> None:
    """The search settles only the cheapest rack's victims and stops at racks whose bound is too high; on random
    racks it chooses what searching every rack in full and taking the cheapest chooses."""
    compared = 0
    for seed in range(40):
        scene = _random_racks(random.Random(seed))
        cycle, result, plan = scene.run()
        big = f"{NS}/big"
        wait = result.decision(big)
        if not isinstance(wait, Wait):
            continue
        expected = _cheapest_rack_in_full(cycle, result, wait.cluster_queue)
        found = [p for p in plan.preempts if p.group == big]
        assert [(p.victims, p.nodes) for p in found] == ([expected] if expected else []), seed
        compared += bool(expected)
    assert compared >= 10


def _random_racks(rng: random.Random) -> Scene:
    shape = {rack: rng.randint(2, 4) for rack in "abcd"[:rng.randint(2, 4)]}
    scene = racks(Scene(), shape, gpus=4).cluster_queue(queue("main", rng.choice([40, 60, 200]),
                                                              within="LowerPriority", topology="layout"))
    free = {f"{rack}{i}": 4 for rack, count in shape.items() for i in range(count)}
    for index in range(rng.randint(4, 14)):
        rack = rng.choice(list(shape))
        nodes = [n for n in free if n[0] == rack and free[n]]
        if nodes:
            placement = [(n, rng.randint(1, free[n])) for n in rng.sample(nodes, rng.randint(1, min(3, len(nodes))))]
            for node, count in placement:
                free[node] -= count
            scene.running(f"r{index}", "main", placement, priority=rng.randint(0, 3),
                          admitted_minutes_ago=rng.randint(1, 90))
    return scene.waiting("big", "main", rng.randint(2, 4), rng.choice([1, 2, 4]), priority=5, topology=REQUIRED)


def _cheapest_rack_in_full(cycle: CycleInput, result: CycleResult, cluster_queue: str) -> tuple[tuple[str, ...],
                                                                                               tuple[str, ...]] | None:
    """The ordinary search run in every rack on its own (members kept to its nodes, candidates wholly inside
    it); of the racks where it finds victims, those with the lowest highest priority, then the fewest, then
    the fewest devices, then the rack's name: their victims and the gang's nodes."""
    preemptor = Preemptor(f"{NS}/big", cluster_queue, 5)
    allowed = candidates(preemptor, holdings(cycle.groups, cycle.snapshot.claims, result.state), result.state,
                         cycle.now)
    rack_of = {name: node.labels[RACK_LABEL] for name, node in cycle.snapshot.nodes.items()}
    best: tuple[tuple[int, int, int, str], tuple[str, ...], tuple[str, ...]] | None = None
    for rack in sorted(set(rack_of.values())):
        inside = [h for h in allowed if h.pods and all(rack_of[n] == rack for n in h.nodes)]
        nodes = tuple(sorted(n for n, r in rack_of.items() if r == rack))
        found = search(cycle, result, preemptor, inside, nodes)
        if isinstance(found, NoVictims):
            continue
        chosen = [h for h in inside if h.group in found.victims]
        cost = (max(h.priority for h in chosen), len(chosen), sum(h.devices for h in chosen), rack)
        if best is None or cost < best[0]:
            best = (cost, found.victims, tuple(sorted(set(found.placements.values()))))
    return None if best is None else (best[1], best[2])
