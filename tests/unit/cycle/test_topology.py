"""Topology-aware gangs in the admission cycle: required and preferred levels, node labels and device
attributes, and the waits for what cannot be had."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from admission.core.allocator import Snapshot
from admission.core.cycle import Admit, Extend, LateWait, Wait, WaitReason, cycle_input, rebuild_state, run_cycle
from admission.core.errors import InvalidInput
from admission.core.models import (
    TOPOLOGY_PREFERRED_ANNOTATION,
    TOPOLOGY_REQUIRED_ANNOTATION,
    Topology,
    TopologyMode,
    TopologyRequest,
    parse_topology,
)
from admission.core.quota import ClusterQueue, PodGroup, parse_pod_group
from tests.support.builders import Manifest, device, draq_object, models, node, pod_group, resource_slice
from tests.unit.cycle.cycle_builders import (
    GATES,
    GPU_CLASS,
    LOCAL_QUEUES,
    NS,
    gang,
    gpu_queue,
    gpu_units,
    group_record,
    groups_of,
    member,
)

RACK = "example.com/rack"
CLIQUE = "gpu.example.com/clique"


def topology(*levels: dict[str, str], name: str = "layout") -> Topology:
    result: Topology = parse_topology(draq_object("Topology", name, {"levels": list(levels)}))
    return result


LAYOUT = topology({"name": "block", "nodeLabel": "example.com/block"}, {"name": "rack", "nodeLabel": RACK},
                  {"name": "clique", "deviceAttribute": CLIQUE})


def rack_node(name: str, rack: str, gpus: int = 4, clique: list[str] | None = None) -> list[Manifest]:
    """A node in `rack` with `gpus` GPUs; `clique`: each GPU's clique attribute."""
    devices = [device(f"gpu-{i}", {"model": "H100", **({"gpu.example.com/clique": clique[i]} if clique else {})},
                      capacity={"memory": "80Gi"}) for i in range(gpus)]
    return [node(name, {"kubernetes.io/hostname": name, RACK: rack}), resource_slice(name, *devices,
                                                                                       name=f"{name}-gpus")]


def queue(topology_name: str | None = "layout") -> ClusterQueue:
    return replace(gpu_queue("main", 64), topology=topology_name)


def annotated(objects: list[Manifest], key: str, level: str) -> list[Manifest]:
    for manifest in objects:
        if manifest["kind"] == "Pod":
            manifest["metadata"].setdefault("annotations", {})[key] = level
    return objects


def run(objects: list[Manifest], *, cluster_queue: ClusterQueue | None = None,
        topologies: tuple[Topology, ...] = (LAYOUT,), invalid: dict[Any, str] | None = None,
        pod_groups: tuple[PodGroup, ...] = ()) -> Any:
    snapshot = Snapshot.from_models(models(GPU_CLASS, *objects))
    groups = groups_of(objects, pod_groups)
    queues = [cluster_queue or queue()]
    cycle = cycle_input(snapshot, GATES, groups, rebuild_state(queues, groups), {q.key: q for q in LOCAL_QUEUES},
                        gpu_units(), topologies={t.name: t for t in topologies}, invalid=invalid or {})
    return run_cycle(cycle)


def two_racks() -> list[Manifest]:
    """Rack a: three nodes of 4 GPUs; rack b: two."""
    return [*rack_node("a-0", "a"), *rack_node("a-1", "a"), *rack_node("a-2", "a"), *rack_node("b-0", "b"),
            *rack_node("b-1", "b")]


def admitted(result: Any, group: str) -> Admit:
    decision = result.decision(f"{NS}/{group}")
    assert isinstance(decision, Admit), decision
    return decision


def waiting(result: Any, group: str) -> Wait:
    decision = result.decision(f"{NS}/{group}")
    assert isinstance(decision, Wait), decision
    return decision


def test_without_a_request_the_gang_takes_the_first_nodes() -> None:
    result = run([*two_racks(), *gang("g", 2, 4)])
    assert sorted(admitted(result, "g").placement.nodes.values()) == ["a-0", "a-1"]


def test_required_rack_takes_the_fullest_rack_that_holds_the_gang() -> None:
    result = run([*two_racks(), *annotated(gang("g", 2, 4), TOPOLOGY_REQUIRED_ANNOTATION, "rack")])
    assert sorted(admitted(result, "g").placement.nodes.values()) == ["b-0", "b-1"]


