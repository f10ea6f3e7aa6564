"""Free capacity and fragmentation per topology domain: free devices, the largest gang of whole-node pods a
domain can still take, and the free devices no such pod can use."""

from __future__ import annotations

from admission.core.allocator import DomainFigure, Snapshot, domain_figures
from admission.core.models import Topology, TopologyLevel
from tests.support.builders import DRIVER, claim, device, exactly, holding, models, node, resource_slice
from tests.unit.cycle.cycle_builders import GATES, GPU_CLASS, NS

RACK = TopologyLevel("rack", node_label="example.com/rack")
CLIQUE = TopologyLevel("clique", device_attribute="gpu.example.com/clique")
LAYOUT = Topology("layout", (RACK, CLIQUE))


def rack_node(name: str, rack: str, cliques: list[str]) -> list[object]:
    devices = [device(f"gpu-{i}", {"model": "H100", "gpu.example.com/clique": c}) for i, c in enumerate(cliques)]
    return [node(name, {"kubernetes.io/hostname": name, RACK.node_label or "": rack}),
            resource_slice(name, *devices, name=f"{name}-gpus")]


def held(name: str, node_name: str, *indexes: int) -> object:
    ids = [f"{DRIVER}/{node_name}/gpu-{i}" for i in indexes]
    return claim(name, exactly("gpus", count=len(ids)), namespace=NS, allocation=holding(*ids, request="gpus"))


def figures(*objects: object) -> dict[tuple[str, str], DomainFigure]:
    snapshot = Snapshot.from_models(models(GPU_CLASS, *objects))
    found = domain_figures(snapshot, GATES, [LAYOUT], snapshot.in_use(GATES))
    return {(f.level, f.domain): f for f in found}


def test_a_rack_one_device_short_on_a_node_takes_one_whole_node_pod_fewer() -> None:
    eight = ["x"] * 8
    found = figures(*rack_node("a0", "a", eight), *rack_node("a1", "a", eight), *rack_node("b0", "b", eight),
                    held("one", "a0", 0))
    a, b = found[("rack", "a")], found[("rack", "b")]
    assert (a.nodes, a.devices, a.free, a.pod_devices, a.largest_gang, a.stranded) == (2, 16, 15, 8, 1, 7)
    assert (b.devices, b.free, b.largest_gang, b.stranded) == (8, 8, 1, 0)
    assert a.to_dict()["largestGang"] == 1 and a.to_dict()["stranded"] == 7


def test_a_device_attribute_domain_counts_only_its_own_devices_on_each_node() -> None:
    # Each node holds four GPUs of clique p and four of clique q; a whole-node pod of the clique level is 4.
    split = ["p"] * 4 + ["q"] * 4
    found = figures(*rack_node("a0", "a", split), *rack_node("a1", "a", split), held("one", "a0", 0, 1))
    p, q = found[("clique", "p")], found[("clique", "q")]
    assert (p.nodes, p.devices, p.free, p.pod_devices, p.largest_gang, p.stranded) == (2, 8, 6, 4, 1, 2)
    assert (q.free, q.largest_gang, q.stranded) == (8, 2, 0)


def test_the_domains_reported_per_level_are_bounded() -> None:
    objects = [o for i in range(6) for o in rack_node(f"n{i}", f"r{i}", ["x"] * 2)]
    snapshot = Snapshot.from_models(models(GPU_CLASS, *objects))
    found = domain_figures(snapshot, GATES, [Topology("racks", (RACK,))], snapshot.in_use(GATES), limit=4)
    assert [f.domain for f in found] == ["r0", "r1", "r2", "r3"]
