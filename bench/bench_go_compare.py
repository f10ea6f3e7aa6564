"""draq's allocator beside the Kubernetes scheduler's (k8s.io/dynamic-resource-allocation v0.35.8) on the same
scenarios: the same manifests go to both, as JSON to the Go harness in bench/goalloc and parsed here.
Times are CPU time of the process (Go's garbage collection included).

Most scenarios ask about each of 64 like nodes once (timed per call); the first-fit ones walk the nodes
in order until one fits. The harness is built with `go build` through the Go module proxy on first use
and cached in ~/.cache/draq/goalloc/<hash of its sources>/. Go makes one allocator per pod and derives a
node's pools on every call: it has no warm state. draq is timed three ways: warm (node views built, as in a
cycle after the first), "node new" (the nodes' Node objects changed: their views are built in the call,
selector results are kept) and "all new" (a new snapshot, as when the nodes' slices changed: views built
and selectors evaluated in the call). Cold, the allocator has seen the claims on another node first, as
on a cycle's later nodes. Prints each, and draq's time over Go's, per scenario; then memory per device at
5,000 nodes x 8 GPUs.

    PYTHONPATH=. .venv/bin/python bench/bench_go_compare.py [--repeat N] [--no-memory]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_allocator import allocated_claims
from inventory import DRIVER, cluster_manifests

from admission.core.allocator import Allocator, Snapshot
from admission.core.features import gates_for
from admission.core.models import Model, ResourceClaim, parse_object, parse_objects

GATES = gates_for("1.35")
SOURCE = Path(__file__).with_name("goalloc")
CACHE = Path.home() / ".cache" / "draq" / "goalloc"
WARM_UP_NODE = "node-00511"  # tried before a cold operation, never reached by one


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    cluster: str
    claims: tuple[dict[str, Any], ...]
    nodes: tuple[str, ...]
    calls: int  # operations per timed repetition
    each: bool = False  # one call per node, timed per call (else one first-fit pass is an operation)


def claim_manifest(name: str, count: int, match: bool = False) -> dict[str, Any]:
    """`count` H100s; with `match`, sharing one driverVersion (a matchAttribute constraint). Written with
    the defaults the API server fills in, which the Go allocator relies on."""
    devices: dict[str, Any] = {"requests": [{"name": "gpus", "exactly": {
        "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": count,
        "selectors": [{"cel": {"expression": f'device.attributes["{DRIVER}"].model == "H100"'}}]}}]}
    if match:
        devices["constraints"] = [{"requests": ["gpus"], "matchAttribute": f"{DRIVER}/driverVersion"}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "bench", "uid": f"uid-{name}"}, "spec": {"devices": devices}}


def partly_used(node: int, gpus: int) -> dict[str, Any]:
    """A claim holding the first `gpus` GPUs of one node."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": f"part-{node}", "namespace": "bench"},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu",
                                                                            "count": gpus}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpus", "driver": DRIVER, "pool": f"node-{node:05d}", "device": f"gpu-{g}"}
                for g in range(gpus)]}}}}


def clusters() -> dict[str, list[dict[str, Any]]]:
    """512 nodes x 8 GPUs: nodes 0-255 full, 256-399 free, 400-463 half used, 464-511 free."""
    return {"half-full": cluster_manifests(512, 8) + allocated_claims(256, 8)
            + [partly_used(n, 4) for n in HALF_USED]}


def names(numbers: range) -> tuple[str, ...]:
    return tuple(f"node-{n:05d}" for n in numbers)


FULL, FREE, HALF_USED = range(0, 64), range(300, 364), range(400, 464)


def scenarios() -> list[Scenario]:
    one, eight, four = claim_manifest("one", 1), claim_manifest("eight", 8), claim_manifest("four", 4)
    pair = claim_manifest("pair", 2, match=True)
    return [
        Scenario("full node, one 8-GPU claim", "half-full", (eight,), names(FULL), 10, each=True),
        Scenario("full node, one 1-GPU claim", "half-full", (one,), names(FULL), 10, each=True),
        Scenario("full node, a 2-GPU matchAttribute claim", "half-full", (pair,), names(FULL), 10, each=True),
        Scenario("half-used node, one 8-GPU claim", "half-full", (eight,), names(HALF_USED), 2, each=True),
        Scenario("half-used node, one 4-GPU claim", "half-full", (four,), names(HALF_USED), 2, each=True),
        Scenario("free node, one 8-GPU claim", "half-full", (eight,), names(FREE), 2, each=True),
        Scenario("free node, a 2-GPU matchAttribute claim", "half-full", (pair,), names(FREE), 2, each=True),
        Scenario("free node, two claims (1 and 4 GPUs)", "half-full", (one, four), names(FREE), 2, each=True),
        Scenario("first fit of one 1-GPU claim past 256 full nodes", "half-full", (one,), names(range(512)), 5),
        Scenario("first fit of one 8-GPU claim past 256 full nodes", "half-full", (eight,), names(range(512)), 5),
    ]


