"""The decisions of seeded cycles of topology-constrained groups, pinned: which groups are admitted where (pods'
nodes, claims' devices) and what the others are told. Racks of 4 nodes x 4 GPUs, two NVLink-like cliques per
rack as a device attribute, some GPUs held outside the groups (fragmented racks); gangs of 1-4 pods x 1-4 GPUs
asking `required` or `preferred` of the rack or clique level, or nothing. A change that is meant to be faster
only must leave every decision as it is; `tests/unit/cycle/data/topology_decisions.json` was made by
`python -m tests.unit.cycle.test_topology_decisions` and is made again only for a change of behaviour."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from admission.core.cycle import Admit, Wait
from admission.core.models import TOPOLOGY_PREFERRED_ANNOTATION, TOPOLOGY_REQUIRED_ANNOTATION
from tests.support.builders import CREATED, DRIVER, Manifest, claim, exactly, holding
from tests.unit.cycle.cycle_builders import gang, gpu_queue
from tests.unit.cycle.test_topology import annotated, rack_node, run

PINNED = Path(__file__).parent / "data" / "topology_decisions.json"
SEEDS = range(12)
RACKS, NODES, GPUS = 8, 4, 4


def scene(seed: int) -> list[Manifest]:
    rng = random.Random(seed)
    objects: list[Manifest] = []
    for rack in range(RACKS):
        for n in range(NODES):
            cliques = [f"r{rack}-c{g * 2 // GPUS}" for g in range(GPUS)]
            objects += rack_node(f"r{rack}n{n}", f"r{rack}", GPUS, cliques)
    for index, node_name in enumerate(rng.sample([f"r{r}n{n}" for r in range(RACKS) for n in range(NODES)], 10)):
        objects.append(claim(f"held-{index}", exactly("gpus", count=1), namespace="other",
                             allocation=holding(f"{DRIVER}/{node_name}/gpu-{rng.randrange(GPUS)}", request="gpus")))
    for index in range(rng.randint(18, 26)):
        manifests = gang(f"g{index:02d}", rng.randint(1, 4), rng.randint(1, 4))
        for manifest in manifests:
            if manifest["kind"] == "Pod":
                manifest["metadata"]["creationTimestamp"] = CREATED.replace("00Z", f"{index:02d}Z")
        ask = rng.choice([TOPOLOGY_REQUIRED_ANNOTATION, TOPOLOGY_PREFERRED_ANNOTATION, None])
        objects += annotated(manifests, ask, rng.choice(["rack", "clique"])) if ask else manifests
    return objects


def decisions(seed: int) -> dict[str, Any]:
    result = run(scene(seed), cluster_queue=replace(gpu_queue("main", RACKS * NODES * GPUS), topology="layout"))
    found: dict[str, Any] = {}
    for decision in result.decisions:
        if isinstance(decision, Admit):
            placement = decision.placement
            found[decision.group] = {
                "nodes": dict(sorted(placement.nodes.items())),
                "devices": {key: sorted(r.device_id for r in a.results)
                            for key, a in sorted(placement.allocations.items())}}
        elif isinstance(decision, Wait):
            found[decision.group] = {"wait": decision.reason.value, "message": decision.message}
    return found


@pytest.mark.parametrize("seed", SEEDS)
def test_the_decisions_are_those_pinned(seed: int) -> None:
    pinned = json.loads(PINNED.read_text())[str(seed)]
    assert decisions(seed) == pinned


def test_the_pinned_cycles_admit_and_wait() -> None:
    pinned = json.loads(PINNED.read_text())
    admitted = sum("nodes" in d for seed in SEEDS for d in pinned[str(seed)].values())
    waiting = sum("wait" in d for seed in SEEDS for d in pinned[str(seed)].values())
    assert admitted >= 50 and waiting >= 20  # both kinds of decision are pinned, not only one


if __name__ == "__main__":
    PINNED.write_text(json.dumps({str(seed): decisions(seed) for seed in SEEDS}, indent=1, sort_keys=True) + "\n")
