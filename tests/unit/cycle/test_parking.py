"""Parked groups: a group evaluated and not admitted is not evaluated again until something that could change
its answer happens (`core.cycle.parking`), and a cycle with parking admits exactly what one without admits."""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from admission.core.cycle import Admit, Changes, CycleResult, Parking, Wait, WaitReason, run_cycle
from admission.core.models import AllocationResult
from admission.core.quota import Admission, Amounts, ClusterQueue, LocalQueue, QueueState
from tests.support.builders import Manifest, cluster_queue, local_queue, model, models, quota
from tests.unit.cycle.cycle_builders import NS, cycle_input, gang, gpu_node, gpu_queue

QUEUES: tuple[LocalQueue, ...] = tuple(models(local_queue("lq", "main", NS), local_queue("lq2", "side", NS)))


@dataclass
class World:
    """What the cycle is given: the pending groups' objects, the nodes, the queues, the admitted groups'
    charges (held quota) and devices (promised), the shell's capacity counter and clock."""

    nodes: dict[str, int] = field(default_factory=dict)  # name -> GPUs
    pending: dict[str, list[Manifest]] = field(default_factory=dict)  # group name -> its objects
    queues: list[ClusterQueue] = field(default_factory=list)
    held: dict[str, tuple[Admission, tuple[AllocationResult, ...]]] = field(default_factory=dict)
    capacity: int = 0
    now: float = 0.0

    def objects(self) -> list[Manifest]:
        nodes = [m for name, gpus in sorted(self.nodes.items()) for m in gpu_node(name, gpus)]
        return nodes + [m for objects in self.pending.values() for m in objects]

    def state(self) -> QueueState:
        state = QueueState.empty(self.queues)
        for admission, _ in self.held.values():
            state = state.restore(admission)
        return state

    def cycle(self, parking: Parking | None) -> CycleResult:
        promised = tuple(a for _, allocations in self.held.values() for a in allocations)
        base = cycle_input(self.objects(), self.queues, QUEUES, promised=promised)
        fed = parking.fed(Changes(self.capacity, self.now)) if parking is not None else None
        return run_cycle(replace(base, state=self.state(), parking=fed))

    def apply(self, result: CycleResult) -> None:
        """The admitted groups leave the pending ones and hold their charge and devices."""
        for admit in result.admitted:
            name = admit.group.split("/", 1)[1]
            del self.pending[name]
            self.held[name] = (Admission(admit.group, admit.cluster_queue, admit.charge, admit.local_queue),
                               tuple(admit.placement.allocations.values()))

    def add_node(self, name: str, gpus: int) -> None:
        self.nodes[name] = gpus
        self.capacity += 1

    def finish(self, name: str) -> None:
        del self.held[name]
        self.capacity += 1  # its bound pods go away


def evaluated(result: CycleResult, now: float) -> set[str]:
    """The groups evaluated by the cycle run at `now`: those parked with that time."""
    assert result.parking is not None
    return {key for key, parked in result.parking.parked.items() if parked.since == now}


def one_queue_world(gpus: int = 4, quota_gpus: int = 8) -> World:
    world = World(nodes={"n1": gpus}, queues=[gpu_queue("main", quota_gpus)])
    return world


def test_a_device_wait_is_parked_and_not_evaluated_again_while_nothing_changes() -> None:
    world = one_queue_world()
    world.pending["a"] = gang("a", 1, 4, created="2026-01-01T00:00:00Z")
    world.pending["big"] = gang("big", 1, 4, created="2026-01-01T00:00:01Z")  # the node's 4 GPUs, taken by a
    first = world.cycle(Parking())
    wait = first.decision("team/big")
    assert isinstance(wait, Wait) and wait.reason is WaitReason.DEVICES
    assert evaluated(first, 0.0) == {"team/big"}
    world.apply(first)
    world.now = 5.0
    second = world.cycle(first.parking)
    assert second.decision("team/big") == wait
    assert evaluated(second, 5.0) == set()


def test_a_device_wait_is_evaluated_again_when_a_node_appears() -> None:
    world = one_queue_world()
    world.pending["big"] = gang("big", 2, 4)  # 2 pods x 4 GPUs on one 4-GPU node
    first = world.cycle(Parking())
    world.now = 1.0
    world.add_node("n2", 4)
    second = world.cycle(first.parking)
    assert [a.group for a in second.admitted] == ["team/big"]