# ----- the Go side -----------------------------------------------------------------------------------

def go_binary() -> Path:
    """The harness, built on first use from bench/goalloc through the Go module proxy."""
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "main.go"):
        digest.update((SOURCE / name).read_bytes())
    binary = CACHE / digest.hexdigest()[:12] / "goalloc"
    if binary.exists():
        return binary
    go = shutil.which("go")
    if go is None:
        raise SystemExit("the Go harness needs the go command (Go 1.25 or later) on PATH")
    binary.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=mod", GOTOOLCHAIN="local", GOSUMDB="off")
    print(f"building the Go harness into {binary} (k8s.io/dynamic-resource-allocation from the module proxy)...",
          flush=True)
    built = subprocess.run([go, "build", "-o", str(binary), "."], cwd=SOURCE, env=env, capture_output=True,
                           text=True, timeout=1800)
    if built.returncode != 0:
        raise SystemExit(f"go build of bench/goalloc failed:\n{built.stderr[-4000:]}")
    return binary


def run_go(cases: Sequence[Scenario], repeat: int, memory_cluster: list[dict[str, Any]] | None) -> dict[str, Any]:
    document: dict[str, Any] = {
        "clusters": {name: go_cluster(manifests) for name, manifests in clusters().items()},
        "scenarios": [{"name": s.name, "cluster": s.cluster, "claims": list(s.claims), "nodes": list(s.nodes),
                       "each": s.each, "repeat": repeat, "calls": s.calls} for s in cases],
    }
    if memory_cluster is not None:
        document["clusters"]["memory"] = go_cluster(memory_cluster)
        document["memory"] = "memory"
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="draq-goalloc-") as handle:
        json.dump(document, handle)
        handle.flush()
        del document
        done = subprocess.run([str(go_binary()), handle.name], capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"the Go harness failed:\n{done.stderr[-4000:]}")
    found: dict[str, Any] = {}
    for line in done.stdout.splitlines():
        row = json.loads(line)
        found[row.get("name", "memory")] = row
    return found


