"""Admission benchmarks: one gang admission cycle, and charging one large group against four quota units.

Prints the median of --repeat runs per figure, with the 1-minute load average when the figure was taken (for the
1,000-group cycle also its CPU time, steadier than the wall clock on a shared machine).

    .venv/bin/python bench/bench_admission_cycle.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

from inventory import DRIVER, NODE_ALLOCATABLE, cluster_manifests

from admission.core.allocator import Allocator, Snapshot, members_for, place_gang
from admission.core.cycle import CycleInput, CycleResult, charging_inventory, collect_groups, rebuild_state, run_cycle
from admission.core.features import gates_for
from admission.core.labels import GATE, GROUP_LABEL, GROUP_MIN_LABEL, QUEUE_LABEL
from admission.core.models import LabelSelector, Pod, ResourceClaimTemplate, parse_objects
from admission.core.quantity import parse_quantity
from admission.core.quota import (
    ClusterQueue,
    CompiledUnit,
    DraCel,
    GroupObjects,
    Inventory,
    LocalQueue,
    Placement,
    QueueQuota,
    charge_group,
    compile_unit,
    device_selected,
    parse_quota_unit,
)

NAMESPACE = "bench"
GATES = gates_for("1.35")
MODELS = ("H100", "A100")  # alternating by node, so the weight unit sees two values
EVERY = LabelSelector()  # the ClusterQueues serve every namespace
WEIGHT = f'device.attributes["{DRIVER}"].model == "H100" ? 1.0 : 0.5'
T = TypeVar("T")


# ----- manifests -----------------------------------------------------------------------------------
def gpu_template(name: str, count: int) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": count}}]}}}}


def gated_pod(name: str, group: str, queue: str, size: int, template: str, created: str) -> dict[str, Any]:
    labels = {QUEUE_LABEL: queue, GROUP_LABEL: group, GROUP_MIN_LABEL: str(size)}
    return {"apiVersion": "v1", "kind": "Pod", "status": {"phase": "Pending"},
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels, "creationTimestamp": created},
            "spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "4"}}}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                     "schedulingGates": [{"name": GATE}]}}


def gang_manifests(group: str, queue: str, size: int, gpus_each: int, created: str) -> list[dict[str, Any]]:
    """`size` gated pods of one group, each with its own claim of `gpus_each` GPUs from one template."""
    template = f"{group}-gpus"
    return [gpu_template(template, gpus_each)] + [
        gated_pod(f"{group}-{i}", group, queue, size, template, created) for i in range(size)]


def quota_unit(name: str, spec: dict[str, Any]) -> CompiledUnit:
    manifest = {"apiVersion": "draq.io/v1alpha1", "kind": "QuotaUnit", "metadata": {"name": name}, "spec": spec}
    return compile_unit(parse_quota_unit(manifest), DraCel())


# ----- timing --------------------------------------------------------------------------------------
def timed(repeat: int, run: Callable[[], T]) -> tuple[float, T]:
    """Median milliseconds of `repeat` calls, and the last call's result."""
    timings = []
    result: T | None = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = run()
        timings.append((time.perf_counter() - start) * 1000)
    assert result is not None
    return statistics.median(timings), result


def load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


