"""Cold start of the operator against a real API server: time to the first admission cycle, and memory.

The local control plane (the one the e2e tests use) is filled with 5,000 nodes x 8 GPUs (one
ResourceSlice each), 20,000 pods bound 4 per node and 20 pending groups of 2 pods x one 4-GPU claim in
one queue. Then `draq run` (operator only, no leader election) is started from nothing, as a restarted
replica would be, and timed until its `/readyz` is ready: that needs every cache listed and the first
admission cycle run. Its peak RSS (VmHWM) is read at that moment. The scheduler and the
controller-manager are paused while the process starts, so that they do not compete with it for the
machine's cores; the API server and etcd run.

    .venv/bin/python bench/bench_cold_start.py [--nodes N] [--pods N] [--repeat N]

Filling the API server takes a few minutes on two cores; it is done once, the start is repeated.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from inventory import NODE_ALLOCATABLE, cluster_manifests

from admission.core.labels import GATE, GROUP_LABEL, GROUP_MIN_LABEL, QUEUE_LABEL
from admission.kube import kinds
from admission.kube.client import KubeApi, KubeApiError, load_credentials
from admission.localcluster.controlplane import ControlPlane, free_port

REPO = Path(__file__).resolve().parent.parent
BOUND = "bound"
QUEUED = "queued"
GROUPS = 20
CONCURRENCY = 48


# ----- the objects ---------------------------------------------------------------------------------
def bound_pod(index: int, node: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"web-{index}", "namespace": BOUND},
            "spec": {"nodeName": node, "automountServiceAccountToken": False, "containers": [
                {"name": "main", "image": "registry.k8s.io/pause:3.10",
                 "resources": {"requests": {"cpu": "2", "memory": "8Gi"}}}]}}


def queue_objects() -> list[dict[str, Any]]:
    group = "draq.io/v1alpha1"
    return [
        {"apiVersion": group, "kind": "QuotaUnit", "metadata": {"name": "bench-gpus"},
         "spec": {"devices": {"deviceClassNames": ["gpu"]}}},
        {"apiVersion": group, "kind": "ClusterQueue", "metadata": {"name": "bench"},
         "spec": {"namespaceSelector": {}, "quotas": [{"unit": "bench-gpus", "nominal": "1000"}]}},
        {"apiVersion": group, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": QUEUED},
         "spec": {"clusterQueue": "bench"}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
         "metadata": {"name": "gpus", "namespace": QUEUED},
         "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu",
                                                                                "count": 4}}]}}}},
    ]


def gated_pod(group: int, member: int) -> dict[str, Any]:
    labels = {QUEUE_LABEL: "lq", GROUP_LABEL: f"g{group}", GROUP_MIN_LABEL: "2"}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"g{group}-{member}", "namespace": QUEUED, "labels": labels},
            "spec": {"schedulingGates": [{"name": GATE}], "automountServiceAccountToken": False,
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpus"}],
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]}}]}}


# ----- filling the API server ----------------------------------------------------------------------
def collection_path(manifest: dict[str, Any]) -> str:
    resource = kinds.BY_KIND[manifest["kind"]]
    namespace = manifest["metadata"].get("namespace") if resource.namespaced else None
    base = f"/api/{resource.version}" if not resource.group else f"/apis/{resource.group}/{resource.version}"
    return f"{base}/namespaces/{namespace}/{resource.plural}" if namespace else f"{base}/{resource.plural}"


async def create_all(api: KubeApi, manifests: list[dict[str, Any]]) -> None:
    gate = asyncio.Semaphore(CONCURRENCY)

    async def create(manifest: dict[str, Any]) -> None:
        async with gate:
            for attempt in range(5):
                try:
                    await api.create(collection_path(manifest), manifest)
                    return
                except KubeApiError as err:
                    if err.status == 409:
                        return
                    if attempt == 4:
                        raise
                    await asyncio.sleep(0.5 * (attempt + 1))

    await asyncio.gather(*(create(m) for m in manifests))


async def fill(plane: ControlPlane, nodes: int, pods: int) -> None:
    credentials = load_credentials(plane.kubeconfig)
    async with KubeApi(credentials, timeout=120) as api:
        inventory = cluster_manifests(nodes, 8, ("H100", "A100"), NODE_ALLOCATABLE)
        await create_all(api, inventory[:1])  # the DeviceClass
        for start in range(1, len(inventory), 2000):
            await create_all(api, inventory[start:start + 2000])
        per_node = max(1, pods // max(1, nodes))
        names = [m["metadata"]["name"] for m in inventory if m["kind"] == "Node"]
        bound = [bound_pod(i, names[(i // per_node) % len(names)]) for i in range(pods)]
        for start in range(0, len(bound), 2000):
            await create_all(api, bound[start:start + 2000])
        await create_all(api, queue_objects())
        await create_all(api, [gated_pod(g, m) for g in range(GROUPS) for m in range(2)])


def prepare(plane: ControlPlane, nodes: int, pods: int) -> float:
    for namespace in (BOUND, QUEUED):
        plane.kubectl("create", "namespace", namespace)
        plane.wait_for_service_account(namespace)
    plane.kubectl("apply", "-f", str(REPO / "crds"))
    plane.kubectl("wait", "--for", "condition=Established", "--timeout", "60s", "crd", "--all")
    started = time.monotonic()
    asyncio.run(fill(plane, nodes, pods))
    return time.monotonic() - started


# ----- one cold start ------------------------------------------------------------------------------
@contextlib.contextmanager
def frozen(plane: ControlPlane, *names: str) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for name in names:
            stack.enter_context(plane.paused(name))
        yield


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def cold_start(plane: ControlPlane, log: Path, timeout: float = 300) -> tuple[float, float]:
    """Seconds from launching `draq run` to ready, and its peak RSS in MiB then."""
    draq = shutil.which("draq", path=str(Path(sys.executable).parent)) or "draq"
    port = free_port()
    argv = [draq, "run", "--kubeconfig", str(plane.kubeconfig), "--no-webhook", "--no-leader-election",
            "--metrics-port", str(port), "--kubernetes-version", "1.35"]
    with log.open("w") as out:
        started = time.monotonic()
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        try:
            while not ready(port):
                if process.poll() is not None:
                    raise RuntimeError(f"draq run exited with {process.returncode}; see {log}")
                if time.monotonic() - started > timeout:
                    raise RuntimeError(f"draq run not ready within {timeout:.0f}s; see {log}")
                time.sleep(0.05)
            elapsed = time.monotonic() - started
            return elapsed, peak_rss_mib(process.pid)
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="draq-bench-cold-"))
    plane = ControlPlane(work)
    try:
        plane.start()
        filled = prepare(plane, args.nodes, args.pods)
        print(f"API server filled with {args.nodes:,} nodes x 8 GPUs, {args.pods:,} bound pods and {GROUPS} "
              f"pending groups in {filled:.0f} s", flush=True)
        times, peaks = [], []
        with frozen(plane, "kube-scheduler", "kube-controller-manager"):
            for run in range(args.repeat):
                elapsed, peak = cold_start(plane, work / f"draq-run-{run}.log")
                times.append(elapsed)
                peaks.append(peak)
                print(f"  start {run + 1}: ready after {elapsed:.1f} s, peak RSS {peak:.0f} MiB; "
                      f"load {os.getloadavg()[0]:.2f}", flush=True)
        print(f"cold start of draq run, {args.nodes:,} nodes x 8 GPUs and {args.pods:,} pods: first cycle after "
              f"median {statistics.median(times):.1f} s (range {min(times):.1f}-{max(times):.1f}; goal <= 30 s), "
              f"peak RSS median {statistics.median(peaks):.0f} MiB (range {min(peaks):.0f}-{max(peaks):.0f}; "
              f"goal <= 500 MiB)")
    finally:
        plane.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