def test_a_device_wait_is_evaluated_again_when_devices_are_freed() -> None:
    world = one_queue_world()
    world.pending["a"] = gang("a", 1, 4, created="2026-01-01T00:00:00Z")
    world.pending["b"] = gang("b", 1, 4, created="2026-01-01T00:00:01Z")
    first = world.cycle(Parking())
    assert [a.group for a in first.admitted] == ["team/a"]
    world.apply(first)
    world.now = 1.0
    second = world.cycle(first.parking)
    assert evaluated(second, 1.0) == set()  # b is parked: nothing changed
    world.finish("a")
    world.now = 2.0
    third = world.cycle(second.parking)
    assert [a.group for a in third.admitted] == ["team/b"]


def test_a_quota_wait_is_evaluated_again_when_its_queue_frees_quota_and_not_before() -> None:
    world = one_queue_world(gpus=8, quota_gpus=4)
    world.pending["a"] = gang("a", 1, 4, created="2026-01-01T00:00:00Z")
    world.pending["b"] = gang("b", 1, 4, created="2026-01-01T00:00:01Z")
    first = world.cycle(Parking())
    world.apply(first)
    world.now = 1.0
    second = world.cycle(first.parking)
    wait = second.decision("team/b")
    assert isinstance(wait, Wait) and wait.reason is WaitReason.QUOTA and evaluated(second, 1.0) == set()
    # Usage drops without any device change (a charge correction, say): the quota wait is evaluated again.
    admission, allocations = world.held["a"]
    world.held["a"] = (replace(admission, charge=Amounts.of({"gpus": 0})), allocations)
    world.now = 2.0
    third = world.cycle(second.parking)
    assert [a.group for a in third.admitted] == ["team/b"]


def test_a_quota_wait_is_evaluated_again_when_its_quota_is_raised() -> None:
    world = one_queue_world(gpus=8, quota_gpus=2)
    world.pending["a"] = gang("a", 1, 4)
    first = world.cycle(Parking())
    assert not first.admitted
    world.queues = [gpu_queue("main", 4)]
    world.now = 1.0
    assert [a.group for a in world.cycle(first.parking).admitted] == ["team/a"]


def test_a_quota_wait_is_evaluated_again_when_its_cohort_frees_quota() -> None:
    main = model(cluster_queue("main", quota("gpus", 2, borrowing=4), cohort="c"))
    side = model(cluster_queue("side", quota("gpus", 4), cohort="c"))
    world = World(nodes={"n1": 8}, queues=[main, side])
    world.held["s"] = (Admission("team/s", "side", Amounts.of({"gpus": 4}), "team/lq2"), ())
    world.pending["a"] = gang("a", 1, 4)
    first = world.cycle(Parking())
    assert not first.admitted
    world.now = 1.0
    assert evaluated(world.cycle(first.parking), 1.0) == set()
    del world.held["s"]  # its bound pods are gone too, but only the quota tells here
    world.now = 2.0
    assert [a.group for a in world.cycle(first.parking).admitted] == ["team/a"]


def test_a_group_whose_own_pod_changed_is_evaluated_again() -> None:
    world = one_queue_world()
    world.pending["g"] = gang("g", 1, 6)
    first = world.cycle(Parking())
    world.pending["g"] = gang("g", 1, 2)  # its template asks for fewer GPUs now
    world.now = 1.0
    assert [a.group for a in world.cycle(first.parking).admitted] == ["team/g"]


def test_a_parked_group_is_evaluated_again_after_the_safety_period() -> None:
    world = one_queue_world()
    world.pending["big"] = gang("big", 1, 6)
    parking = world.cycle(Parking(safety_seconds=60.0)).parking
    world.now = 59.0
    before = world.cycle(parking)
    assert evaluated(before, 59.0) == set()
    world.now = 60.0
    after = world.cycle(before.parking)
    assert evaluated(after, 60.0) == {"team/big"}