# ----- 1. the admission cycle ----------------------------------------------------------------------
def cycle_input(groups: int, nodes: int, gpus: int) -> CycleInput:
    """`groups` pending groups of 2 pods x one 4-GPU claim, alternating between two ClusterQueues whose
    nominal quota (5/8 of the cluster's GPUs each) is more than the devices allow: devices run out first."""
    objects: list[dict[str, Any]] = []
    for index in range(groups):
        queue = ("red", "blue")[index % 2]
        objects += gang_manifests(f"g{index:04d}", queue, 2, 4, f"2026-01-01T{index // 60 // 60:02d}:"
                                  f"{index // 60 % 60:02d}:{index % 60:02d}Z")
    models = parse_objects(cluster_manifests(nodes, gpus, MODELS, NODE_ALLOCATABLE) + objects)
    nominal = parse_quantity(nodes * gpus * 5 // 8)
    queues = [ClusterQueue(f"{name}-cq", (QueueQuota("gpus", nominal),), namespace_selector=EVERY)
              for name in ("red", "blue")]
    local_queues = {q.key: q for q in (LocalQueue(NAMESPACE, name, f"{name}-cq") for name in ("red", "blue"))}
    views = collect_groups([m for m in models if isinstance(m, Pod)], ())
    units = (quota_unit("gpus", {"devices": {"deviceClassNames": ["gpu"]}}),)
    return CycleInput(Snapshot.from_models(models), GATES, views, local_queues, units,
                      rebuild_state(queues, views), device_selected)


def held(nodes: int, gpus: int) -> list[dict[str, Any]]:
    """Claims holding every GPU of the first `nodes` nodes (the cluster half full when `nodes` is half)."""
    return [{
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": f"busy-{n}", "namespace": "other"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": gpus}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpus", "driver": DRIVER, "pool": f"node-{n:05d}", "device": f"gpu-{g}"}
            for g in range(gpus)]}}},
    } for n in range(nodes)]


