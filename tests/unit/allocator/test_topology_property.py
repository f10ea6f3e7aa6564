"""Property tests of placement by topology, on small random inventories (seeded: each case names its seed).

Each answer is checked against an exhaustive search written here, not against the placement code: with
every member asking `g` whole GPUs of one class, a set of nodes holds a gang of `k` members exactly when
the nodes' `floor(free GPUs / g)` add up to `k`.
"""

from __future__ import annotations

import random
from itertools import combinations
from typing import Any

import pytest

from admission.core.allocator import (
    Allocator,
    DomainPlacement,
    GangMember,
    Snapshot,
    devices_needed,
    members_for,
    place_in_topology,
)
from admission.core.features import gates_for
from admission.core.models import Pod, ResourceClaim, TopologyLevel, TopologyMode
from tests.support.builders import (
    Manifest,
    all_devices,
    claim,
    device,
    device_class,
    exactly,
    first_available,
    model,
    models,
    node,
    pod,
    resource_slice,
    template,
)

RACK = TopologyLevel("rack", node_label="example.com/rack")
CLIQUE = TopologyLevel("clique", device_attribute="gpu.example.com/clique")
SEEDS = range(200)
NS = "team"


def _gang(size: int, gpus_each: int) -> list[Manifest]:
    return [template("t", {"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": gpus_each}}, namespace=NS),
            *(pod(f"m-{i}", NS, queue="lq", group="g", group_min=size, gated=True, templates={"gpu": "t"})
              for i in range(size))]


def _place(objects: list[Manifest], mode: TopologyMode, level: TopologyLevel) -> DomainPlacement:
    snapshot = Snapshot.from_models(models(device_class("gpu"), *objects))
    allocator = Allocator(snapshot, gates_for("1.34"))
    pods = sorted((p for p in snapshot.pods.values() if isinstance(p, Pod)), key=lambda p: p.name)
    members = members_for(pods, snapshot.claims, snapshot.templates)
    return place_in_topology(allocator, members, mode, level, usage=allocator.usage, nodes=snapshot.node_fit.usage)


def _racks(rng: random.Random) -> dict[str, dict[str, int]]:
    """rack -> node -> GPUs."""
    return {f"r{r}": {f"r{r}-n{n}": rng.randint(1, 4) for n in range(rng.randint(1, 3))}
            for r in range(rng.randint(2, 5))}


def _rack_objects(racks: dict[str, dict[str, int]]) -> list[Manifest]:
    objects: list[Manifest] = []
    for rack, nodes in racks.items():
        for name, gpus in nodes.items():
            objects.append(node(name, {"kubernetes.io/hostname": name, "example.com/rack": rack}))
            objects.append(resource_slice(name, *(device(f"gpu-{i}") for i in range(gpus)), name=f"{name}-gpus"))
    return objects


