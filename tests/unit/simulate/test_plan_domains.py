"""Planning whole domains: groups that require a rack get added racks of an existing rack's shape (not loose
nodes, which no rack holds); a simulation reads Topologies as the operator does."""

from __future__ import annotations

from typing import Any

from admission.core.simulate import SimulationSettings, plan_domains, plan_nodes
from admission.core.simulate.inputs import load
from tests.support import builders as b
from tests.unit.simulate.test_plan import GATES, START, maker
from tests.unit.simulate.test_simulate import cluster, gang

RACK, BLOCK = "example.com/rack", "example.com/block"
SETTINGS = SimulationSettings(GATES, START, None)


def racked(topology_name: str | None = "layout") -> list[dict[str, Any]]:
    """Rack a of two 8-GPU nodes in block x, a Topology (block, rack), quota for 64 GPUs; three gangs of 2 x 8
    GPUs that require a rack: one fits, two wait."""
    objects = cluster(nodes=2, gpus=8, quota=64)
    for manifest in objects:
        if manifest["kind"] == "Node":
            manifest["metadata"].setdefault("labels", {}).update({RACK: "a", BLOCK: "x"})
        if manifest["kind"] == "ClusterQueue" and topology_name:
            manifest["spec"]["topologyName"] = topology_name
    objects.append(b.draq_object("Topology", "layout", {"levels": [{"name": "block", "nodeLabel": BLOCK},
                                                                   {"name": "rack", "nodeLabel": RACK}]}))
    for index in range(3):
        members = gang(f"g{index}", 2, 8, created=f"2026-01-01T00:00:0{index}Z")
        for manifest in members:
            if manifest["kind"] == "Pod":
                manifest["metadata"]["annotations"] = {"draq.io/topology-required": "rack"}
        objects += members
    return objects


def test_a_simulation_places_required_groups_inside_one_rack() -> None:
    loaded = load(racked(), GATES)
    assert set(loaded.cluster.topologies) == {"layout"}
    plan = plan_domains(loaded.cluster, SETTINGS, ["big"], maker({"big": 8}))
    assert plan is not None
    assert (plan.level, plan.template, plan.nodes_each, plan.profile, plan.count) == ("rack", "a", 2, "big", 2)
    assert sorted(plan.admitted) == ["default/g1", "default/g2"] and plan.unplannable == ()  # g0 fits now
    # Each gang sits in one rack: rack a (node-0, node-1), or a planned one (add-big-0 and -1, or -2 and -3).
    def rack(node: str) -> str:
        return "a" if node.startswith("node-") else f"planned-{int(node.rsplit('-', 1)[1]) // 2}"

    placed = {o.group: {rack(node) for _, node in o.nodes} for o in plan.result.outcomes if o.nodes}
    assert sorted(placed) == ["default/g0", "default/g1", "default/g2"]
    assert sorted(r for racks in placed.values() for r in racks) == ["a", "planned-0", "planned-1"]
    assert plan.lines()[0].startswith("domain plan: the waiting groups ask for rack domains, so whole racks are "
                                      "planned, not loose nodes: add 2 rack(s) shaped like rack a (2 × big each, "
                                      "4 node(s)): 2 of 2 waiting group(s) admitted")
    assert plan.to_dict()["nodes"] == {"big": 4}


def test_loose_nodes_would_not_admit_them() -> None:
    loaded = load(racked(), GATES)
    loose = plan_nodes(loaded.cluster, SETTINGS, ["big"], maker({"big": 8}))
    assert loose.admitted == ()  # nodes without a rack label are in no rack


def test_groups_without_a_level_are_planned_as_loose_nodes() -> None:
    objects = [*cluster(nodes=1, gpus=8, quota=64), *gang("plain", 2, 8)]
    assert plan_domains(load(objects, GATES).cluster, SETTINGS, ["big"], maker({"big": 8})) is None