def large_cycle_input(groups: int, queues: int, nodes: int, gpus: int) -> CycleInput:
    """`groups` pending groups in `queues` ClusterQueues on `nodes` nodes whose first half is full: groups of
    1-4 pods x one 1-, 2-, 4- or 8-GPU claim (a few shapes, as a real queue has), each queue's nominal quota
    a fair share of the cluster's GPUs."""
    objects: list[dict[str, Any]] = []
    names = [f"q{i:02d}" for i in range(queues)]
    for index in range(groups):
        size, gpus_each = (1, 2, 4)[index % 3], (1, 2, 4, 8)[index // 3 % 4]
        objects += gang_manifests(f"g{index:04d}", names[index % queues], size, gpus_each,
                                  f"2026-01-01T{index // 3600:02d}:{index // 60 % 60:02d}:{index % 60:02d}Z")
    models = parse_objects(cluster_manifests(nodes, gpus, MODELS, NODE_ALLOCATABLE) + held(nodes // 2, gpus)
                           + objects)
    nominal = parse_quantity(nodes * gpus // queues)
    cluster_queues = [ClusterQueue(f"{name}-cq", (QueueQuota("gpus", nominal),), namespace_selector=EVERY)
                      for name in names]
    local_queues = {q.key: q for q in (LocalQueue(NAMESPACE, name, f"{name}-cq") for name in names)}
    views = collect_groups([m for m in models if isinstance(m, Pod)], ())
    units = (quota_unit("gpus", {"devices": {"deviceClassNames": ["gpu"]}}),)
    return CycleInput(Snapshot.from_models(models), GATES, views, local_queues, units,
                      rebuild_state(cluster_queues, views), device_selected)


def bench_large_cycle(groups: int, queues: int, nodes: int, gpus: int, repeat: int) -> None:
    cycle = large_cycle_input(groups, queues, nodes, gpus)
    run_cycle(cycle)  # the snapshot's node views and selector results, as a kept snapshot has them
    timings, cpu = [], []
    result = None
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = run_cycle(cycle)
        cpu.append((time.process_time() - start_cpu) * 1000)
        timings.append((time.perf_counter() - start) * 1000)
    assert result is not None
    print(f"run_cycle, {groups} groups (1-4 pods x one 1-8 GPU claim) in {queues} ClusterQueues, {nodes} nodes x "
          f"{gpus} GPUs, first half full: median {statistics.median(timings):.0f} ms "
          f"(range {min(timings):.0f}-{max(timings):.0f}), CPU {statistics.median(cpu):.0f} ms "
          f"(range {min(cpu):.0f}-{max(cpu):.0f}; goal <= 250 ms); {outcome(result)}; {load()}")


def outcome(result: CycleResult) -> str:
    reasons = Counter(str(w.reason) for w in result.waiting)
    waiting = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
    gpus = sum(len(a.results) for admit in result.admitted for a in admit.placement.allocations.values())
    return f"{len(result.admitted)} admitted ({gpus} GPUs), {len(result.waiting)} waiting ({waiting or 'none'})"


def bench_cycle(groups: int, nodes: int, gpus: int, repeat: int) -> None:
    cycle = cycle_input(groups, nodes, gpus)
    median, result = timed(repeat, lambda: run_cycle(cycle))
    print(f"run_cycle, {groups} groups x 2 pods (4 cpu) x one 4-GPU template claim, {nodes} nodes x {gpus} GPUs "
          "(node filters on: 64 cpu, 110 pods), "
          f"2 ClusterQueues, unit gpus: median {median:.1f} ms per cycle; {outcome(result)}; {load()}")


# ----- 2. charging one group -----------------------------------------------------------------------
def charging_case(pods: int, nodes: int, gpus: int) -> tuple[GroupObjects, Inventory, Placement]:
    """The group, the inventory, and the exact plan the allocator places the group by."""
    group = gang_manifests("big", "red", pods, 2, "2026-01-01T00:00:00Z")
    models = parse_objects(cluster_manifests(nodes, gpus, MODELS) + group)
    snapshot = Snapshot.from_models(models)
    group_pods = tuple(m for m in models if isinstance(m, Pod))
    templates = {f"{m.namespace}/{m.name}": m for m in models if isinstance(m, ResourceClaimTemplate)}
    objects = GroupObjects(group_pods, {}, templates)
    members = members_for(group_pods, {}, templates)
    placed = place_gang(Allocator(snapshot, GATES), members)
    assert placed.feasible, placed.reason
    plan = Placement(dict(placed.placements), dict(placed.allocations))
    return objects, charging_inventory(snapshot, GATES), plan


def charging_units() -> tuple[CompiledUnit, ...]:
    return (
        quota_unit("gpus", {"devices": {"deviceClassNames": ["gpu"]}}),
        quota_unit("gpu-memory", {"capacity": {"deviceClassNames": ["gpu"], "name": f"{DRIVER}/memory"}}),
        quota_unit("gpu-weight", {"weight": {"deviceClassNames": ["gpu"], "expression": WEIGHT}}),
        quota_unit("cpu", {"core": {"resource": "cpu"}}),
    )


def bench_charging(pods: int, nodes: int, gpus: int, repeat: int) -> None:
    objects, inventory, plan = charging_case(pods, nodes, gpus)
    units = charging_units()
    head = (f"charge_group, {pods} pods x one 2-GPU template claim, {nodes * gpus:,} devices, "
            "units devices+capacity+weight(CEL)+core cpu")
    worst_ms, worst = timed(repeat, lambda: charge_group(objects, units, inventory, device_selected))
    print(f"{head}, worst case (no plan): median {worst_ms:.1f} ms; charge {worst.total.describe()}; {load()}")
    exact_ms, exact = timed(repeat, lambda: charge_group(objects, units, inventory, device_selected, plan))
    print(f"{head}, exact (allocator plan): median {exact_ms:.1f} ms; charge {exact.total.describe()}; {load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--kubernetes-version", default="1.35",
                        help="the release whose allocation semantics (default gates) the cycles use")
    parser.add_argument("--only", choices=("small", "large", "charging"),
                        help="only the 50- and 200-group cycles, the 1,000-group cycle, or charging")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    global GATES
    GATES = gates_for(args.kubernetes_version)
    print(f"allocation as Kubernetes {GATES.version} with its default gates")
    if args.only in (None, "small"):
        bench_cycle(50, 16, 8, args.repeat)
        bench_cycle(200, 128, 8, args.repeat)
    if args.only in (None, "large"):
        bench_large_cycle(1000, 20, 512, 8, max(3, args.repeat // 2))
    if args.only in (None, "charging"):
        bench_charging(64, 128, 8, args.repeat)


if __name__ == "__main__":
    main()
