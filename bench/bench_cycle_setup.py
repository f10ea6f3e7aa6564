"""Per-cycle set-up of the operator: from the cache's objects to a cycle's input and a warm allocator.

The cache holds 5,000 nodes x 8 GPUs (one ResourceSlice each) and 20,000 bound pods (4 per node), with
a few pending groups. Measured: the first reading (everything parsed, every node view built), then
readings with nothing changed, and readings after one pod changed, added or deleted, one node's slice or one
claim changed. Each
reading includes what `run_cycle` sets up before deciding: the allocator, its usage, the node-fit
index and the charging inventory.

    .venv/bin/python bench/bench_cycle_setup.py [--nodes N] [--pods N] [--repeat N] [--profile]
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import os
import pstats
import statistics
import time
from typing import Any

from inventory import NODE_ALLOCATABLE, cluster_manifests

from admission.core.allocator import Allocator
from admission.core.cycle import charging_inventory
from admission.core.features import gates_for
from admission.core.labels import GATE, GROUP_LABEL, GROUP_MIN_LABEL, QUEUE_LABEL
from admission.kube import kinds
from admission.operator.cache import OperatorCache
from admission.operator.reading import CacheReader

GATES = gates_for("1.35")
KINDS = {"Node": kinds.NODES, "ResourceSlice": kinds.RESOURCE_SLICES, "DeviceClass": kinds.DEVICE_CLASSES,
         "Pod": kinds.PODS, "ResourceClaim": kinds.RESOURCE_CLAIMS}


def bound_pod(index: int, node: str, version: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"web-{index}", "namespace": "other", "uid": f"uid-{index}",
                         "resourceVersion": str(version)},
            "spec": {"nodeName": node, "containers": [
                {"name": "main", "resources": {"requests": {"cpu": "2", "memory": "8Gi"}}}]},
            "status": {"phase": "Running"}}


def gated_pod(index: int, version: int) -> dict[str, Any]:
    labels = {QUEUE_LABEL: "training", GROUP_LABEL: f"g{index // 2}", GROUP_MIN_LABEL: "2"}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"gang-{index}", "namespace": "research", "uid": f"gang-uid-{index}",
                         "resourceVersion": str(version), "labels": labels,
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "4"}}}],
                     "schedulingGates": [{"name": GATE}]},
            "status": {"phase": "Pending"}}


def claim(index: int, node: int, version: int) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": f"busy-{index}", "namespace": "other", "uid": f"claim-{index}",
                         "resourceVersion": str(version)},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": 1}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpus", "driver": "gpu.example.com", "pool": f"node-{node:05d}", "device": "gpu-0"}]}}}}


class Filled(OperatorCache):
    """The operator's cache with its stores filled directly, as the reflectors would have."""

    def __init__(self) -> None:
        super().__init__(None)  # type: ignore[arg-type]
        self.version = 1

    def put(self, obj: dict[str, Any]) -> None:
        reflector = self.reflectors[obj["kind"]]
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        reflector.apply_event("MODIFIED", obj)


def fill(nodes: int, pods: int) -> Filled:
    cache = Filled()
    for manifest in cluster_manifests(nodes, 8, allocatable=NODE_ALLOCATABLE):
        manifest["metadata"].setdefault("uid", f"uid-{manifest['kind']}-{manifest['metadata']['name']}")
        cache.put(manifest)
    for index in range(pods):
        cache.put(bound_pod(index, f"node-{index % nodes:05d}", 0))
    for index in range(nodes // 2):
        cache.put(claim(index, index, 0))
    for index in range(20):
        cache.put(gated_pod(index, 0))
    return cache


def setup(reader: CacheReader) -> float:
    start = time.perf_counter()
    reading = reader.read()
    snapshot = reading.cycle.snapshot
    allocator = Allocator(snapshot, GATES)
    allocator.usage.copy()
    assert snapshot.node_fit is not None
    charging_inventory(snapshot, GATES)
    return (time.perf_counter() - start) * 1000


def timed(reader: CacheReader) -> tuple[float, float]:
    """The set-up's elapsed and CPU milliseconds."""
    before = time.process_time()
    wall = setup(reader)
    return wall, (time.process_time() - before) * 1000


def summary(timings: list[float]) -> str:
    return f"median {statistics.median(timings):.1f} ms (range {min(timings):.1f}-{max(timings):.1f})"


def delete(cache: Filled, kind: str, manifest: dict[str, Any]) -> None:
    cache.reflectors[kind].apply_event("DELETED", manifest)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--profile", action="store_true", help="print each case's profile (cProfile, by own time)")
    args = parser.parse_args()
    start = time.perf_counter()
    cache = fill(args.nodes, args.pods)
    print(f"cache of {args.nodes:,} nodes x 8 GPUs, {args.pods:,} bound pods, {args.nodes // 2:,} allocated "
          f"claims filled in {time.perf_counter() - start:.1f} s")
    reader = CacheReader(cache, GATES)
    wall, cpu = timed(reader)
    print(f"first reading (everything parsed, every view built): CPU {cpu:.0f} ms ({wall:.0f} ms elapsed)")
    slice_manifest = copy.deepcopy(cache.reflectors["ResourceSlice"].store[("", "node-00007-gpus")])
    added = args.pods + 10 * args.repeat
    cases = {
        "nothing changed": lambda i: None,
        "one pod changed": lambda i: cache.put(bound_pod(i % args.pods, f"node-{(i * 7) % args.nodes:05d}", 0)),
        "one pod added": lambda i: cache.put(bound_pod(added + i, f"node-{(i * 11) % args.nodes:05d}", 0)),
        "one pod deleted": lambda i: delete(cache, "Pod", bound_pod(added + i, "", 0)),
        "one claim changed": lambda i: cache.put(claim(i % (args.nodes // 2), i % (args.nodes // 2), 0)),
        "one node's ResourceSlice changed": lambda i: cache.put(copy.deepcopy(slice_manifest)),
        "ten pods changed": lambda i: [cache.put(bound_pod((i * 10 + k) % args.pods, "node-00001", 0))
                                       for k in range(10)],
    }
    for name, change in cases.items():
        cpu_times, elapsed = [], []
        profile = cProfile.Profile() if args.profile else None
        for index in range(args.repeat):
            change(index)
            if profile is not None:
                profile.enable()
            wall, cpu = timed(reader)
            if profile is not None:
                profile.disable()
            cpu_times.append(cpu)
            elapsed.append(wall)
        print(f"per-cycle set-up, {name}: CPU {summary(cpu_times)}, elapsed {summary(elapsed)}; "
              f"load {os.getloadavg()[0]:.2f}", flush=True)
        if profile is not None:
            pstats.Stats(profile).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main()