def test_required_rack_never_spans_racks() -> None:
    result = run([*two_racks(), *annotated(gang("g", 3, 4), TOPOLOGY_REQUIRED_ANNOTATION, "rack")])
    assert sorted(admitted(result, "g").placement.nodes.values()) == ["a-0", "a-1", "a-2"]
    both = run([*two_racks(), *annotated(gang("g", 2, 4, created="2025-01-01T00:00:00Z"),
                                           TOPOLOGY_REQUIRED_ANNOTATION, "rack"),
                *annotated(gang("h", 2, 4, created="2025-01-01T00:00:01Z"), TOPOLOGY_REQUIRED_ANNOTATION, "rack")])
    assert sorted(admitted(both, "g").placement.nodes.values()) == ["b-0", "b-1"]
    assert sorted(admitted(both, "h").placement.nodes.values()) == ["a-0", "a-1"]


def test_a_gang_larger_than_every_rack_is_never_admissible() -> None:
    wait = waiting(run([*two_racks(), *annotated(gang("g", 4, 4), TOPOLOGY_REQUIRED_ANNOTATION, "rack")]), "g")
    assert wait.reason is WaitReason.NEVER_FITS
    assert "needs at least 16 devices in one rack, and the largest rack (a) has 12 devices" in wait.message


def test_a_gang_that_fits_no_rack_now_waits_naming_the_closest() -> None:
    late = annotated(gang("g", 3, 4, created="2025-01-01T00:00:01Z"), TOPOLOGY_REQUIRED_ANNOTATION, "rack")
    objects = [*two_racks(), *gang("first", 1, 4, created="2025-01-01T00:00:00Z"), *late]
    result = run(objects)
    assert admitted(result, "first").placement.nodes == {f"{NS}/first-0": "a-0"}
    wait = waiting(result, "g")
    assert wait.reason is WaitReason.DEVICES
    assert "no rack has the 12 free devices the whole gang needs; the most free: rack a with 8, rack b with 8" \
        in wait.message


def test_the_closest_rack_is_named_with_what_it_lacked() -> None:
    # Rack a has 12 free GPUs but in pieces of 3: a 3-pod gang of 4 GPUs each fits no node there (rack b,
    # with 8, is too small; the cluster as a whole could hold the gang, so it is not NeverAdmissible).
    objects = [*rack_node("a-0", "a", 6), *rack_node("a-1", "a", 3), *rack_node("a-2", "a", 3),
               *rack_node("b-0", "b", 4), *rack_node("b-1", "b", 4),
               *annotated(gang("g", 3, 4), TOPOLOGY_REQUIRED_ANNOTATION, "rack")]
    wait = waiting(run(objects), "g")
    assert wait.reason is WaitReason.DEVICES
    assert "the closest, rack a (12 free devices), took 1 of 3 pods" in wait.message


def test_the_wait_names_the_next_closest_racks_and_how_many_lack_room() -> None:
    # Rack c takes 2 of the 3 pods (nodes of 5, 5 and 3 free GPUs), rack a 1 (6, 3, 3); rack b has 8 in all.
    objects = [*rack_node("a-0", "a", 6), *rack_node("a-1", "a", 3), *rack_node("a-2", "a", 3),
               *rack_node("b-0", "b", 4), *rack_node("b-1", "b", 4),
               *rack_node("c-0", "c", 5), *rack_node("c-1", "c", 5), *rack_node("c-2", "c", 3),
               *annotated(gang("g", 3, 4), TOPOLOGY_REQUIRED_ANNOTATION, "rack")]
    message = waiting(run(objects), "g").message
    assert "the closest, rack c (13 free devices), took 2 of 3 pods" in message
    assert message.endswith("; next: rack a took 1 (12 free); 1 other rack lacks the 12 free devices")


def test_preferred_rack_spans_the_fewest_racks() -> None:
    objects = [*rack_node("a-0", "a"), *rack_node("b-0", "b"), *rack_node("b-1", "b"), *rack_node("c-0", "c"),
               *rack_node("c-1", "c"), *rack_node("c-2", "c"),
               *annotated(gang("g", 4, 4), TOPOLOGY_PREFERRED_ANNOTATION, "rack")]
    nodes = admitted(run(objects), "g").placement.nodes.values()
    racks = {n[0] for n in nodes}
    assert len(racks) == 2 and "c" in racks


