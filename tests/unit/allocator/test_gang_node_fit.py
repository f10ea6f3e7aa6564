"""Gang placement where the scheduler's node filters decide: resources next to the pods already on a node
and the group's earlier members, taints, affinity, cordons."""

from __future__ import annotations

from typing import Any

from admission.core.allocator import Allocator, GangPlacement, Snapshot, gang_shape, members_for, place_gang
from admission.core.features import FeatureGates, exactly
from admission.core.models import Pod
from admission.core.nodefit import NodeUsage
from tests.support.builders import (
    Manifest,
    container,
    device,
    device_class,
    models,
    node,
    node_affinity,
    pod,
    requirement,
    resource_slice,
    taint,
    template,
    toleration,
    with_spec,
)
from tests.support.builders import exactly as request

GATES = exactly("1.35", [])
NODE = {"cpu": "4", "memory": "16Gi", "pods": "110"}


def gpu_node(name: str, gpus: int = 4, *, allocatable: dict[str, str] | None = None, **spec: Any) -> list[Manifest]:
    """A node with `gpus` GPUs in its slice (none: a node without devices)."""
    manifests = [with_spec(node(name, {"kubernetes.io/hostname": name}, allocatable=allocatable or NODE), **spec)]
    if gpus:
        manifests.append(resource_slice(name, *(device(f"gpu-{i}") for i in range(gpus)), name=f"{name}-gpus"))
    return manifests


def member(name: str, cpu: str = "1", *, gpus: int = 1, node_name: str = "", phase: str | None = None,
           **spec: Any) -> Manifest:
    """A pod with one container requesting `cpu`, and `gpus` GPUs from template `gpu-<gpus>` (0: no claim)."""
    manifest = pod(name, templates={"gpu": f"gpu-{gpus}"} if gpus else None, node=node_name or None, phase=phase)
    return with_spec(manifest, **{"containers": [container(requests={"cpu": cpu})], **spec})


def place(*manifests: Manifest | list[Manifest], group: tuple[str, ...] = (), gates: FeatureGates = GATES,
          nodes: NodeUsage | None = None) -> GangPlacement:
    """Place the pods named in `group` (default: every pod without spec.nodeName), in that order."""
    flat: list[Manifest] = []
    for item in manifests:
        flat.extend(item if isinstance(item, list) else [item])
    flat += [device_class(), *(template(f"gpu-{n}", request(count=n)) for n in (1, 2, 4))]
    snapshot = Snapshot.from_models(models(*flat))
    pods = [p for p in snapshot.pods.values() if isinstance(p, Pod)]
    chosen = [next(p for p in pods if p.name == n) for n in group] if group else [p for p in pods if not p.node_name]
    members = members_for(chosen, snapshot.claims, snapshot.templates)
    return place_gang(Allocator(snapshot, gates), members, nodes=nodes)


def test_two_pods_that_each_fit_a_node_alone_but_not_together_are_spread() -> None:
    # Devices alone would pack both on n0 (1 GPU each of 4); 3 + 3 cpu do not fit in its 4.
    plan = place(gpu_node("n0"), gpu_node("n1"), member("p0", "3"), member("p1", "3"))
    assert plan.feasible, plan.reason
    assert plan.placements == {"default/p0": "n0", "default/p1": "n1"}


def test_a_group_that_fits_only_as_single_pods_fails_with_the_scheduler_reason() -> None:
    plan = place(gpu_node("n0"), member("p0", "3"), member("p1", "3"))
    assert not plan.feasible and plan.unschedulable
    assert plan.failed_member == "default/p1"
    assert plan.reason == ("pod default/p1 fits on no node after placing 1 other pod(s) of the group: "
                           "0/1 nodes are available: 1 Insufficient cpu")
    assert plan.explanation is None


def test_cpu_taken_by_pods_already_on_the_node_counts_terminated_pods_do_not() -> None:
    busy = member("busy", "3", gpus=0, node_name="n0")
    done = member("done", "4", gpus=0, node_name="n1", phase="Succeeded")
    plan = place(gpu_node("n0"), gpu_node("n1"), busy, done, member("p0", "2"))
    assert plan.placements == {"default/p0": "n1"}


