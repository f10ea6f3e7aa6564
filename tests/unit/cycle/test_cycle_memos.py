"""What a cycle keeps to answer faster gives the same decisions as working everything out again: each
LocalQueue's head and BehindInQueue Waits and the groups that passed the checks before ordering (kept from
one cycle to the next in `Parking`), the charges of a shape (its worst case, and on the empty cluster for
the NeverAdmissible check), the nodes' explanations kept by the allocator, the nodes not explained because they
cannot come closer than the best so far, and what did not fit carried over an admission (the (shape, node) pairs
and how many candidates from the first a gang search may skip), and what a node lacks for a pod's requests
kept while the node's use is unchanged."""

from __future__ import annotations

import importlib
import os
import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

import pytest

from admission.core.allocator import Allocator, Explanation, KnownUnfit, Usage, explain
from admission.core.cycle import Changes, CycleInput, GroupView, Parking, run_cycle
from admission.core.models import Node, ResourceClaim
from admission.core.nodefit import resource_reasons
from tests.unit.cycle.cycle_builders import cycle_input
from tests.unit.cycle.test_parking import QUEUES, World, _queues, _step, seeded_world


def _seed() -> int:
    if os.environ.get("CI") == "true":
        return 20261127
    return random.randrange(2**32)


class _Views:
    """The operator's way with group views: an unchanged group is handed on as the same object, and the same
    tuple of groups while none changed (`operator.grouping`)."""

    def __init__(self) -> None:
        self.kept: dict[str, GroupView] = {}
        self.last: tuple[GroupView, ...] | None = None

    def inputs(self, world: World, budget: int, misses: int) -> CycleInput:
        promised = tuple(a for _, allocations in world.held.values() for a in allocations)
        base = cycle_input(world.objects(), world.queues, QUEUES, promised=promised)
        groups = tuple(self._same(g) for g in base.groups)
        if self.last is not None and len(self.last) == len(groups) and \
                all(a is b for a, b in zip(self.last, groups, strict=True)):
            groups = self.last
        self.last, self.kept = groups, {g.key: g for g in groups}
        return replace(base, state=world.state(), groups=groups, queue_budget=budget, queue_misses=misses)

    def _same(self, group: GroupView) -> GroupView:
        kept = self.kept.get(group.key)
        return kept if kept is not None and kept == group else group


def _forgetful(parking: Parking) -> Parking:
    """The parking without what is kept only to answer faster."""
    return replace(parking, lines=None, prechecked=None, behind={})


@contextmanager
def _without_memos(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    explaining = importlib.import_module("admission.core.allocator.explain")  # the package's `explain` is a function
    never = importlib.import_module("admission.core.cycle.never")

    def unkept(allocator: Allocator, node: Node | str, claims: Sequence[ResourceClaim], keys: tuple[str, ...],
               usage: Usage, shape: str) -> tuple[Explanation, tuple[str, ...]]:
        return explain(allocator, node, claims, usage), keys

    gang = importlib.import_module("admission.core.allocator.gang")

    class Unremembering(gang._State):  # type: ignore[name-defined,misc]
        """A gang search's state that walks its candidates from the first every time (no `starts`)."""

        def __init__(self, *fields: object) -> None:
            super().__init__(*fields)
            self.starts = _Forgetting()

    with monkeypatch.context() as patched:
        patched.setattr(explaining, "_kept", unkept)
        patched.setattr(never, "shape_key", lambda *_: None)
        patched.setattr(Allocator, "known_wants", lambda *_: None)  # every candidate node explained
        patched.setattr(KnownUnfit, "after_admission", lambda _, full: KnownUnfit(full=full))
        patched.setattr(gang, "_State", Unremembering)
        patched.setattr(gang, "_resource_reasons",
                        lambda _memo, fit, facts, _node, used: tuple(resource_reasons(fit, facts, used)))
        yield


class _Forgetting(dict[tuple[str, object], int]):
    def __setitem__(self, key: tuple[str, object], value: int) -> None:
        pass


@pytest.mark.parametrize(("budget", "misses"), [(64, 8), (3, 2)])
def test_the_cycles_memos_give_the_same_decisions_as_working_everything_out_again(
        monkeypatch: pytest.MonkeyPatch, budget: int, misses: int) -> None:
    seed = _seed()
    print(f"cycle memos differential: seed {seed}")
    rng = random.Random(seed)
    cycles = reused = 0
    for _ in range(20):
        world, index = seeded_world(rng, {"n1": 4, "n2": 8, "n3": 8}, groups=8)
        views = _Views()
        fast: Parking = Parking(safety_seconds=60.0)
        slow: Parking = Parking(safety_seconds=60.0)
        for _ in range(14):
            cycle = views.inputs(world, budget, misses)
            changes = Changes(world.capacity, world.now)
            quick = run_cycle(replace(cycle, parking=fast.fed(changes)))
            with _without_memos(monkeypatch):
                worked_out = run_cycle(replace(cycle, parking=_forgetful(slow).fed(changes)))
            assert quick.decisions == worked_out.decisions, f"seed {seed}: decisions differ at cycle {cycles}"
            assert quick.state == worked_out.state, f"seed {seed}: accounting differs at cycle {cycles}"
            reused += fast.lines is not None and fast.lines.source is cycle.groups
            assert quick.parking is not None and worked_out.parking is not None
            fast, slow = quick.parking, worked_out.parking
            world.apply(quick)
            index = _step(world, rng, index)
            if rng.random() < 0.15:  # ClusterQueue `side` deleted, or back: what the checks before ordering read
                queues = [q for q in world.queues if q.name != "side"]
                world.queues = queues if len(queues) < len(world.queues) else _queues(rng)
            cycles += 1
    assert reused > cycles // 10, f"seed {seed}: unchanged groups were rarely handed on ({reused}/{cycles})"