def test_preferred_rack_in_one_rack_when_one_holds_it() -> None:
    objects = [*two_racks(), *annotated(gang("g", 2, 4), TOPOLOGY_PREFERRED_ANNOTATION, "rack")]
    assert sorted(admitted(run(objects), "g").placement.nodes.values()) == ["b-0", "b-1"]


def test_device_attribute_domain_restricts_devices_not_just_nodes() -> None:
    # One node with GPUs of two cliques, x with 3 and y with 5: a gang of 2 pods x 2 GPUs requiring one clique
    # gets 4 GPUs of y, none of x, though the node's first GPUs are x's.
    objects = [*rack_node("n-0", "a", 8, clique=["x", "x", "x", "y", "y", "y", "y", "y"]),
               *annotated(gang("g", 2, 2), TOPOLOGY_REQUIRED_ANNOTATION, "clique")]
    decision = admitted(run(objects), "g")
    devices = sorted(r.device for a in decision.placement.allocations.values() for r in a.results)
    assert devices == ["gpu-3", "gpu-4", "gpu-5", "gpu-6"]


def test_device_attribute_domain_too_small_is_never_admissible() -> None:
    objects = [*rack_node("n-0", "a", 8, clique=["x"] * 4 + ["y"] * 4),
               *annotated(gang("g", 2, 3), TOPOLOGY_REQUIRED_ANNOTATION, "clique")]
    wait = waiting(run(objects), "g")
    assert wait.reason is WaitReason.NEVER_FITS
    assert "largest clique (y) has 4 devices" in wait.message


def test_a_level_no_node_has_is_never_admissible() -> None:
    objects = [*two_racks(), *annotated(gang("g", 1, 1), TOPOLOGY_REQUIRED_ANNOTATION, "block")]
    wait = waiting(run(objects), "g")
    assert wait.reason is WaitReason.NEVER_FITS
    assert "no block exists: no node has node label example.com/block" in wait.message


def test_a_level_the_topology_lacks_is_never_admissible() -> None:
    objects = [*two_racks(), *annotated(gang("g", 1, 1), TOPOLOGY_REQUIRED_ANNOTATION, "zone")]
    wait = waiting(run(objects), "g")
    assert wait.reason is WaitReason.NEVER_FITS
    assert "Topology layout (of ClusterQueue main) has no level 'zone'; its levels: block, rack, clique" in wait.message


def test_a_queue_without_topology_cannot_place_a_request() -> None:
    objects = [*two_racks(), *annotated(gang("g", 1, 1), TOPOLOGY_REQUIRED_ANNOTATION, "rack")]
    wait = waiting(run(objects, cluster_queue=queue(None)), "g")
    assert wait.reason is WaitReason.NEVER_FITS
    assert "ClusterQueue main names no Topology (spec.topologyName)" in wait.message


def test_a_missing_topology_stops_only_groups_that_ask() -> None:
    objects = [*two_racks(), *annotated(gang("g", 1, 1), TOPOLOGY_REQUIRED_ANNOTATION, "rack"),
               *gang("plain", 1, 1)]
    result = run(objects, topologies=())
    wait = waiting(result, "g")
    assert wait.reason is WaitReason.QUEUE_INVALID
    assert "names Topology layout, which does not exist" in wait.message
    admitted(result, "plain")


def test_members_that_disagree_make_a_group_problem() -> None:
    objects = gang("g", 2, 1)
    objects[1]["metadata"]["annotations"] = {TOPOLOGY_REQUIRED_ANNOTATION: "rack"}
    objects[2]["metadata"]["annotations"] = {TOPOLOGY_PREFERRED_ANNOTATION: "rack"}
    wait = waiting(run([*two_racks(), *objects]), "g")
    assert wait.reason is WaitReason.INVALID
    assert "members ask different topology levels" in wait.message


def test_pod_group_spec_topology_is_read() -> None:
    manifest = pod_group("g", 2, "lq", namespace=NS)
    manifest["spec"]["topology"] = {"preferred": "rack"}
    assert parse_pod_group(manifest).topology == TopologyRequest(TopologyMode.PREFERRED, "rack")
    manifest["spec"]["topology"] = {"preferred": "rack", "required": "rack"}
    with pytest.raises(InvalidInput, match="set required or preferred, not both"):
        parse_pod_group(manifest)


