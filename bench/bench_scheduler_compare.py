"""draq's allocator against the real kube-scheduler on the same inventory: pods placed per second.

Starts a local control plane, publishes NODES simulated nodes with 8 x H100 each, then places PODS
pods that each hold one claim for 8 GPUs: once by the real scheduler (from the first pod created to
the last pod bound) and once by draq (the same pods placed one after another on the snapshot read
back from the API server, devices taken as it goes). Prints both rates and their ratio (median of
draq runs; one scheduler run per invocation, as it changes the cluster).

    .venv/bin/python bench/bench_scheduler_compare.py [--nodes 512] [--pods 256]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes import client

from admission.core.allocator import Allocator, GangMember, Snapshot, place_gang
from admission.core.features import gates_for
from admission.core.models import ResourceClaim, parse_objects
from admission.core.simulate import profiles
from admission.localcluster.controlplane import ControlPlane

NAMESPACE = "bench"


def claim_manifest(name: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                "deviceClassName": "gpu.nvidia.com", "count": 8}}]}}}


def pod_manifest(name: str, claim: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "main", "image": "registry.example/train:1",
                                     "resources": {"claims": [{"name": "gpus"}]}}],
                     "resourceClaims": [{"name": "gpus", "resourceClaimName": claim}]}}


def publish_inventory(api: Any, nodes: int) -> None:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    h100 = profiles.PROFILES["h100"]
    for klass in profiles.device_classes():
        custom.create_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", klass)

    def one(n: int) -> None:
        name = f"h100-{n:04d}"
        node = profiles.node_manifest(h100, name)
        status = node.pop("status")
        core.create_node(node)
        core.patch_node_status(name, {"status": status})
        for rs in profiles.resource_slices(h100, name):
            custom.create_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", rs)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(nodes)))


def scheduler_rate(api: Any, pods: int) -> float:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: custom.create_namespaced_custom_object(
            "resource.k8s.io", "v1", NAMESPACE, "resourceclaims", claim_manifest(f"c{i}")), range(pods)))
        start = time.perf_counter()
        list(pool.map(lambda i: core.create_namespaced_pod(NAMESPACE, pod_manifest(f"p{i}", f"c{i}")), range(pods)))
    while True:
        bound = sum(1 for p in core.list_namespaced_pod(NAMESPACE).items if p.spec.node_name)
        if bound == pods:
            return pods / (time.perf_counter() - start)
        if time.perf_counter() - start > 600:
            raise SystemExit(f"only {bound} of {pods} pods bound after 600 s")
        time.sleep(0.05)


def snapshot_from_api(api: Any) -> Snapshot:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    objects: list[dict[str, Any]] = []
    for node in core.list_node().items:
        manifest = api.sanitize_for_serialization(node)
        objects.append({**manifest, "apiVersion": "v1", "kind": "Node"})
    for plural, kind in (("deviceclasses", "DeviceClass"), ("resourceslices", "ResourceSlice")):
        for item in custom.list_cluster_custom_object("resource.k8s.io", "v1", plural)["items"]:
            objects.append({**item, "apiVersion": "resource.k8s.io/v1", "kind": kind})
    return Snapshot.from_models(parse_objects(objects))


def draq_rate(snapshot: Snapshot, pods: int, repeat: int) -> float:
    gates = gates_for("1.35")
    claims = parse_objects([{**claim_manifest(f"c{i}"), "metadata": {"name": f"c{i}", "namespace": NAMESPACE}}
                            for i in range(pods)])
    members = [GangMember(f"{NAMESPACE}/p{i}", (c,)) for i, c in enumerate(claims) if isinstance(c, ResourceClaim)]
    rates = []
    for _ in range(repeat):
        allocator = Allocator(snapshot, gates)
        start = time.perf_counter()
        plan = place_gang(allocator, members)
        rates.append(pods / (time.perf_counter() - start))
        assert plan.feasible, plan
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--nodes", type=int, default=512)
    parser.add_argument("--pods", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    plane = ControlPlane(Path(tempfile.mkdtemp(prefix="draq-bench-")), keep_work_dir=False)
    plane.start()
    try:
        api = plane.client()
        started = time.perf_counter()
        publish_inventory(api, args.nodes)
        print(f"inventory: {args.nodes} nodes x 8 H100 published in {time.perf_counter() - started:.1f}s")
        plane.kubectl("create", "namespace", NAMESPACE)
        plane.wait_for_service_account(NAMESPACE)
        snapshot = snapshot_from_api(api)
        draq = draq_rate(snapshot, args.pods, args.repeat)
        scheduler = scheduler_rate(api, args.pods)
    finally:
        plane.stop()
    print(f"{args.pods} pods x one 8-GPU claim on {args.nodes} nodes x 8 GPUs")
    print(f"  kube-scheduler: {scheduler:9.1f} pods/s (created to bound, one run)")
    print(f"  draq allocator: {draq:9.1f} pods/s (median of {args.repeat}, placed one after another)")
    print(f"  ratio draq / scheduler: {draq / scheduler:.0f}x")


if __name__ == "__main__":
    main()