def test_the_pod_count_limit_counts_bound_pods_and_earlier_members() -> None:
    small = {**NODE, "pods": "2"}
    plan = place(gpu_node("n0", allocatable=small), member("busy", gpus=0, node_name="n0"),
                 member("p0"), member("p1"))
    assert not plan.feasible
    assert "0/1 nodes are available: 1 Too many pods" in (plan.reason or "")


def test_nodes_taken_by_the_cycle_so_far_are_passed_in() -> None:
    taken = NodeUsage().plus("n0", {"cpu": 4000})
    plan = place(gpu_node("n0"), gpu_node("n1"), member("p0"), nodes=taken)
    assert plan.placements == {"default/p0": "n1"}


def test_a_tainted_gpu_node_needs_a_toleration() -> None:
    objects = [gpu_node("gpu-node", taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}]),
               gpu_node("cpu-node", gpus=0)]
    plan = place(*objects, member("p0"))
    assert not plan.feasible and plan.unschedulable is False
    assert plan.reason == ("pod default/p0 fits on no node after placing 0 other pod(s) of the group: 0/2 nodes "
                           "are available: 1 cannot allocate all claims, 1 node(s) had untolerated taint "
                           "{gpu: true}; best node cpu-node")
    tolerant = member("p0", tolerations=[toleration("gpu", "true", effect="NoSchedule")])
    assert place(*objects, tolerant).placements == {"default/p0": "gpu-node"}


def test_prefer_no_schedule_taints_do_not_filter() -> None:
    plan = place(gpu_node("n0", taints=[taint("spot", effect="PreferNoSchedule")]), member("p0"))
    assert plan.feasible


def test_node_selector_and_required_affinity_narrow_the_nodes() -> None:
    nodes = gpu_node("n0") + gpu_node("n1")
    nodes[0]["metadata"]["labels"]["zone"] = "a"
    by_selector = member("p0", nodeSelector={"zone": "a"})
    assert place(*nodes, by_selector).placements == {"default/p0": "n0"}
    by_affinity = member("p0", affinity=node_affinity([requirement("zone", "DoesNotExist")]))
    assert place(*nodes, by_affinity).placements == {"default/p0": "n1"}
    nowhere = member("p0", nodeSelector={"zone": "b"})
    plan = place(*nodes, nowhere)
    assert plan.unschedulable
    assert "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector" in (plan.reason or "")


def test_cordoned_nodes_are_skipped_unless_tolerated() -> None:
    cordoned = gpu_node("n0", unschedulable=True)
    plan = place(cordoned, member("p0"))
    assert plan.unschedulable and "1 node(s) were unschedulable" in (plan.reason or "")
    tolerant = member("p0", tolerations=[toleration("node.kubernetes.io/unschedulable", operator="Exists")])
    assert place(cordoned, tolerant).feasible


def test_sidecars_init_containers_and_overhead_count() -> None:
    # 2 (container) + 1 (sidecar) + 1 (overhead) = 4 cpu: exactly the node's.
    exact = member("p0", "2", initContainers=[container("proxy", requests={"cpu": "1"}, restart_policy="Always")],
                   overhead={"cpu": "1"})
    assert place(gpu_node("n0"), exact).feasible
    # an init container of 3 cpu runs next to the 1-cpu sidecar started before it: 4 + overhead 1 > 4.
    peak = member("p0", "1", initContainers=[container("proxy", requests={"cpu": "1"}, restart_policy="Always"),
                                             container("setup", requests={"cpu": "3"})], overhead={"cpu": "1"})
    plan = place(gpu_node("n0"), peak)
    assert not plan.feasible and "1 Insufficient cpu" in (plan.reason or "")


def test_an_earlier_member_moves_when_a_later_one_only_fits_where_it_went() -> None:
    # p0 (1 cpu) goes first to n0; p1 (4 cpu) may only use n0: p0 moves to n1.
    only_n0 = member("p1", "4", affinity=node_affinity(fields=[[requirement("metadata.name", "In", "n0")]]))
    plan = place(gpu_node("n0"), gpu_node("n1"), member("p0", "1"), only_n0, group=("p0", "p1"))
    assert plan.placements == {"default/p0": "n1", "default/p1": "n0"}