@pytest.mark.parametrize(("levels", "message"), [
    ([], "must name at least one level"),
    ([{"name": "rack"}], "must set exactly one of nodeLabel and deviceAttribute"),
    ([{"name": "rack", "nodeLabel": "a", "deviceAttribute": "x.io/b"}], "exactly one of"),
    ([{"name": "Rack", "nodeLabel": "a"}], "is not a level name"),
    ([{"name": "rack", "nodeLabel": "a"}, {"name": "rack", "nodeLabel": "b"}], "duplicate level 'rack'"),
    ([{"name": "clique", "deviceAttribute": "cliqueID"}], "write <domain>/<name>"),
    ([{"name": "rack", "nodeLabel": "bad key/x/y"}], "is not a label key"),
])
def test_bad_topologies_are_refused_naming_the_field(levels: list[dict[str, str]], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse_topology(draq_object("Topology", "t", {"levels": levels}))


ADMITTED_IN_B = {"phase": "Admitted", "admittedAt": "2026-01-01T12:00:00Z", "clusterQueue": "main",
                 "charge": [{"unit": "gpus", "amount": "4"}],
                 "plan": {"pods": [{"name": "t-0", "node": "b-0"}],
                          "claims": [{"name": "t-0/gpu", "devices": [
                              {"request": "gpus", "device": f"gpu.example.com/b-0/gpu-{i}"} for i in range(4)]}]}}


def late_objects(racks: list[Manifest]) -> list[Manifest]:
    template = gang("t", 2, 4)[0]
    first = member("t-0", "t", group_min=2, template="t-gpus", gated=False, node="b-0", phase="Running")
    late = member("t-1", "t", group_min=2, template="t-gpus")
    return [*racks, template, *annotated([first, late], TOPOLOGY_REQUIRED_ANNOTATION, "rack")]


def test_a_late_member_of_a_required_rack_joins_its_group_in_that_rack() -> None:
    racks = [*rack_node("a-0", "a"), *rack_node("a-1", "a"), *rack_node("b-0", "b"), *rack_node("b-1", "b")]
    result = run(late_objects(racks), pod_groups=(group_record("t", 2, status=ADMITTED_IN_B),))
    [grown] = [d for d in result.decisions if isinstance(d, Extend)]
    assert grown.placement.nodes == {f"{NS}/t-1": "b-1"}


def test_a_late_member_waits_when_its_groups_rack_is_full() -> None:
    racks = [*rack_node("a-0", "a"), *rack_node("a-1", "a"), *rack_node("b-0", "b")]
    result = run(late_objects(racks), pod_groups=(group_record("t", 2, status=ADMITTED_IN_B),))
    [wait] = [d for d in result.decisions if isinstance(d, LateWait)]
    assert "fit on no node now: inside rack b of the group's plan: pod team/t-1 fits on no node" in wait.message


def test_levels_out_of_order_make_the_groups_that_ask_wait_never_admissible() -> None:
    # Rack a spans blocks x and y, though block comes before rack in the Topology.
    objects = [*rack_node("a-0", "a"), *rack_node("a-1", "a"), *rack_node("b-0", "b")]
    for manifest, block in zip([o for o in objects if o["kind"] == "Node"], ("x", "y", "y"), strict=True):
        manifest["metadata"]["labels"]["example.com/block"] = block
    asking = annotated(gang("g", 1, 4, created="2025-01-01T00:00:00Z"), TOPOLOGY_REQUIRED_ANNOTATION, "rack")
    result = run([*objects, *asking, *gang("plain", 1, 4, created="2025-01-01T00:00:01Z")])
    wait = waiting(result, "g")
    assert wait.reason is WaitReason.NEVER_FITS
    assert ("Topology layout lists its levels out of order: rack a spans block x and block y (nodes labelled "
            "example.com/rack=a), but level block comes before rack") in wait.message
    admitted(result, "plain")  # a group that asks for no level is not affected
    nested = run([*rack_node("a-0", "a"), *rack_node("b-0", "b"), *asking])
    admitted(nested, "g")  # without block labels the nodes cannot tell: nothing is out of order
