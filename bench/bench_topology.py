"""Topology benchmarks: gangs placed inside racks and blocks, a cycle of topology-constrained groups, and the
whole free racks a random stream of gangs leaves with and without best-fit by rack.

Prints the median and range of --repeat runs per figure, with the 1-minute load average; the cycles also
their CPU time, with the set-up's objects frozen out of the cycle collector's view as the operator does after
each pass (`admission.operator.heap`). `--only` runs one part.

    .venv/bin/python bench/bench_topology.py [--repeat N] [--only gang|cycle|fragmentation]
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from inventory import DRIVER, cluster_manifests

from admission.core.allocator import (
    Allocator,
    GangMember,
    Snapshot,
    Usage,
    members_for,
    place_gang,
    place_in_topology,
    topology_domains,
)
from admission.core.cycle import CycleInput, collect_groups, rebuild_state, run_cycle
from admission.core.features import gates_for
from admission.core.labels import GATE, GROUP_LABEL, GROUP_MIN_LABEL, QUEUE_LABEL
from admission.core.models import (
    TOPOLOGY_PREFERRED_ANNOTATION,
    TOPOLOGY_REQUIRED_ANNOTATION,
    AllocationResult,
    LabelSelector,
    Pod,
    Topology,
    TopologyLevel,
    TopologyMode,
    parse_objects,
)
from admission.core.quantity import parse_quantity
from admission.core.quota import (
    ClusterQueue,
    DraCel,
    LocalQueue,
    QueueQuota,
    compile_unit,
    device_selected,
    parse_quota_unit,
)

NAMESPACE = "bench"
GATES = gates_for("1.35")
RACK_LABEL, BLOCK_LABEL = "example.com/rack", "example.com/block"
RACK = TopologyLevel("rack", node_label=RACK_LABEL)
BLOCK = TopologyLevel("block", node_label=BLOCK_LABEL)
TOPOLOGY = Topology("layout", (BLOCK, RACK))
T = TypeVar("T")
LOAD = 0.6  # the share of the GPUs a fragmentation stream keeps in use


# ----- inventory -----------------------------------------------------------------------------------
def racked(racks: int, per_rack: int, gpus: int, racks_per_block: int = 8) -> list[dict[str, Any]]:
    """`racks` racks of `per_rack` nodes of `gpus` GPUs, node n in rack n // per_rack, racks in blocks."""
    manifests = cluster_manifests(racks * per_rack, gpus)
    for manifest in manifests:
        if manifest["kind"] == "Node":
            index = int(manifest["metadata"]["name"].split("-")[1])
            rack = index // per_rack
            manifest["metadata"]["labels"].update({RACK_LABEL: f"rack-{rack:02d}",
                                                   BLOCK_LABEL: f"block-{rack // racks_per_block}"})
    return manifests


def fragmenting(racks: Sequence[int], per_rack: int, busy_nodes: int) -> list[dict[str, Any]]:
    """Claims holding one GPU on each of the first `busy_nodes` nodes of each rack in `racks`: such a rack
    has almost all its GPUs free, but fewer whole nodes."""
    return [{
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": f"busy-{rack}-{n}", "namespace": "other"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": 1}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpus", "driver": DRIVER, "pool": f"node-{rack * per_rack + n:05d}", "device": "gpu-0"}]}}},
    } for rack in racks for n in range(busy_nodes)]


def gang(group: str, size: int, gpus_each: int, created: str = "2026-01-01T00:00:00Z",
         annotations: dict[str, str] | None = None) -> list[dict[str, Any]]:
    template = f"{group}-gpus"
    manifests: list[dict[str, Any]] = [{
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": template, "namespace": NAMESPACE},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": gpus_each}}]}}}}]
    labels = {QUEUE_LABEL: "lq", GROUP_LABEL: group, GROUP_MIN_LABEL: str(size)}
    for i in range(size):
        manifests.append({
            "apiVersion": "v1", "kind": "Pod", "status": {"phase": "Pending"},
            "metadata": {"name": f"{group}-{i}", "namespace": NAMESPACE, "labels": labels,
                         "annotations": dict(annotations or {}), "creationTimestamp": created},
            "spec": {"containers": [{"name": "main"}], "schedulingGates": [{"name": GATE}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}]}})
    return manifests


def gang_members(snapshot: Snapshot, group: str) -> list[GangMember]:
    pods = sorted((p for p in snapshot.pods.values() if p.labels.get(GROUP_LABEL) == group), key=lambda p: p.name)
    return members_for(pods, snapshot.claims, snapshot.templates)


# ----- timing --------------------------------------------------------------------------------------
def timed(repeat: int, run: Callable[[], T]) -> tuple[list[float], T]:
    timings = []
    result: T | None = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = run()
        timings.append((time.perf_counter() - start) * 1000)
    assert result is not None
    return timings, result


