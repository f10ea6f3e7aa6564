"""Allocator benchmarks: pods/s for single pods, a 32-pod gang, and inventory memory. Prints medians.

    .venv/bin/python bench/bench_allocator.py [--repeat N] [--kubernetes-version 1.37]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from inventory import DRIVER, NODE_ALLOCATABLE, cluster_manifests

from admission.core.allocator import Allocator, GangMember, Snapshot, place_gang
from admission.core.features import gates_for
from admission.core.models import Pod, ResourceClaim, parse_object, parse_objects
from admission.core.nodefit import PodFit

RELEASE = "1.35"  # the release whose semantics are measured (--kubernetes-version)


def claim(name: str, count: int) -> ResourceClaim:
    model = parse_object({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "bench"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
            "deviceClassName": "gpu", "count": count,
            "selectors": [{"cel": {"expression": f'device.attributes["{DRIVER}"].model == "H100"'}}],
        }}]}},
    })
    assert isinstance(model, ResourceClaim)
    return model


def allocated_claims(nodes: int, gpus: int) -> list[dict[str, Any]]:
    """Claims holding every GPU of the first `nodes` nodes."""
    return [{
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": f"busy-{n}", "namespace": "bench"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": gpus}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpus", "driver": DRIVER, "pool": f"node-{n:05d}", "device": f"gpu-{g}"}
            for g in range(gpus)]}}},
    } for n in range(nodes)]


def median_of(repeat: int, run: Callable[[], float]) -> float:
    return statistics.median(run() for _ in range(repeat))


def bench_single_pods(snapshot: Snapshot, count: int, pods: int, repeat: int) -> float:
    """Pods/s: for each pod, try nodes in order until its claim fits (devices are not kept)."""
    gates = gates_for(RELEASE)
    nodes = sorted(snapshot.nodes)

    def run() -> float:
        allocator = Allocator(snapshot, gates)
        claims = [claim(f"pod-{i}", count) for i in range(pods)]
        start = time.perf_counter()
        for c in claims:
            for node in nodes:
                if allocator.allocate(node, [c]).allocatable:
                    break
        return pods / (time.perf_counter() - start)

    return median_of(repeat, run)


def bench_gang(snapshot: Snapshot, size: int, repeat: int) -> float:
    gates = gates_for(RELEASE)

    def run() -> float:
        allocator = Allocator(snapshot, gates)
        members = [GangMember(f"bench/pod-{i}", (claim(f"pod-{i}-gpus", 8),)) for i in range(size)]
        start = time.perf_counter()
        plan = place_gang(allocator, members)
        elapsed = time.perf_counter() - start
        assert plan.feasible and len(set(plan.placements.values())) == size
        return elapsed * 1000

    return median_of(repeat, run)


def bound_pods(nodes: int, per_node: int) -> list[dict[str, Any]]:
    """`per_node` running pods of 8 cpu and 32Gi on each of the first `nodes` nodes."""
    return [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"web-{n}-{i}", "namespace": "other"},
             "spec": {"nodeName": f"node-{n:05d}", "containers": [
                 {"name": "main", "resources": {"requests": {"cpu": "8", "memory": "32Gi"}}}]},
             "status": {"phase": "Running"}} for n in range(nodes) for i in range(per_node)]


INTER_POD = {
    "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "bench"}}, "topologyKey": "kubernetes.io/hostname"}]}},
    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                   "whenUnsatisfiable": "DoNotSchedule",
                                   "labelSelector": {"matchLabels": {"app": "bench"}}}],
}


def gang_pod(index: int, inter_pod: bool = False) -> Pod:
    """A member with cpu, memory, a sidecar and a toleration; with `inter_pod`, also required anti-affinity
    to the other members and a topology spread constraint, both per node."""
    model = parse_object({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"pod-{index}", "namespace": "bench", "labels": {"app": "bench"}},
        "spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "16", "memory": "64Gi"}}}],
                 "initContainers": [{"name": "proxy", "restartPolicy": "Always",
                                     "resources": {"requests": {"cpu": "500m"}}}],
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                 **(INTER_POD if inter_pod else {})},
    })
    assert isinstance(model, Pod)
    return model


def bench_gang_node_fit(snapshot: Snapshot, size: int, repeat: int, inter_pod: bool = False) -> tuple[float, float]:
    """The gang of `bench_gang`, each member also with cpu, memory, a sidecar and a toleration checked
    against node allocatable and the pods already bound (with `inter_pod`, also anti-affinity and
    spread between members); and the one-off node-fit index build."""
    gates = gates_for(RELEASE)
    start = time.perf_counter()
    index = snapshot.node_fit
    build_ms = (time.perf_counter() - start) * 1000
    assert index.usage.on("node-00000")

    def run() -> float:
        allocator = Allocator(snapshot, gates)
        members = [GangMember(f"bench/pod-{i}", (claim(f"pod-{i}-gpus", 8),), fit=PodFit.of(gang_pod(i, inter_pod)))
                   for i in range(size)]
        start = time.perf_counter()
        plan = place_gang(allocator, members)
        elapsed = time.perf_counter() - start
        assert plan.feasible and len(set(plan.placements.values())) == size
        return elapsed * 1000

    return median_of(repeat, run), build_ms


def bench_memory(nodes: int, gpus: int) -> tuple[float, float]:
    manifests = cluster_manifests(nodes, gpus)
    gc.collect()
    rss_before = _rss_mib()
    tracemalloc.start()
    snapshot = Snapshot.from_models(parse_objects(manifests))
    allocator = Allocator(snapshot, gates_for(RELEASE))
    for node in list(snapshot.nodes)[:1]:
        allocator.view(node)
    del manifests
    gc.collect()
    current, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_after = _rss_mib()
    assert len(snapshot.nodes) == nodes
    return current / 2**20, rss_after - rss_before


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def matching_claim(name: str, count: int) -> ResourceClaim:
    """`count` H100s that share one driverVersion (a `matchAttribute` constraint)."""
    model = parse_object({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "bench"},
        "spec": {"devices": {
            "requests": [{"name": "gpus", "exactly": {
                "deviceClassName": "gpu", "count": count,
                "selectors": [{"cel": {"expression": f'device.attributes["{DRIVER}"].model == "H100"'}}]}}],
            "constraints": [{"requests": ["gpus"], "matchAttribute": f"{DRIVER}/driverVersion"}]}},
    })
    assert isinstance(model, ResourceClaim)
    return model


def per_call(repeat: int, calls: int, run: Callable[[], object]) -> tuple[float, float, float]:
    """Median, lowest and highest of `repeat` averages over `calls` calls, in microseconds of CPU time (on a
    shared machine, less disturbed by other work than wall time), on a warm snapshot."""
    run()
    averages = []
    for _ in range(repeat):
        start = time.process_time()
        for _ in range(calls):
            run()
        averages.append((time.process_time() - start) / calls * 1e6)
    return statistics.median(averages), min(averages), max(averages)


def bench_fixed_costs(half_full: Snapshot, repeat: int) -> None:
    """The three cases where a per-call cost decides: a full node, first fit past 256 full nodes, and a
    2-GPU claim with matchAttribute on a free node (the Go allocator: 11 µs, 4.2 ms, 28 µs)."""
    gates = gates_for(RELEASE)
    allocator = Allocator(half_full, gates)
    nodes = sorted(half_full.nodes)
    one = claim("one", 1)
    median, low, high = per_call(repeat, 2000, lambda: allocator.allocate("node-00000", [one]))
    assert not allocator.allocate("node-00000", [one]).allocatable
    print(f"a node with no free matching device, one 1-GPU claim: median {median:.1f} µs CPU per call "
          f"(range {low:.1f}-{high:.1f}; goal <= 11 µs)")

    def first_fit() -> str:
        for node in nodes:
            if allocator.allocate(node, [one]).allocatable:
                return node
        raise AssertionError("no node fits")

    assert first_fit() == "node-00256"
    median, low, high = per_call(repeat, 20, first_fit)
    print(f"first fit of one 1-GPU claim over 512 nodes x 8 GPUs, the first 256 full: "
          f"median {median / 1000:.2f} ms CPU (range {low / 1000:.2f}-{high / 1000:.2f}; goal <= 4.2 ms)")
    pair = matching_claim("pair", 2)
    assert allocator.allocate("node-00300", [pair]).allocatable
    median, low, high = per_call(repeat, 2000, lambda: allocator.allocate("node-00300", [pair]))
    print(f"a 2-GPU claim with matchAttribute on a free node: median {median:.1f} µs CPU per call "
          f"(range {low:.1f}-{high:.1f}; goal <= 28 µs)")


def main() -> None:
    global RELEASE
    parser = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--fixed-costs-only", action="store_true", help="only the three per-call cases")
    parser.add_argument("--kubernetes-version", default="1.35", help="release whose semantics to measure")
    args = parser.parse_args()
    RELEASE = args.kubernetes_version
    snapshot = Snapshot.from_models(parse_objects(cluster_manifests(512, 8)))
    for count in (8, 1):
        rate = bench_single_pods(snapshot, count, 2000, args.repeat)
        print(f"single pod, one {count}-GPU claim, 512 nodes x 8 GPUs, first node that fits: "
              f"median {rate:,.0f} pods/s")
    half_full = Snapshot.from_models(parse_objects(cluster_manifests(512, 8) + allocated_claims(256, 8)))
    bench_fixed_costs(half_full, args.repeat)
    if args.fixed_costs_only:
        return
    rate = bench_single_pods(half_full, 8, 200, args.repeat)
    print(f"single pod, one 8-GPU claim, 512 nodes x 8 GPUs with the first 256 nodes full: "
          f"median {rate:,.0f} pods/s")
    gang_ms = bench_gang(snapshot, 32, args.repeat)
    print(f"gang of 32 pods x one 8-GPU claim, 512 nodes x 8 GPUs: median {gang_ms:.1f} ms")
    busy = Snapshot.from_models(parse_objects(cluster_manifests(512, 8, allocatable=NODE_ALLOCATABLE)
                                              + bound_pods(512, 2)))
    fit_ms, build_ms = bench_gang_node_fit(busy, 32, args.repeat)
    print(f"gang of 32 pods x one 8-GPU claim with node fit (cpu, memory, sidecar, toleration; 1,024 bound "
          f"pods), 512 nodes x 8 GPUs: median {fit_ms:.1f} ms (node-fit index built once: {build_ms:.1f} ms)")
    fit_ms, _ = bench_gang_node_fit(busy, 32, args.repeat, inter_pod=True)
    print(f"the same gang, its members also with required pod anti-affinity and a DoNotSchedule topology spread "
          f"per node: median {fit_ms:.1f} ms")
    traced, rss = bench_memory(5000, 8)
    print(f"inventory of 5,000 nodes x 8 devices: tracemalloc {traced:.1f} MiB, RSS growth {rss:.1f} MiB")


if __name__ == "__main__":
    main()
