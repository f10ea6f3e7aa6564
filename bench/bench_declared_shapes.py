"""Admission from declared shapes: one cycle admitting JobSet-shaped gangs whose pods do not exist yet.

Each gang declares a leader (1 pod) and workers (7 pods), each pod with one claim of `gpus` GPUs from a
template; no pod exists, so every member is a placeholder reserved in a slot. Beside it, in the same
session: the same gangs with all their pods created and no declared shape, and the 1,000-group cycle of
`bench_admission_cycle.py`. Prints the median and range of --repeat cycles, with the 1-minute load average.

    .venv/bin/python bench/bench_declared_shapes.py [--repeat N]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from typing import Any

from bench_admission_cycle import (
    GATES,
    MODELS,
    NAMESPACE,
    bench_large_cycle,
    gated_pod,
    gpu_template,
    load,
    outcome,
    quota_unit,
)
from inventory import NODE_ALLOCATABLE, cluster_manifests

from admission.core.allocator import Snapshot
from admission.core.cycle import CycleInput, GroupView, collect_groups, rebuild_state, run_cycle
from admission.core.models import DeclaredShape, LabelSelector, ObjectRef, Pod, Role, parse_objects
from admission.core.quantity import parse_quantity
from admission.core.quota import ClusterQueue, LocalQueue, PodGroup, QueueQuota, device_selected

ROLES = (("leader", 1, "8"), ("workers", 7, "4"))  # name, pods, cpu per pod
QUEUES = ("red", "blue")


def role_pod(name: str, group: str, queue: str, cpu: str, template: str, created: str) -> dict[str, Any]:
    manifest = gated_pod(name, group, queue, sum(count for _, count, _ in ROLES), template, created)
    manifest["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    return manifest


def shape_of(group: str, queue: str, template: str) -> DeclaredShape:
    """The roles a JobSet named `group` declares, with pod templates as its controller would stamp them."""
    roles = []
    for role, count, cpu in ROLES:
        [pod] = parse_objects([role_pod(f"{group}-{role}", group, queue, cpu, template, "")])
        assert isinstance(pod, Pod)
        roles.append(Role(role, dataclasses.replace(pod, meta=dataclasses.replace(pod.meta, name="")), count))
    return DeclaredShape(ObjectRef("JobSet", NAMESPACE, group), tuple(roles))


def created_at(index: int) -> str:
    return f"2026-01-01T{index // 3600:02d}:{index // 60 % 60:02d}:{index % 60:02d}Z"


def group_names(groups: int) -> list[tuple[str, str, str]]:
    """(group, queue, created) of each gang, alternating between the two queues."""
    return [(f"js{i:04d}", QUEUES[i % 2], created_at(i)) for i in range(groups)]


def cycle_input(groups: int, nodes: int, gpus_per_node: int, gpus: int, *, declared: bool) -> CycleInput:
    """`groups` gangs on `nodes` x `gpus_per_node` GPUs in two ClusterQueues (5/8 of the GPUs each): declared
    with no pods, or (declared False) with all 8 pods gated and no declared shape."""
    template = f"per-pod-{gpus}-gpus"
    objects = [*cluster_manifests(nodes, gpus_per_node, MODELS, NODE_ALLOCATABLE), gpu_template(template, gpus)]
    if not declared:
        for group, queue, created in group_names(groups):
            objects += [role_pod(f"{group}-{role}-{i}", group, queue, cpu, template, created)
                        for role, count, cpu in ROLES for i in range(count)]
    models = parse_objects(objects)
    members = sum(count for _, count, _ in ROLES)
    if declared:
        views = tuple(GroupView(NAMESPACE, group, queue, members, 0, created, (),
                                PodGroup(NAMESPACE, group, members, queue), declared=shape_of(group, queue, template))
                      for group, queue, created in group_names(groups))
    else:
        views = collect_groups([m for m in models if isinstance(m, Pod)], ())
    nominal = parse_quantity(nodes * gpus_per_node * 5 // 8)
    queues = [ClusterQueue(f"{name}-cq", (QueueQuota("gpus", nominal),), namespace_selector=LabelSelector())
              for name in QUEUES]
    local_queues = {q.key: q for q in (LocalQueue(NAMESPACE, name, f"{name}-cq") for name in QUEUES)}
    units = (quota_unit("gpus", {"devices": {"deviceClassNames": ["gpu"]}}),)
    return CycleInput(Snapshot.from_models(models), GATES, views, local_queues, units,
                      rebuild_state(queues, views), device_selected)


def bench_shapes(groups: int, nodes: int, gpus_per_node: int, gpus: int, repeat: int, *, declared: bool) -> None:
    cycle = cycle_input(groups, nodes, gpus_per_node, gpus, declared=declared)
    run_cycle(cycle)  # the snapshot's node views and selector results, as a kept snapshot has them
    timings = []
    result = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = run_cycle(cycle)
        timings.append((time.perf_counter() - start) * 1000)
    assert result is not None
    members = "declared, no pod yet" if declared else "all pods created, no declared shape"
    slots = sum(len(admit.plan.slots) for admit in result.admitted)
    print(f"run_cycle, {groups} JobSet-shaped gangs (1 leader + 7 workers x one {gpus}-GPU claim; {members}), "
          f"{nodes} nodes x {gpus_per_node} GPUs, 2 ClusterQueues: median {statistics.median(timings):.0f} ms "
          f"(range {min(timings):.0f}-{max(timings):.0f}); {outcome(result)}, {slots} slots reserved; {load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    for gpus in (2, 4):  # 3,200 GPUs asked of 4,096: all fit; 6,400: devices and quota run out
        bench_shapes(200, 512, 8, gpus, args.repeat, declared=True)
        bench_shapes(200, 512, 8, gpus, args.repeat, declared=False)
    bench_large_cycle(1000, 20, 512, 8, args.repeat)


if __name__ == "__main__":
    main()