def figure(timings: list[float]) -> str:
    return f"{statistics.median(timings):.1f} ms ({min(timings):.1f}-{max(timings):.1f})"


def load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


# ----- 1. one large gang ---------------------------------------------------------------------------
def bench_gang(racks: int, per_rack: int, gpus: int, size: int, level: TopologyLevel, repeat: int) -> None:
    """One gang of `size` pods x `gpus` GPUs with `required: <level>`; the first half of the racks fragmented
    (one GPU held on half their nodes): those have the fewest free GPUs, so best-fit tries them first."""
    manifests = racked(racks, per_rack, gpus) + fragmenting(range(racks // 2), per_rack, per_rack // 2) + \
        gang("big", size, gpus)
    snapshot = Snapshot.from_models(parse_objects(manifests))
    allocator = Allocator(snapshot, GATES)
    members = gang_members(snapshot, "big")
    topology_domains(allocator, level)  # built once per snapshot, as in a cycle

    def run() -> Any:
        return place_in_topology(allocator, members, TopologyMode.REQUIRED, level, usage=allocator.usage,
                                 nodes=snapshot.node_fit.usage)

    timings, result = timed(repeat, run)
    plain, _ = timed(repeat, lambda: place_gang(allocator, members, usage=allocator.usage,
                                                nodes=snapshot.node_fit.usage))
    answer = f"placed in {level.name} {', '.join(result.domains)}" if result.placement.feasible else (
        f"{'never admissible' if result.never else 'waits'}: {result.placement.reason}")
    print(f"{size}-pod gang x {gpus} GPUs, required: {level.name}, {racks * per_rack} nodes in {racks} racks "
          f"(half fragmented): {figure(timings)}; the same gang without topology {figure(plain)} [{load()}] -> "
          f"{answer[:160]}")


# ----- 2. a cycle of topology-constrained groups -----------------------------------------------------
def cycle_input(groups: int, racks: int, per_rack: int, gpus: int, topology: bool = True) -> CycleInput:
    """`groups` groups of 1-8 pods x 4 or 8 GPUs, alternately `required: rack` and `preferred: rack` (or none
    without `topology`), on racks whose first half is fragmented."""
    objects: list[dict[str, Any]] = []
    for index in range(groups):
        size, gpus_each = (1, 2, 4, 8)[index % 4], (4, 8)[index // 4 % 2]
        key = (TOPOLOGY_REQUIRED_ANNOTATION, TOPOLOGY_PREFERRED_ANNOTATION)[index % 2]
        created = f"2026-01-01T{index // 3600:02d}:{index // 60 % 60:02d}:{index % 60:02d}Z"
        objects += gang(f"g{index:04d}", size, gpus_each, created, {key: "rack"} if topology else None)
    models = parse_objects(racked(racks, per_rack, gpus) + fragmenting(range(racks // 2), per_rack, per_rack // 2)
                           + objects)
    unit = compile_unit(parse_quota_unit({"apiVersion": "draq.io/v1alpha1", "kind": "QuotaUnit",
                                          "metadata": {"name": "gpus"},
                                          "spec": {"devices": {"deviceClassNames": ["gpu"]}}}), DraCel())
    queue = ClusterQueue("cq", (QueueQuota("gpus", parse_quantity(racks * per_rack * gpus)),),
                         namespace_selector=LabelSelector(), topology=TOPOLOGY.name)
    views = collect_groups([m for m in models if isinstance(m, Pod)], ())
    return CycleInput(Snapshot.from_models(models), GATES, views, {"bench/lq": LocalQueue(NAMESPACE, "lq", "cq")},
                      (unit,), rebuild_state([queue], views), device_selected, queue_budget=groups,
                      queue_misses=groups, topologies={TOPOLOGY.name: TOPOLOGY})


def bench_cycle(groups: int, racks: int, per_rack: int, gpus: int, repeat: int, topology: bool = True) -> None:
    cycle = cycle_input(groups, racks, per_rack, gpus, topology)
    gc.collect()
    gc.freeze()
    cpu: list[float] = []

    def run() -> Any:
        start = time.process_time()
        try:
            return run_cycle(cycle)
        finally:
            cpu.append((time.process_time() - start) * 1000)

    timings, result = timed(repeat, run)
    gc.unfreeze()
    kind = "topology-constrained" if topology else "unconstrained (the same groups, no topology)"
    print(f"run_cycle: {groups} {kind} groups on {racks * per_rack} nodes x {gpus} GPUs in {racks} "
          f"racks: {figure(timings)}, CPU {figure(cpu)} [{load()}]: {len(result.admitted)} admitted, "
          f"{len(result.waiting)} wait")


# ----- 3. fragmentation ----------------------------------------------------------------------------
BEST_FIT, FIRST_RACK, ANYWHERE = "best-fit rack", "first rack that fits", "first fit, no topology"


def place_by(policy: str, allocator: Allocator, members: list[GangMember], usage: Usage, nodes: Any) -> Any:
    """A gang placed by `policy`: best-fit by rack (draq's `required: rack`), in the first rack by name that
    holds it, or on the first nodes that fit, wherever they are."""
    if policy == BEST_FIT:
        return place_in_topology(allocator, members, TopologyMode.REQUIRED, RACK, usage=usage, nodes=nodes).placement
    if policy == ANYWHERE:
        return place_gang(allocator, members, usage=usage, nodes=nodes)
    answer = None
    for domain in topology_domains(allocator, RACK):
        answer = place_gang(allocator, [replace(m, nodes=domain.nodes) for m in members], usage=usage, nodes=nodes)
        if answer.feasible:
            break
    return answer


def stream(racks: int, per_rack: int, gpus: int, steps: int, seed: int, policy: str) -> tuple[int, int, int]:
    """A random stream of gangs (1-12 pods x 8 GPUs): while less than `LOAD` of the GPUs are in use a gang
    arrives (placed by `policy`, or dropped when it fits nowhere), else a random running one leaves. Returns
    the whole free racks at the end, the gangs placed, and the gangs that spanned several racks."""
    rng = random.Random(seed)
    largest = 12
    manifests = racked(racks, per_rack, gpus) + gang("m", largest, gpus)
    snapshot = Snapshot.from_models(parse_objects(manifests))
    allocator = Allocator(snapshot, GATES)
    members = gang_members(snapshot, "m")
    rack_of = {n: node.labels[RACK_LABEL] for n, node in snapshot.nodes.items()}
    running: list[list[AllocationResult]] = []
    placed = spanning = 0
    for _ in range(steps):
        usage = Usage.from_allocations((a for held in running for a in held), GATES)
        if len(usage.exclusive) >= LOAD * racks * per_rack * gpus:
            running.pop(rng.randrange(len(running)))
            continue
        answer = place_by(policy, allocator, members[:rng.randint(1, largest)], usage, snapshot.node_fit.usage)
        if answer is not None and answer.feasible:
            placed += 1
            spanning += len({rack_of[n] for n in answer.placements.values()}) > 1
            running.append(list(answer.allocations.values()))
    usage = Usage.from_allocations((a for held in running for a in held), GATES)
    whole = sum(1 for domain in topology_domains(allocator, RACK)
                if not any(usage.is_allocated(d) for d in domain.devices))
    return whole, placed, spanning


def bench_fragmentation(racks: int, per_rack: int, gpus: int, steps: int, seeds: int) -> None:
    print(f"fragmentation: {steps}-step random streams of gangs of 1-12 pods x 8 GPUs kept near {LOAD:.0%} of "
          f"{racks} racks of {per_rack} nodes x {gpus} GPUs (a gang arrives below it, a running one leaves above "
          "it): whole free racks at the end (higher is better) / gangs placed / gangs spanning racks")
    policies = (BEST_FIT, FIRST_RACK, ANYWHERE)
    print(f"{'seed':>4} | " + " | ".join(f"{p:>24}" for p in policies))
    totals = {p: 0 for p in policies}
    for seed in range(seeds):
        row = []
        for policy in policies:
            whole, placed, spanning = stream(racks, per_rack, gpus, steps, seed, policy)
            totals[policy] += whole
            row.append(f"{whole:>4} / {placed:>3} / {spanning:>3}")
        print(f"{seed:>4} | " + " | ".join(f"{cell:>24}" for cell in row))
    print(f"{'mean':>4} | " + " | ".join(f"{totals[p] / seeds:>11.1f} whole racks" for p in policies))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--only", choices=("gang", "cycle", "fragmentation"), help="run this part alone")
    args = parser.parse_args()
    if args.only in (None, "gang"):
        bench_gang(64, 18, 8, 16, RACK, args.repeat)
        bench_gang(64, 18, 8, 64, RACK, args.repeat)
        bench_gang(64, 18, 8, 64, BLOCK, args.repeat)
        bench_gang(16, 72, 8, 64, RACK, args.repeat)  # the same 1,152 nodes in racks a 64-pod gang fits
    if args.only in (None, "cycle"):
        bench_cycle(200, 64, 18, 8, max(3, args.repeat // 3))
        bench_cycle(200, 64, 18, 8, max(3, args.repeat // 3), topology=False)
    if args.only in (None, "fragmentation"):
        print(f"seeds of the fragmentation streams: 0-{args.seeds - 1}")
        bench_fragmentation(16, 18, 8, 300, args.seeds)


if __name__ == "__main__":
    main()
