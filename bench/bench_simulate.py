"""`draq simulate` benchmarks: a long queue simulated until it drains, and a node plan over 4 profiles.

1. 1,000 pending groups (2 × 4 GPUs, 1 × 8 GPUs or 4 × 8 GPUs; run time 1 h or 2 h) on 512 nodes ×
   8 GPUs, two ClusterQueues: cycles are run, groups finish, until every group has been admitted.
2. A full cluster (16 nodes × 8 GPUs) with 40 waiting groups, a quarter of them asking for A100s and two
   for 12 GPUs in one pod: the fewest nodes of 4 profiles (8 × H100, 8 × A100, 4 × H100, 2 × H100) that
   admit every waiting group at once, and the groups no node of them lets run.

Prints the median and the range of --repeat runs per figure, with the 1-minute load average.

    .venv/bin/python bench/bench_simulate.py [--repeat N] [--seed N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from bench_admission_cycle import gated_pod, gpu_template
from inventory import DRIVER, NODE_ALLOCATABLE, cluster_manifests

from admission.core.features import gates_for
from admission.core.models import Model, parse_objects
from admission.core.simulate import SimulatedCluster, SimulationSettings, load, plan_nodes, simulate

GATES = gates_for("1.35")
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
NAMESPACE = "bench"
RUN_TIMES = ("1h", "2h")
T = TypeVar("T")


def queues(nominal: int) -> list[dict[str, Any]]:
    def draq(kind: str, name: str, spec: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        meta = {"name": name, **({"namespace": namespace} if namespace else {})}
        return {"apiVersion": "draq.io/v1alpha1", "kind": kind, "metadata": meta, "spec": spec}
    out = [draq("QuotaUnit", "gpus", {"devices": {"deviceClassNames": ["gpu"]}})]
    for name in ("red", "blue"):
        out.append(draq("ClusterQueue", f"{name}-cq", {"quotas": [{"unit": "gpus", "nominal": nominal}]}))
        out.append(draq("LocalQueue", name, {"clusterQueue": f"{name}-cq"}, NAMESPACE))
    return out


def group(name: str, queue: str, size: int, gpus: int, created: str, run_time: str,
          model: str | None = None) -> list[dict[str, Any]]:
    template = gpu_template(f"{name}-gpus", gpus)
    if model is not None:
        request = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
        request["selectors"] = [{"cel": {"expression": f'device.attributes["{DRIVER}"].model == "{model}"'}}]
    pods = [gated_pod(f"{name}-{i}", name, queue, size, f"{name}-gpus", created) for i in range(size)]
    for pod in pods:
        pod["metadata"]["annotations"] = {"draq.io/run-time": run_time}
    return [template, *pods]


def stamp(index: int) -> str:
    return (START - dt.timedelta(hours=1) + dt.timedelta(seconds=index)).strftime("%Y-%m-%dT%H:%M:%SZ")


# ----- 1. a long queue until it drains ---------------------------------------------------------------
def long_queue(groups: int, nodes: int, gpus: int, rng: random.Random) -> SimulatedCluster:
    objects = cluster_manifests(nodes, gpus, ("H100",), NODE_ALLOCATABLE) + queues(nodes * gpus * 5 // 8)
    for index in range(groups):
        size, each = rng.choice(((2, 4), (2, 4), (1, 8), (4, 8)))
        objects += group(f"g{index:04d}", ("red", "blue")[index % 2], size, each, stamp(index), rng.choice(RUN_TIMES))
    return load(objects, GATES, submitted=False).cluster


def bench_drain(cluster: SimulatedCluster, repeat: int) -> None:
    settings = SimulationSettings(GATES, START)
    timings, result = timed(repeat, lambda: simulate(cluster, settings))
    assert not result.waiting, result.stopped
    per_cycle = [t / result.cycles for t in timings]
    print(f"simulate, 1,000 groups on 512 nodes × 8 GPUs until the queue drains: {figure(timings, 's')} "
          f"({result.cycles} cycles, {figure(per_cycle, 's')} per cycle); {len(result.admitted)} admitted, "
          f"{result.end_after / 3600:.1f} h simulated; {load_average()}")


# ----- 2. a node plan over 4 profiles ---------------------------------------------------------------
PROFILES = {"h100x8": ("H100", 8), "a100x8": ("A100", 8), "h100x4": ("H100", 4), "h100x2": ("H100", 2)}


def make_node(profile: str, index: int) -> Sequence[Model]:
    model, gpus = PROFILES[profile]
    manifests = cluster_manifests(1, gpus, (model,), NODE_ALLOCATABLE)[1:]
    for manifest in manifests:  # node-00000 -> planned-<profile>-<index>
        name = f"planned-{profile}-{index}"
        manifest["metadata"]["name"] = name if manifest["kind"] == "Node" else f"{name}-gpus"
        if manifest["kind"] == "Node":
            manifest["metadata"]["labels"] = {"kubernetes.io/hostname": name}
        else:
            manifest["spec"]["nodeName"] = name
            manifest["spec"]["pool"]["name"] = name
    return parse_objects(manifests)


def full_cluster(nodes: int, waiting: int, rng: random.Random) -> SimulatedCluster:
    objects = cluster_manifests(nodes, 8, ("H100",), NODE_ALLOCATABLE) + queues(10_000)
    # One 8-GPU group per node, first in the queue: they fill the cluster, every later group waits.
    for index in range(nodes):
        objects += group(f"run{index:03d}", "red", 1, 8, stamp(index), "never")
    for index in range(waiting):
        if index in (7, 27):
            objects += group(f"w{index:03d}", "red", 1, 12, stamp(1000 + index), "1h")
        else:
            size, each = rng.choice(((2, 4), (1, 8), (2, 2), (1, 4)))
            model = "A100" if index % 4 == 0 else None
            objects += group(f"w{index:03d}", "red", size, each, stamp(1000 + index), "1h", model)
    cluster = load(objects, GATES, submitted=False).cluster
    first = simulate(cluster, SimulationSettings(GATES, START, None, horizon=0))
    assert {o.group for o in first.admitted} == {f"{NAMESPACE}/run{i:03d}" for i in range(nodes)}
    return cluster


def bench_plan(cluster: SimulatedCluster, repeat: int) -> None:
    settings = SimulationSettings(GATES, START, None)
    timings, plan = timed(repeat, lambda: plan_nodes(cluster, settings, list(PROFILES), make_node))
    added = ", ".join(f"{n} × {p}" for p, n in plan.counts.items() if n)
    print(f"plan_nodes, 40 waiting groups on a full cluster of 16 nodes × 8 GPUs, 4 profiles: {figure(timings, 's')} "
          f"({plan.simulations} simulations); plan: {added} ({plan.total} nodes), {len(plan.admitted)} of "
          f"{len(plan.targets)} admitted, {len(plan.unplannable)} cannot run; {load_average()}")


# ----- timing ----------------------------------------------------------------------------------------
def timed(repeat: int, run: Callable[[], T]) -> tuple[list[float], T]:
    timings = []
    result: T | None = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = run()
        timings.append(time.perf_counter() - start)
    assert result is not None
    return timings, result


def figure(values: list[float], unit: str) -> str:
    return f"median {statistics.median(values):.2f} {unit} (range {min(values):.2f}–{max(values):.2f})"


def load_average() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--only", choices=("drain", "plan"))
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    print(f"seed {args.seed}")
    if args.only in (None, "drain"):
        bench_drain(long_queue(1000, 512, 8, random.Random(args.seed)), args.repeat)
    if args.only in (None, "plan"):
        bench_plan(full_cluster(16, 40, random.Random(args.seed)), args.repeat)


if __name__ == "__main__":
    main()
