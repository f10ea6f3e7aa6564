"""The victims of seeded preemptions, pinned: which groups each waiting gang evicts, the nodes it is then
planned on, and what every waiting gang is told. Racks of 3-8 nodes x 4 or 8 GPUs, mostly held by running
groups of one to three pods (some spanning two racks) at priorities 0-3, admitted at different times; one
ClusterQueue, or two in a cohort that reclaim from each other; two gangs of 1-4 pods that require one rack or
ask for nothing. A change that is meant to be faster only must leave every decision as it is;
`tests/unit/preemption/data/victim_decisions.json` was made by
`python -m tests.unit.preemption.test_victim_decisions` and is made again only for a change of behaviour."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from tests.unit.preemption.scenes import Scene, queue
from tests.unit.preemption.test_domains import REQUIRED, racks

PINNED = Path(__file__).parent / "data" / "victim_decisions.json"
SEEDS = range(60)


def scene(seed: int) -> Scene:
    rng = random.Random(seed)
    gpus = rng.choice([4, 8])
    shape = {rack: rng.randint(3, 8) for rack in "abcde"[:rng.randint(2, 5)]}
    scene = racks(Scene(), shape, gpus)
    total = gpus * sum(shape.values())
    cohort = rng.random() < 0.3
    names = ["main", "other"] if cohort else ["main"]
    for name in names:
        share = total // len(names)
        scene.cluster_queue(queue(name, rng.randint(share // 2, share), cohort="all" if cohort else None,
                                  within="LowerPriority", reclaim="Any" if cohort else "Never",
                                  borrow="LowerPriority" if cohort else "Never", topology="layout"))
    free = {f"{rack}{i}": gpus for rack, count in shape.items() for i in range(count)}
    for index in range(rng.randint(6, 40)):
        _running(scene, rng, f"r{index:02d}", rng.choice(names), free)
    for index in range(2):
        scene.waiting(f"big{index}", "main", rng.randint(1, 4), rng.choice([g for g in (1, 2, 4, 8) if g <= gpus]),
                      priority=rng.randint(4, 6), topology=REQUIRED if rng.random() < 0.7 else None)
    return scene


def _running(scene: Scene, rng: random.Random, group: str, cq: str, free: dict[str, int]) -> None:
    """A running group of one to three pods on nodes with free GPUs: mostly in one rack, sometimes in two."""
    open_nodes = [n for n, f in free.items() if f]
    if not open_nodes:
        return
    rack = rng.choice(open_nodes)[0]
    near = [n for n in open_nodes if n[0] == rack]
    pool = open_nodes if rng.random() < 0.15 else near
    chosen = rng.sample(pool, min(len(pool), rng.randint(1, 3)))
    placement = [(node, rng.randint(1, free[node])) for node in chosen]
    for node, count in placement:
        free[node] -= count
    scene.running(group, cq, placement, priority=rng.randint(0, 3), admitted_minutes_ago=rng.randint(1, 600))


def decisions(seed: int) -> dict[str, Any]:
    _, _, plan = scene(seed).run()
    found: dict[str, Any] = {group: {"message": wait.message} for group, wait in sorted(plan.waits.items())}
    for preempt in plan.preempts:
        found.setdefault(preempt.group, {}).update(victims=list(preempt.victims), nodes=list(preempt.nodes))
    return found


@pytest.mark.parametrize("seed", SEEDS)
def test_the_victims_are_those_pinned(seed: int) -> None:
    pinned = json.loads(PINNED.read_text())[str(seed)]
    assert decisions(seed) == pinned


def test_the_pinned_searches_preempt_inside_racks_and_anywhere() -> None:
    pinned = json.loads(PINNED.read_text())
    found = [d for seed in SEEDS for d in pinned[str(seed)].values()]
    in_rack = sum("victims" in d and " in rack " in d["message"] for d in found)
    anywhere = sum("victims" in d and " in rack " not in d["message"] for d in found)
    refused = sum("no preemption" in d["message"] for d in found)
    assert in_rack >= 15 and anywhere >= 5 and refused >= 5, (in_rack, anywhere, refused)


if __name__ == "__main__":
    PINNED.write_text(json.dumps({str(seed): decisions(seed) for seed in SEEDS}, indent=1, sort_keys=True) + "\n")
