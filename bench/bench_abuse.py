"""Fairness under abuse: one namespace floods its LocalQueue with never-fitting one-pod groups; how long does
another tenant's gang wait for its decision, compared with an idle cluster?

The pure core's whole decision (`decide`: the admission pass and preemption) on one snapshot, three ways:
idle (the other tenant's gang alone), flooded with every pending group evaluated (no per-queue budget, as
before), and flooded with the default budget (per LocalQueue and cycle, at most `DEFAULT_QUEUE_BUDGET`
pending groups considered and `DEFAULT_QUEUE_MISSES` evaluated without admission). The gang's decision is
ready when the cycle ends, so the cycle's time is its decision time. Then the same flooded cycles once the flood's
evaluated groups were parked (`core.cycle.parking`) by a cycle before the gang arrived. Prints the median and range of
--repeat runs.

    .venv/bin/python bench/bench_abuse.py [--flood 6000] [--repeat 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import Counter
from dataclasses import replace
from typing import Any

from bench_admission_cycle import gang_manifests, quota_unit
from inventory import NODE_ALLOCATABLE, cluster_manifests

from admission.core.allocator import Snapshot
from admission.core.cycle import CycleInput, CycleResult, Parking, collect_groups, decide, rebuild_state
from admission.core.cycle.types import DEFAULT_QUEUE_BUDGET, DEFAULT_QUEUE_MISSES
from admission.core.features import gates_for
from admission.core.models import LabelSelector, Pod, parse_objects
from admission.core.quantity import parse_quantity
from admission.core.quota import ClusterQueue, LocalQueue, QueueQuota, device_selected

GATES = gates_for("1.35")
NODES, GPUS = 16, 8
ABUSER, TENANT = "flood", "team"


def flood_manifests(groups: int) -> list[dict[str, Any]]:
    """`groups` one-pod groups of the abuser, each asking for 16 GPUs: more than any node has, so never placed."""
    objects: list[dict[str, Any]] = []
    for index in range(groups):
        for manifest in gang_manifests(f"junk-{index:05d}", ABUSER, 1, 16,
                                       f"2026-01-01T{index // 3600:02d}:{index // 60 % 60:02d}:{index % 60:02d}Z"):
            manifest["metadata"]["namespace"] = ABUSER
            spec = manifest.get("spec") or {}
            if manifest["kind"] == "Pod":
                spec["resourceClaims"][0]["resourceClaimTemplateName"] = f"junk-{index:05d}-gpus"
            objects.append(manifest)
    return objects


def tenant_manifests() -> list[dict[str, Any]]:
    """The other tenant's gang: 4 pods x 4 GPUs, created after the flood."""
    objects = gang_manifests("train", TENANT, 4, 4, "2026-01-02T00:00:00Z")
    for manifest in objects:
        manifest["metadata"]["namespace"] = TENANT
    return objects


def cycle_input(flood: int) -> CycleInput:
    models = parse_objects(cluster_manifests(NODES, GPUS, ("H100",), NODE_ALLOCATABLE) + flood_manifests(flood)
                           + tenant_manifests())
    names = (ABUSER, TENANT)
    queues = [ClusterQueue(f"{name}-cq", (QueueQuota("gpus", parse_quantity(NODES * GPUS)),),
                           namespace_selector=LabelSelector()) for name in names]
    local_queues = {q.key: q for q in (LocalQueue(name, name, f"{name}-cq") for name in names)}
    views = collect_groups([m for m in models if isinstance(m, Pod)], ())
    units = (quota_unit("gpus", {"devices": {"deviceClassNames": ["gpu"]}}),)
    return CycleInput(Snapshot.from_models(models), GATES, views, local_queues, units,
                      rebuild_state(queues, views), device_selected)


def measure(cycle: CycleInput, repeat: int) -> tuple[list[float], CycleResult]:
    decide(cycle)  # the snapshot's node views and selector results, as a kept snapshot has them
    timings, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = decide(cycle)
        timings.append((time.perf_counter() - start) * 1000)
    assert result is not None
    return timings, result


def summary(label: str, timings: list[float], result: CycleResult) -> str:
    tenant = result.decision(f"{TENANT}/train")
    reasons = Counter(str(w.reason) for w in result.waiting)
    return (f"{label}: median {statistics.median(timings):.1f} ms (range {min(timings):.1f}-{max(timings):.1f}); "
            f"{TENANT}/train {type(tenant).__name__}; waiting: "
            f"{', '.join(f'{n} {r}' for r, n in sorted(reasons.items())) or 'none'}")


def main(flood: int, repeat: int) -> None:
    print(f"decide: {NODES} nodes x {GPUS} GPUs; tenant gang 4 pods x 4 GPUs; flood of {flood} one-pod groups x "
          f"16 GPUs in one LocalQueue; {repeat} runs each; load {os.getloadavg()[0]:.2f}")
    idle_cycle = cycle_input(0)
    flooded = cycle_input(flood)
    idle, idle_result = measure(idle_cycle, repeat)
    print(summary("idle", idle, idle_result))
    every = replace(flooded, queue_budget=flood + 1, queue_misses=flood + 1)
    unbounded, unbounded_result = measure(every, max(1, repeat // 5))
    print(summary("flooded, every pending group evaluated", unbounded, unbounded_result))
    bounded, bounded_result = measure(flooded, repeat)
    print(summary(f"flooded, {DEFAULT_QUEUE_BUDGET} considered and {DEFAULT_QUEUE_MISSES} misses per LocalQueue",
                  bounded, bounded_result))
    ratio = statistics.median(bounded) / statistics.median(idle)
    print(f"tenant decision time flooded/idle: {ratio:.2f}x (goal <= 1.20x)")
    before = without_tenant(flooded)
    parked, parked_result = measure(parked_cycle(flooded, before), repeat)
    print(summary("flooded and parked, default budget", parked, parked_result))
    every_before = replace(before, queue_budget=flood + 1, queue_misses=flood + 1)
    every_parked, every_parked_result = measure(parked_cycle(every, every_before), max(1, repeat // 5))
    print(summary("flooded and parked, every pending group considered", every_parked, every_parked_result))
    ratio = statistics.median(parked) / statistics.median(idle)
    print(f"tenant decision time flooded and parked/idle: {ratio:.2f}x (goal <= 1.20x)")


def without_tenant(cycle: CycleInput) -> CycleInput:
    """The cycle before the tenant's gang arrived: the same objects (the operator keeps unchanged groups' views
    and the snapshot, and a pending pod takes no room), without the gang."""
    return replace(cycle, groups=tuple(g for g in cycle.groups if g.namespace != TENANT))


def parked_cycle(cycle: CycleInput, before: CycleInput) -> CycleInput:
    """`cycle` (the tenant's gang has arrived) after `before` (the flood alone) parked the flood's evaluated
    groups: the gang's pods are its own change, nothing else changed."""
    first = decide(replace(before, parking=Parking()))
    return replace(cycle, parking=first.parking)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--flood", type=int, default=6000, help="the abuser's pending groups (default %(default)s)")
    parser.add_argument("--repeat", type=int, default=15, help="runs per figure (default %(default)s)")
    args = parser.parse_args()
    main(args.flood, args.repeat)