def go_cluster(manifests: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    by_kind: dict[str, list[dict[str, Any]]] = {"classes": [], "slices": [], "nodes": [], "allocated": []}
    keys = {"DeviceClass": "classes", "ResourceSlice": "slices", "Node": "nodes", "ResourceClaim": "allocated"}
    for manifest in manifests:
        by_kind[keys[manifest["kind"]]].append(manifest)
    return by_kind


# ----- the draq side ---------------------------------------------------------------------------------

def first_fit(allocator: Allocator, nodes: Sequence[str], claims: list[ResourceClaim]) -> str:
    for node in nodes:
        if allocator.allocate(node, claims).allocatable:
            return node
    return ""


def every_node(allocator: Allocator, nodes: Sequence[str], claims: list[ResourceClaim]) -> str:
    fit = sum(1 for node in nodes if allocator.allocate(node, claims).allocatable)
    return f"{fit} of {len(nodes)}"


def operation(scenario: Scenario) -> Callable[[Allocator, Sequence[str], list[ResourceClaim]], str]:
    return every_node if scenario.each else first_fit


def per_operation(scenario: Scenario) -> int:
    """Allocate calls or first-fit passes in one timed operation."""
    return len(scenario.nodes) if scenario.each else 1


def parsed_claims(scenario: Scenario) -> list[ResourceClaim]:
    found = [parse_object(c) for c in scenario.claims]
    assert all(isinstance(c, ResourceClaim) for c in found)
    return found  # type: ignore[return-value]


def draq_warm(models: list[Model], scenario: Scenario, repeat: int) -> tuple[float, str]:
    """Median µs of CPU per operation over `repeat` averages, and the answer."""
    allocator = Allocator(Snapshot.from_models(models), GATES)
    claims = parsed_claims(scenario)
    run = operation(scenario)
    answer = run(allocator, scenario.nodes, claims)
    averages = []
    for _ in range(repeat):
        start = time.process_time()
        for _ in range(scenario.calls):
            run(allocator, scenario.nodes, claims)
        averages.append((time.process_time() - start) / scenario.calls / per_operation(scenario) * 1e6)
    return statistics.median(averages), answer


def draq_cold(models: list[Model], scenario: Scenario, repeat: int, slices_too: bool) -> tuple[float, str]:
    """Median µs of CPU per operation with the views of the nodes tried not built, and the answer. Their
    Node objects changed (the views are rebuilt, selector results kept) or, with `slices_too`, everything
    did (a new snapshot: selectors are evaluated afresh too)."""
    claims = parsed_claims(scenario)
    run = operation(scenario)
    base = Snapshot.from_models(models)
    run(Allocator(base, GATES), scenario.nodes, claims)  # views and selector results, as a kept snapshot has
    timings, answer = [], ""
    for _ in range(repeat):
        if slices_too:
            snapshot = Snapshot.from_models(models)
        else:
            snapshot = base.updated(nodes=[dataclasses.replace(n) for n in base.nodes.values()])
        allocator = Allocator(snapshot, GATES)
        first_fit(allocator, (WARM_UP_NODE,), claims)
        start = time.process_time()
        answer = run(allocator, scenario.nodes, claims)
        timings.append((time.process_time() - start) / per_operation(scenario) * 1e6)
    return statistics.median(timings), answer


def memory_per_device(nodes: int, gpus: int) -> float:
    """Bytes traced per device for the snapshot of `nodes` x `gpus` (objects, index, one node's view)."""
    manifests = cluster_manifests(nodes, gpus)
    gc.collect()
    tracemalloc.start()
    snapshot = Snapshot.from_models(parse_objects(manifests))
    Allocator(snapshot, GATES).view("node-00000")
    del manifests
    gc.collect()
    traced, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return traced / (nodes * gpus)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--no-memory", action="store_true", help="skip the 5,000-node memory comparison")
    args = parser.parse_args()
    cases = scenarios()
    memory_nodes = 5000
    go = run_go(cases, args.repeat, None if args.no_memory else cluster_manifests(memory_nodes, 8))
    models = {name: parse_objects(manifests) for name, manifests in clusters().items()}
    print(f"draq vs Go (k8s.io/dynamic-resource-allocation v0.35.8), CPU µs per operation, median of {args.repeat}; "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"{'scenario':50} {'Go':>8} {'warm':>8} {'ratio':>5} {'node new':>8} {'ratio':>5} {'all new':>8} "
          f"{'ratio':>5}")
    mismatches = []
    for case in cases:
        row = go[case.name]
        if row.get("error"):
            raise SystemExit(f"Go harness, {case.name}: {row['error']}")
        go_us = row["median_ns"] / 1000
        warm, warm_answer = draq_warm(models[case.cluster], case, args.repeat)
        node, node_answer = draq_cold(models[case.cluster], case, args.repeat, slices_too=False)
        fresh, fresh_answer = draq_cold(models[case.cluster], case, args.repeat, slices_too=True)
        if not warm_answer == node_answer == fresh_answer == row["fits"]:
            mismatches.append(f"{case.name}: Go {row['fits'] or 'none'}, draq {warm_answer or 'none'}/"
                              f"{node_answer or 'none'}/{fresh_answer or 'none'}")
        print(f"{case.name:50} {go_us:8.1f} {warm:8.1f} {warm / go_us:5.2f} {node:8.1f} {node / go_us:5.2f} "
              f"{fresh:8.1f} {fresh / go_us:5.2f}", flush=True)
    if not args.no_memory:
        heap = go["memory"]["heap_bytes"] / go["memory"]["devices"]
        ours = memory_per_device(memory_nodes, 8)
        print(f"memory per device, {memory_nodes:,} nodes x 8 GPUs: Go heap {heap:,.0f} B, draq traced {ours:,.0f} B "
              f"(ratio {ours / heap:.2f})")
    for line in mismatches:
        print(f"ANSWERS DIFFER: {line}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
