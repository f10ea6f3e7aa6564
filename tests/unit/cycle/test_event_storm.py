"""An event storm between two cycles (a node flapping Ready/NotReady, many times): each parked group is woken
at most once by the next cycle, whatever the number of events, and the cycle after that wakes none while
nothing changes again (`CycleStats`, `core.cycle.parking`)."""

from __future__ import annotations

import random
from collections import Counter

from admission.core.cycle import CycleResult, Parking
from tests.unit.cycle.cycle_builders import gang, gpu_queue
from tests.unit.cycle.test_parking import World, _seed

FLAPPING = "flappy"


def _decided_once(result: CycleResult) -> None:
    counts = Counter(d.group for d in result.decisions)
    assert all(n == 1 for n in counts.values()), [g for g, n in counts.items() if n > 1]


def _storm(world: World, rng: random.Random, events: int) -> None:
    """`events` flaps of one node: NotReady takes it out of what placement may use, Ready puts it back. Every
    change bumps the shell's capacity counter, as the reader does for a node changed in what placement reads."""
    for _ in range(events):
        if FLAPPING in world.nodes:
            del world.nodes[FLAPPING]
        else:
            world.nodes[FLAPPING] = 4
        world.capacity += 1
        world.now += rng.uniform(0.0, 0.2)


def _world(rng: random.Random, groups: int) -> World:
    """Groups that wait for room (more GPUs than any node has, or than two nodes have) or for quota (`side`
    holds 4 GPUs): the flapping node changes what they meet, but never enough to admit one."""
    world = World(nodes={"n1": 4, FLAPPING: 4}, queues=[gpu_queue("main", 64), gpu_queue("side", 4)])
    for index in range(groups):
        queue = "lq2" if rng.random() < 0.3 else "lq"
        size, each = rng.choice(((1, 8), (2, 8), (3, 4), (1, 6)))
        world.pending[f"g{index:03d}"] = gang(f"g{index:03d}", size, each, queue=queue,
                                              created=f"2026-01-01T00:{index // 60 + 1:02d}:{index % 60:02d}Z")
    return world


def test_a_storm_of_node_events_between_two_cycles_wakes_each_parked_group_at_most_once() -> None:
    rng = random.Random(_seed())
    for _ in range(10):
        world = _world(rng, rng.randint(5, 40))
        first = world.cycle(Parking())
        world.apply(first)
        _decided_once(first)
        assert first.parking is not None
        for _ in range(3):
            parked_before = set(first.parking.parked)
            _storm(world, rng, rng.randint(1, 300))
            woken = world.cycle(first.parking)
            _decided_once(woken)
            stats = woken.stats
            assert stats.woken <= len(parked_before), stats
            assert stats.woken + stats.parked <= len(world.pending), stats
            world.now += 0.5
            quiet = world.cycle(woken.parking)
            _decided_once(quiet)
            assert quiet.stats.woken == 0 and quiet.stats.evaluated == 0, quiet.stats
            assert quiet.stats.parked == woken.stats.parked_after, (quiet.stats, woken.stats)
            first = quiet


def test_the_number_of_events_in_a_storm_does_not_change_what_the_next_cycle_does() -> None:
    rng = random.Random(_seed())
    for _ in range(6):
        groups = rng.randint(5, 30)
        seed = rng.randrange(1 << 30)
        results, parked = [], set()
        for events in (1, 3, 201):  # odd: the node ends NotReady each time
            world = _world(random.Random(seed), groups)
            first = world.cycle(Parking())
            world.apply(first)
            assert first.parking is not None and not first.admitted
            parked = set(first.parking.parked)
            _storm(world, random.Random(seed), events)
            world.now = 1.0
            results.append(world.cycle(first.parking))
        assert len({r.stats for r in results}) == 1, [r.stats for r in results]
        assert len({r.decisions for r in results}) == 1
        assert 0 < results[0].stats.woken <= len(parked), results[0].stats
