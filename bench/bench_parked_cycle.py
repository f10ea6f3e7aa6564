"""A cycle in which nothing relevant changed, with 10,000 groups waiting (issue 26, item 1: goal <= 10 ms).

A full cluster (every GPU held by a running claim) and 10,000 pending one-pod groups of one GPU each in 20
LocalQueues (each its own ClusterQueue): none fits until something frees devices. A first cycle evaluates
and parks them (`core.cycle.parking`); the cycles measured come after it, each fed the last one's parking,
with the shell's capacity counter unchanged and its clock a second later: the operator's steady state while
nothing that could admit a group happens. The pure core's whole decision (`decide`: the admission pass and
preemption), two ways: the default per-LocalQueue budget (64 considered, 8 evaluated without admission; the
rest wait `BehindInQueue`), and every pending group considered (all 10,000 parked). After each cycle the heap is
kept as `draq run` keeps it (`operator.heap`: a young collection, then the objects alive frozen), outside the
time measured. Prints the median and range of --repeat cycles, in wall-clock and in CPU time (the machine may be
shared), beside the goal.

    PYTHONPATH=. .venv/bin/python bench/bench_parked_cycle.py [--groups 10000] [--queues 20] [--repeat 15]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time
from collections import Counter
from dataclasses import replace
from typing import Any

from bench_admission_cycle import gang_manifests, held, quota_unit
from inventory import NODE_ALLOCATABLE, cluster_manifests

from admission.core.allocator import Snapshot
from admission.core.cycle import Changes, CycleInput, CycleResult, Parking, collect_groups, decide, rebuild_state
from admission.core.features import gates_for
from admission.core.models import LabelSelector, Pod, parse_objects
from admission.core.quantity import parse_quantity
from admission.core.quota import ClusterQueue, LocalQueue, QueueQuota, device_selected

GATES = gates_for("1.35")
NODES, GPUS = 64, 8
NAMESPACE = "bench"
GOAL_MS = 10.0


def cycle_input(groups: int, queues: int) -> CycleInput:
    """`groups` one-pod, one-GPU groups spread over `queues` LocalQueues, on a cluster with every GPU held."""
    names = [f"q{i:02d}" for i in range(queues)]
    objects: list[dict[str, Any]] = []
    for index in range(groups):
        objects += gang_manifests(f"g{index:05d}", names[index % queues], 1, 1,
                                  f"2026-01-01T{index // 3600:02d}:{index // 60 % 60:02d}:{index % 60:02d}Z")
    models = parse_objects(cluster_manifests(NODES, GPUS, ("H100",), NODE_ALLOCATABLE) + held(NODES, GPUS)
                           + objects)
    cluster_queues = [ClusterQueue(f"{name}-cq", (QueueQuota("gpus", parse_quantity(NODES * GPUS)),),
                                   namespace_selector=LabelSelector()) for name in names]
    local_queues = {q.key: q for q in (LocalQueue(NAMESPACE, name, f"{name}-cq") for name in names)}
    views = collect_groups([m for m in models if isinstance(m, Pod)], ())
    units = (quota_unit("gpus", {"devices": {"deviceClassNames": ["gpu"]}}),)
    return CycleInput(Snapshot.from_models(models), GATES, views, local_queues, units,
                      rebuild_state(cluster_queues, views), device_selected)


def measure(cycle: CycleInput, repeat: int) -> tuple[list[float], list[float], CycleResult, CycleResult]:
    """Wall-clock and CPU milliseconds of `repeat` quiet cycles after the first, the first's result and the
    last's."""
    first = decide(replace(cycle, parking=Parking().fed(Changes(0, 0.0))))
    assert first.parking is not None
    parking = first.parking
    keep_heap()
    wall, cpu = [], []
    result = first
    for second in range(1, repeat + 1):
        fed = replace(cycle, parking=parking.fed(Changes(0, float(second))))
        started, started_cpu = time.perf_counter(), time.process_time()
        result = decide(fed)
        cpu.append((time.process_time() - started_cpu) * 1000)
        wall.append((time.perf_counter() - started) * 1000)
        assert result.parking is not None
        parking = result.parking
        keep_heap()
    return wall, cpu, first, result


def keep_heap() -> None:
    """What `operator.heap.HeapKeeper.after_pass` does after each pass."""
    gc.collect(1)
    gc.freeze()


def summary(label: str, wall: list[float], cpu: list[float], first: CycleResult, last: CycleResult) -> str:
    reasons = Counter(str(w.reason) for w in last.waiting)
    same = first.decisions == last.decisions
    parked = len(last.parking.parked) if last.parking is not None else 0
    return (f"{label}: median {statistics.median(wall):.1f} ms (range {min(wall):.1f}-{max(wall):.1f}), CPU "
            f"{statistics.median(cpu):.1f} ms (goal <= {GOAL_MS:.0f} ms); {parked} parked; waiting: "
            f"{', '.join(f'{n} {r}' for r, n in sorted(reasons.items())) or 'none'}; "
            f"decisions {'the same as' if same else 'DIFFERENT from'} the first cycle's")


def main(groups: int, queues: int, repeat: int) -> None:
    print(f"decide, nothing relevant changed: {groups} pending one-pod groups x 1 GPU in {queues} LocalQueues, "
          f"{NODES} nodes x {GPUS} GPUs all held; {repeat} cycles each; load {os.getloadavg()[0]:.2f}")
    cycle = cycle_input(groups, queues)
    print(summary("default budget (64 considered, 8 misses per LocalQueue)", *measure(cycle, repeat)))
    every = replace(cycle, queue_budget=groups + 1, queue_misses=groups + 1)
    print(summary("every pending group considered", *measure(every, repeat)))
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--groups", type=int, default=10_000, help="pending groups (default %(default)s)")
    parser.add_argument("--queues", type=int, default=20, help="LocalQueues (default %(default)s)")
    parser.add_argument("--repeat", type=int, default=15, help="cycles measured per figure (default %(default)s)")
    args = parser.parse_args()
    if args.repeat < 1 or args.groups < 1 or args.queues < 1:
        parser.error("--groups, --queues and --repeat must be at least 1")
    main(args.groups, args.queues, args.repeat)
