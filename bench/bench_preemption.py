"""Preemption benchmark: the victim search for one 32-pod gang (8 GPUs per pod) over 2,000 admitted groups
on 512 nodes x 8 GPUs.

The admitted groups are running, each pod bound and holding its GPUs: 1,196 of one GPU, 500 of two, 254 of
four and 50 gangs of 2 x 4 GPUs, packed first-fit onto the nodes in a shuffled order (3,612 of 4,096 GPUs
held, the free ones scattered), with priorities 0-3 and admission times over the last day. The gang has
priority 10 in the same ClusterQueue (withinClusterQueue LowerPriority, nominal 3,700 GPUs): it fits
neither its quota nor the devices, and needs 32 whole nodes. The figure is `plan_preemptions` after the
cycle: what each admitted group holds, the candidates in order, and the node-aware search.

With `--racks N` the nodes are labelled into N racks (`example.com/rack`, a Topology `layout` with that
one level on the queue), and the racks the victims are in are counted; with `--required` too, the gang
requires one rack (`spec.topology: {required: rack}`): its victims are searched inside one rack at a time
(at most 16 racks).

Prints the median and the range of --repeat runs (CPU time), the victims chosen, the gang placements the
search ran, and the 1-minute load average. The set-up's objects are frozen out of the cycle collector's view
first, as the operator does after each pass (`admission.operator.heap`); `--unfrozen` leaves them.

    .venv/bin/python bench/bench_preemption.py [--repeat N] [--seed N] [--racks N [--required]] [--unfrozen]
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import os
import random
import statistics
import time
from typing import Any

from inventory import DRIVER, NODE_ALLOCATABLE, cluster_manifests

from admission.core.allocator import Snapshot
from admission.core.cycle import CycleInput, Wait, collect_groups, rebuild_state, run_cycle
from admission.core.cycle.preemption import plan_preemptions
from admission.core.features import gates_for
from admission.core.labels import GATE, GROUP_LABEL, GROUP_MIN_LABEL, QUEUE_LABEL
from admission.core.models import Pod, Topology, TopologyLevel, parse_objects
from admission.core.quota import (
    DraCel,
    LocalQueue,
    compile_unit,
    device_selected,
    parse_cluster_queue,
    parse_pod_group,
    parse_quota_unit,
)

NAMESPACE = "bench"
GATES = gates_for("1.35")
NODES, GPUS = 512, 8
NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
RACK_LABEL = "example.com/rack"
LAYOUT = Topology("layout", (TopologyLevel("rack", node_label=RACK_LABEL),))
SHAPES = [(1, 1)] * 1196 + [(1, 2)] * 500 + [(1, 4)] * 254 + [(2, 4)] * 50  # (pods, GPUs each)


def stamp(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def labels(group: str, size: int) -> dict[str, str]:
    return {QUEUE_LABEL: "main", GROUP_LABEL: group, GROUP_MIN_LABEL: str(size)}


def running_group(group: str, placement: list[tuple[str, list[int]]], priority: int,
                  admitted: dt.datetime) -> list[dict[str, Any]]:
    """Bound pods, each with a claim holding its GPUs, and the PodGroup recording the admission."""
    manifests: list[dict[str, Any]] = []
    for i, (node, gpus) in enumerate(placement):
        name = f"{group}-{i}"
        manifests.append({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": f"{name}-gpu", "namespace": NAMESPACE},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu",
                                                                           "count": len(gpus)}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpus", "driver": DRIVER, "pool": node, "device": f"gpu-{g}"} for g in gpus]}},
                "reservedFor": [{"resource": "pods", "name": name, "uid": name}]}})
        manifests.append({
            "apiVersion": "v1", "kind": "Pod", "status": {"phase": "Running"},
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels(group, len(placement)),
                         "creationTimestamp": stamp(admitted)},
            "spec": {"nodeName": node, "priority": priority,
                     "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}]}})
    manifests.append(pod_group(group, len(placement), priority, {
        "phase": "Running", "clusterQueue": "main", "admittedAt": stamp(admitted),
        "charge": [{"unit": "gpus", "amount": str(sum(len(g) for _, g in placement))}],
        "plan": {"pods": [{"name": f"{group}-{i}", "node": node} for i, (node, _) in enumerate(placement)]}}))
    return manifests


def pod_group(group: str, size: int, priority: int, status: dict[str, Any],
              topology: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": size, "queue": "main", "priority": priority}
    if topology:
        spec["topology"] = topology
    return {"apiVersion": "draq.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": group, "namespace": NAMESPACE},
            "spec": spec, "status": status}


def waiting_gang(group: str, size: int, gpus_each: int, priority: int,
                 topology: dict[str, str] | None = None) -> list[dict[str, Any]]:
    template = f"{group}-gpus"
    manifests: list[dict[str, Any]] = [{
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": template, "namespace": NAMESPACE},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu",
                                                                               "count": gpus_each}}]}}}}]
    for i in range(size):
        manifests.append({
            "apiVersion": "v1", "kind": "Pod", "status": {"phase": "Pending"},
            "metadata": {"name": f"{group}-{i}", "namespace": NAMESPACE, "labels": labels(group, size),
                         "creationTimestamp": stamp(NOW)},
            "spec": {"priority": priority, "containers": [{"name": "main", "resources": {"requests": {"cpu": "4"}}}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                     "schedulingGates": [{"name": GATE}]}})
    manifests.append(pod_group(group, size, priority, {}, topology))
    return manifests


def scenario(seed: int, racks: int = 0, required: bool = False) -> CycleInput:
    rng = random.Random(seed)
    free = {f"node-{n:05d}": list(range(GPUS)) for n in range(NODES)}
    order = list(free)
    objects: list[dict[str, Any]] = []
    shapes = list(SHAPES)
    rng.shuffle(shapes)
    for index, (pods, gpus_each) in enumerate(shapes):
        rng.shuffle(order)
        placement = []
        for node in order:
            if len(placement) == pods:
                break
            if len(free[node]) >= gpus_each:
                placement.append((node, [free[node].pop(0) for _ in range(gpus_each)]))
        assert len(placement) == pods, "the cluster is too full for the shapes"
        admitted = NOW - dt.timedelta(seconds=rng.randrange(600, 86_400))
        objects += running_group(f"g{index:04d}", placement, rng.randrange(4), admitted)
    objects += waiting_gang("big", 32, GPUS, 10, {"required": "rack"} if required else None)
    spec: dict[str, Any] = {"namespaceSelector": {}, "quotas": [{"unit": "gpus", "nominal": 3700}],
                            "preemption": {"withinClusterQueue": "LowerPriority"}}
    if racks:
        spec["topologyName"] = LAYOUT.name
    cluster_queue = parse_cluster_queue({"apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue",
                                         "metadata": {"name": "main"}, "spec": spec})
    nodes = cluster_manifests(NODES, GPUS, ("H100",), NODE_ALLOCATABLE)
    for manifest in nodes:
        if racks and manifest["kind"] == "Node":
            index = int(manifest["metadata"]["name"].split("-")[1])
            manifest["metadata"]["labels"][RACK_LABEL] = f"rack-{index // (NODES // racks):02d}"
    models = parse_objects(nodes + [m for m in objects if m["kind"] != "PodGroup"])
    records = [parse_pod_group(m) for m in objects if m["kind"] == "PodGroup"]
    views = collect_groups([m for m in models if isinstance(m, Pod)], records)
    unit = compile_unit(parse_quota_unit({"apiVersion": "draq.io/v1alpha1", "kind": "QuotaUnit",
                                          "metadata": {"name": "gpus"},
                                          "spec": {"devices": {"deviceClassNames": ["gpu"]}}}), DraCel())
    local = LocalQueue(NAMESPACE, "main", "main")
    return CycleInput(Snapshot.from_models(models), GATES, views, {local.key: local}, (unit,),
                      rebuild_state([cluster_queue], views), device_selected, now=NOW,
                      topologies={LAYOUT.name: LAYOUT} if racks else {})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--seed", type=int, default=20260301)
    parser.add_argument("--racks", type=int, default=0, help="label the nodes into this many racks")
    parser.add_argument("--required", action="store_true", help="the gang requires one rack (with --racks)")
    parser.add_argument("--unfrozen", action="store_true",
                        help="leave the set-up's objects in the cycle collector's view (the operator freezes them)")
    args = parser.parse_args()
    cycle = scenario(args.seed, args.racks, args.required and args.racks > 0)
    result = run_cycle(cycle)
    wait = result.decision(f"{NAMESPACE}/big")
    assert isinstance(wait, Wait), wait
    held = sum(1 for g in cycle.groups if g.holds_quota)
    if not args.unfrozen:
        # As the operator does after each pass (`admission.operator.heap`): the long-lived objects are out
        # of the cycle collector's view, so that its full collections do not walk them during the search.
        gc.collect()
        gc.freeze()
    timings, plan = [], None
    for _ in range(args.repeat):
        start = time.process_time()
        plan = plan_preemptions(cycle, result)
        timings.append((time.process_time() - start) * 1000)
    assert plan is not None and len(plan.preempts) == 1, plan and plan.waits
    [preempt] = plan.preempts
    where = (f", required: rack of {args.racks} racks" if args.required else f", {args.racks} racks, no topology "
             "request") if args.racks else ""
    rack_of = {name: node.labels.get(RACK_LABEL, "-") for name, node in cycle.snapshot.nodes.items()}
    groups = {g.key: g for g in cycle.groups}
    spread = {rack_of[p.node_name] for v in preempt.victims for p in groups[v].pods if p.node_name}
    racks = f", victims in {len(spread)} rack(s), the gang planned in {len({rack_of[n] for n in preempt.nodes})}" \
        if args.racks else ""
    heap = "; heap not frozen" if args.unfrozen else ""
    print(f"victim search for one gang of 32 pods x {GPUS} GPUs{where} over {held} admitted groups on {NODES} nodes x "
          f"{GPUS} GPUs (seed {args.seed}; it waited: {wait.reason}{heap}): "
          f"median {statistics.median(timings):.1f} ms CPU "
          f"(range {min(timings):.1f}-{max(timings):.1f}; goal < 100 ms); {len(preempt.victims)} groups evicted "
          f"on {len(preempt.nodes)} nodes{racks}, {plan.placed_tries} gang placements tried; "
          f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