def test_devices_still_decide_among_nodes_that_pass_the_filters() -> None:
    plan = place(gpu_node("n0", gpus=2), gpu_node("n1", gpus=4), member("p0", gpus=4))
    assert plan.placements == {"default/p0": "n1"}
    short = place(gpu_node("n0", gpus=2), member("p0", gpus=4))
    assert not short.feasible and not short.unschedulable
    assert short.reason == "pod default/p0 fits on no node after placing 0 other pod(s) of the group; best node n0"


def test_dra_backed_extended_resources_come_from_devices_on_nodes_without_a_device_plugin() -> None:
    gated = exactly("1.35", ["DRAExtendedResource"])
    objects = [gpu_node("dra", gpus=2), gpu_node("plugin", gpus=0, allocatable={**NODE, "example.com/gpu": "1"}),
               device_class("gpu-er", extended_resource="example.com/gpu")]
    wants = member("p0", gpus=0, containers=[container(requests={"cpu": "1", "example.com/gpu": "2"})])
    # Node "dra" does not list example.com/gpu: with the gate, the scheduler allocates 2 of its devices.
    plan = place(*objects, wants, gates=gated)
    assert plan.placements == {"default/p0": "dra"}
    (claim_key,) = plan.allocations
    assert claim_key == "default/p0/#extended-resources"
    assert [(r.request, r.device) for r in plan.allocations[claim_key].results] == [
        ("container-0-request-1", "gpu-0"), ("container-0-request-1", "gpu-1")]
    # A second pod finds node "dra" out of devices and "plugin" with one device-plugin GPU, not two.
    second = with_spec(member("p1", gpus=0), containers=[container(requests={"example.com/gpu": "2"})])
    failed = place(*objects, wants, second, gates=gated)
    assert not failed.feasible and failed.failed_member == "default/p1"
    assert ("0/2 nodes are available: 1 Insufficient example.com/gpu, 1 cannot allocate all claims"
            in (failed.reason or ""))
    # Without the gate the resource must be listed by the node, as any extended resource.
    plain = place(*objects, wants)
    assert not plain.feasible
    assert "0/2 nodes are available: 2 Insufficient example.com/gpu" in (plain.reason or "")


def test_a_dra_backed_extended_resource_must_be_whole_devices() -> None:
    gated = exactly("1.35", ["DRAExtendedResource"])
    objects = [gpu_node("dra"), device_class("gpu-er", extended_resource="example.com/gpu")]
    half = member("p0", gpus=0, containers=[container(requests={"example.com/gpu": "500m"})])
    plan = place(*objects, half, gates=gated)
    assert not plan.feasible and plan.unschedulable
    assert plan.reason == ("pod default/p0 fits on no node after placing 0 other pod(s) of the group: 0/1 nodes "
                           "are available: 1 container main: example.com/gpu 500m is not a whole number of devices")


def test_dra_backed_extended_resources_of_init_containers_only_are_not_placed() -> None:
    gated = exactly("1.35", ["DRAExtendedResource"])
    objects = [gpu_node("dra"), device_class("gpu-er", extended_resource="example.com/gpu")]
    init_only = member("p0", gpus=0, initContainers=[container("warmup", requests={"example.com/gpu": "1"})])
    plan = place(*objects, init_only, gates=gated)
    assert not plan.feasible
    assert plan.reason is not None and plan.reason.endswith(
        "1 example.com/gpu of init containers would come from DRA devices, which draq does not map")


def test_with_dra_backed_extended_resources_on_only_gangs_asking_for_one_lose_their_shared_shape() -> None:
    """A gang's shape lets gangs placed alike share one answer; a member asking for a resource that DRA
    devices serve is placed by the nodes' allocatable and a claim of its own, so its gang has none."""
    gated = exactly("1.37", ["DRAExtendedResource"])
    flat = [*gpu_node("n0"), device_class(), device_class("gpu-er", extended_resource="example.com/gpu"),
            template("gpu-1", request(count=1)), member("plain"),
            member("asks", gpus=0, containers=[container(requests={"example.com/gpu": "1"})]),
            member("cpu-only", gpus=0)]
    snapshot = Snapshot.from_models(models(*flat))
    allocator = Allocator(snapshot, gated)

    def shape(name: str) -> object | None:
        chosen = [p for p in snapshot.pods.values() if isinstance(p, Pod) and p.name == name]
        return gang_shape(allocator, members_for(chosen, snapshot.claims, snapshot.templates))

    assert shape("plain") is not None and shape("cpu-only") is not None
    assert shape("asks") is None