def _holds(racks: dict[str, dict[str, int]], chosen: tuple[str, ...], size: int, gpus_each: int) -> bool:
    return sum(gpus // gpus_each for rack in chosen for gpus in racks[rack].values()) >= size


def _fewest_racks(racks: dict[str, dict[str, int]], size: int, gpus_each: int) -> int | None:
    for count in range(1, len(racks) + 1):
        if any(_holds(racks, chosen, size, gpus_each) for chosen in combinations(racks, count)):
            return count
    return None


def _case(seed: int) -> tuple[dict[str, dict[str, int]], int, int]:
    rng = random.Random(seed)
    return _racks(rng), rng.randint(1, 6), rng.randint(1, 3)


def _racks_used(result: DomainPlacement, racks: dict[str, dict[str, int]]) -> set[str]:
    rack_of = {name: rack for rack, nodes in racks.items() for name in nodes}
    return {rack_of[n] for n in result.placement.placements.values()}


@pytest.mark.parametrize("seed", SEEDS)
def test_required_level_is_never_planned_across_domains(seed: int) -> None:
    racks, size, gpus_each = _case(seed)
    result = _place([*_rack_objects(racks), *_gang(size, gpus_each)], TopologyMode.REQUIRED, RACK)
    possible = _fewest_racks(racks, size, gpus_each) == 1
    case = f"seed {seed}: racks {racks}, {size} pods x {gpus_each} GPUs"
    assert result.placement.feasible == possible, case
    if possible:
        used = _racks_used(result, racks)
        assert len(used) == 1 and _holds(racks, tuple(used), size, gpus_each), case
        assert result.domains == tuple(used), case
        # Best fit: no rack with fewer GPUs (fewer nodes on a tie) could have held the gang.
        (rack,) = used
        key = (sum(racks[rack].values()), len(racks[rack]), rack)
        assert all(not _holds(racks, (other,), size, gpus_each) for other in racks
                   if (sum(racks[other].values()), len(racks[other]), other) < key), case


@pytest.mark.parametrize("seed", SEEDS)
def test_preferred_level_uses_the_fewest_domains_an_exhaustive_search_finds(seed: int) -> None:
    racks, size, gpus_each = _case(seed)
    result = _place([*_rack_objects(racks), *_gang(size, gpus_each)], TopologyMode.PREFERRED, RACK)
    fewest = _fewest_racks(racks, size, gpus_each)
    case = f"seed {seed}: racks {racks}, {size} pods x {gpus_each} GPUs"
    assert result.placement.feasible == (fewest is not None), case
    if fewest is not None:
        assert len(_racks_used(result, racks)) == fewest, case


def _clique_objects(rng: random.Random) -> tuple[list[Manifest], dict[str, dict[str, int]]]:
    """Nodes whose GPUs belong to random cliques; also clique -> node -> its GPUs there."""
    objects: list[Manifest] = []
    counts: dict[str, dict[str, int]] = {}
    for n in range(rng.randint(1, 3)):
        name = f"n{n}"
        cliques = [rng.choice("xyz") for _ in range(rng.randint(1, 8))]
        objects.append(node(name, {"kubernetes.io/hostname": name}))
        objects.append(resource_slice(name, *(device(f"gpu-{i}", {"gpu.example.com/clique": c})
                                              for i, c in enumerate(cliques)), name=f"{name}-gpus"))
        for clique in cliques:
            counts.setdefault(clique, {}).setdefault(name, 0)
            counts[clique][name] += 1
    return objects, counts


@pytest.mark.parametrize("seed", SEEDS)
def test_required_device_attribute_uses_devices_of_one_domain(seed: int) -> None:
    rng = random.Random(seed)
    objects, counts = _clique_objects(rng)
    size, gpus_each = rng.randint(1, 4), rng.randint(1, 3)
    result = _place([*objects, *_gang(size, gpus_each)], TopologyMode.REQUIRED, CLIQUE)
    possible = any(_holds(counts, (clique,), size, gpus_each) for clique in counts)
    case = f"seed {seed}: cliques {counts}, {size} pods x {gpus_each} GPUs"
    assert result.placement.feasible == possible, case
    if possible:
        clique_of = _device_cliques(objects)
        used = {clique_of[r.device_id] for a in result.placement.allocations.values() for r in a.results}
        assert len(used) == 1 and result.domains == tuple(used), case


def _device_cliques(objects: list[Manifest]) -> dict[str, Any]:
    found = {}
    for manifest in objects:
        if manifest["kind"] == "ResourceSlice":
            spec = manifest["spec"]
            for entry in spec["devices"]:
                device_id = f"{spec['driver']}/{spec['pool']['name']}/{entry['name']}"
                found[device_id] = entry["attributes"]["gpu.example.com/clique"]["string"]
    return found


def test_devices_needed_counts_each_claim_once_and_the_least_each_request_takes() -> None:
    shared: ResourceClaim = model(claim("shared", exactly(count=2), namespace=NS))
    own: ResourceClaim = model(claim("own", first_available("gpu", exactly("big", count=4), exactly("small", count=1)),
                                     all_devices("all"), namespace=NS))
    admin: ResourceClaim = model(claim("admin", exactly(count=3, adminAccess=True), namespace=NS))
    members = [GangMember("a", (shared, own)), GangMember("b", (shared, admin))]
    assert devices_needed(members) == 2 + 1 + 1 + 0