def test_an_admission_not_recorded_by_the_next_cycle_unparks_the_groups() -> None:
    world = one_queue_world()
    world.pending["a"] = gang("a", 1, 4, created="2026-01-01T00:00:00Z")
    world.pending["b"] = gang("b", 1, 4, created="2026-01-01T00:00:01Z")
    first = world.cycle(Parking())
    assert [a.group for a in first.admitted] == ["team/a"]
    world.now = 1.0  # a's record was not written: a is still pending, its devices are free again
    second = world.cycle(first.parking)
    assert evaluated(second, 1.0) == {"team/a"} or [a.group for a in second.admitted] == ["team/a"]
    assert second.parking is not None and "team/b" in second.parking.parked
    assert second.parking.parked["team/b"].since == 1.0


# ----- the differential property --------------------------------------------------------------------
def _seed() -> int:
    if os.environ.get("CI") == "true":
        return 20261127
    return random.randrange(2**32)


def _random_group(rng: random.Random, index: int) -> tuple[str, list[Manifest]]:
    name = f"g{index}"
    size, gpus = rng.choice(((1, 1), (1, 2), (1, 4), (2, 2), (2, 4), (3, 2), (1, 9), (4, 4)))
    created = f"2026-01-01T00:{index // 60:02d}:{index % 60:02d}Z"
    return name, gang(name, size, gpus, created=created, queue=rng.choice(("lq", "lq2")),
                      priority=rng.choice((None, None, 10)))


def seeded_world(rng: random.Random, nodes: dict[str, int], groups: int) -> tuple[World, int]:
    """A world of random queues with `groups` random pending groups; returns it and the next group index."""
    world = World(nodes=nodes, queues=_queues(rng))
    for index in range(groups):
        name, objects = _random_group(rng, index)
        world.pending[name] = objects
    return world, groups


def _step(world: World, rng: random.Random, index: int) -> int:
    """One random event between two cycles; returns the next group index."""
    event = rng.choice(("arrive", "arrive", "finish", "node", "quota", "change", "nothing", "nothing", "late"))
    world.now += 70.0 if event == "late" else rng.choice((0.5, 1.0, 5.0))
    if event == "arrive":
        name, objects = _random_group(rng, index)
        world.pending[name] = objects
        return index + 1
    if event == "finish" and world.held:
        name = rng.choice(sorted(world.held))
        if rng.random() < 0.5:
            world.finish(name)
        else:  # its charge is released before its devices: the quota frees, the capacity counter waits
            del world.held[name]
    elif event == "node":
        world.add_node(f"n{len(world.nodes) + 1}", rng.choice((2, 4, 8)))
    elif event == "quota":
        world.queues = _queues(rng)
    elif event == "change" and world.pending:
        name = rng.choice(sorted(world.pending))
        _, objects = _random_group(rng, int(name[1:]))
        world.pending[name] = objects
    return index


def _queues(rng: random.Random) -> list[ClusterQueue]:
    return [model(cluster_queue("main", quota("gpus", rng.choice((4, 8, 12)), borrowing=rng.choice((0, 4))),
                                cohort="c")),
            model(cluster_queue("side", quota("gpus", rng.choice((2, 4, 8))), cohort="c"))]


def _admits(result: CycleResult) -> Sequence[Admit]:
    return result.admitted


def test_a_cycle_with_parking_admits_exactly_what_a_cycle_without_parking_admits() -> None:
    seed = _seed()
    print(f"parking differential: seed {seed}")
    rng = random.Random(seed)
    cycles = parked_cycles = 0
    for _ in range(25):
        world, index = seeded_world(rng, {"n1": 4, "n2": 8}, groups=6)
        parking: Parking | None = Parking(safety_seconds=60.0)
        for _ in range(14):
            plain = world.cycle(None)
            parked = world.cycle(parking)
            assert _admits(parked) == _admits(plain), f"seed {seed}: admissions differ at cycle {cycles}"
            assert {d.group for d in parked.waiting} == {d.group for d in plain.waiting}, f"seed {seed}"
            parked_cycles += bool(parking is not None and parking.parked)
            parking = parked.parking
            world.apply(plain)
            index = _step(world, rng, index)
            cycles += 1
    assert parked_cycles > cycles // 4, f"seed {seed}: parking was rarely exercised ({parked_cycles}/{cycles})"
