"""Creation-to-bound time of single-pod groups on the real control plane, without draq and with it.

The local control plane (the one the e2e tests use) gets simulated H100 nodes. First, with no draq
installed, N pods each with one 1-GPU claim (from a template) are created at once in a plain namespace,
and the time from each pod's create request to the moment a watch sees it bound (spec.nodeName) is
recorded. Then draq runs as in `draq demo` (operator and webhooks, its own ServiceAccount), and the
same N pods are created in a namespace with a default queue: the webhook gates each pod, the operator
admits it as a group of one and releases it, and the scheduler binds it. Both runs are on the same
nodes, with room for all 2N pods.

    .venv/bin/python bench/bench_bound_latency.py [--pods N] [--threads N]

Goal: draq adds at most 50% to the median creation-to-bound time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes import client, watch

from admission.cli.demo import start_draq
from admission.localcluster.controlplane import ControlPlane
from admission.localcluster.nodesim import NodeSimulator

GPU_CLASS = "gpu.nvidia.com"
PLAIN, QUEUED = "plain", "queued"


def queue_objects() -> str:
    return f"""
apiVersion: draq.io/v1alpha1
kind: QuotaUnit
metadata: {{name: bench-gpus}}
spec: {{devices: {{deviceClassNames: [{GPU_CLASS}]}}}}
---
apiVersion: draq.io/v1alpha1
kind: ClusterQueue
metadata: {{name: bench}}
spec: {{namespaceSelector: {{}}, quotas: [{{unit: bench-gpus, nominal: 100000}}]}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: {QUEUED}, labels: {{draq.io/default-queue: lq}}}}
---
apiVersion: draq.io/v1alpha1
kind: LocalQueue
metadata: {{name: lq, namespace: {QUEUED}}}
spec: {{clusterQueue: bench}}
"""


def template(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": 1}}]}}}}


def pod(namespace: str, index: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p-{index:05d}", "namespace": namespace},
            "spec": {"automountServiceAccountToken": False, "terminationGracePeriodSeconds": 0,
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": "100m"}, "claims": [{"name": "gpu"}]}}]}}


class BoundWatch:
    """The monotonic time at which each pod of a namespace was first seen released (no scheduling gates)
    and bound (spec.nodeName)."""

    def __init__(self, api: Any, namespace: str) -> None:
        self.core: Any = client.CoreV1Api(api)
        self.namespace = namespace
        self.bound: dict[str, float] = {}
        self.released: dict[str, float] = {}
        self.seen = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> BoundWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def wait_bound(self, names: list[str], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.seen:
            while not all(n in self.bound for n in names):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.seen.wait(min(left, 0.5))
        return True

    def _see(self, item: Any) -> None:
        name, now = item.metadata.name, time.monotonic()
        with self.seen:
            if not item.spec.scheduling_gates and name not in self.released:
                self.released[name] = now
            if item.spec.node_name and name not in self.bound:
                self.bound[name] = now
            self.seen.notify_all()

    def _list(self) -> str:
        listing = self.core.list_namespaced_pod(self.namespace)
        for item in listing.items:
            self._see(item)
        return str(listing.metadata.resource_version)

    def _run(self) -> None:
        version = self._list()
        while not self._stop.is_set():
            try:
                stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                    self.core.list_namespaced_pod, self.namespace, resource_version=version, timeout_seconds=5)
                for event in stream:
                    if event["type"] == "ERROR":  # e.g. 410 Gone: the version is too old, list again
                        raise RuntimeError(str(event["raw_object"]))
                    version = event["object"].metadata.resource_version
                    self._see(event["object"])
                    if self._stop.is_set():
                        return
            except Exception:  # the watch broke: list again
                if self._stop.is_set():
                    return
                time.sleep(0.2)
                try:
                    version = self._list()
                except Exception:
                    continue


def timed_run(plane: ControlPlane, namespace: str, pods: int, threads: int,
              timeout: float) -> tuple[list[float], list[float], float]:
    """Create `pods` pods at once (from `threads` threads): per pod the seconds from its create request to
    bound and to released (seen without gates), and the seconds the create requests took."""
    api = plane.client()
    core: Any = client.CoreV1Api(api)
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        "resource.k8s.io", "v1", namespace, "resourceclaimtemplates", template(namespace))
    seen = BoundWatch(api, namespace).start()
    time.sleep(1)  # the watch is open before the first pod
    created: dict[str, float] = {}

    def create(index: int) -> None:
        manifest = pod(namespace, index)
        created[manifest["metadata"]["name"]] = time.monotonic()
        core.create_namespaced_pod(namespace, manifest)

    start = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(create, range(pods)))
    creating = time.monotonic() - start
    while len(seen.bound) < pods and time.monotonic() - start < timeout:
        time.sleep(0.2)
    seen.stop()
    if len(seen.bound) < pods:
        for line in unbound_report(core, namespace, set(seen.bound))[:40]:
            print(line, flush=True)
        raise RuntimeError(f"{namespace}: only {len(seen.bound)} of {pods} pods bound within {timeout:.0f}s")
    return ([seen.bound[name] - at for name, at in created.items()],
            [seen.released.get(name, seen.bound[name]) - at for name, at in created.items()], creating)


def unbound_report(core: Any, namespace: str, bound: set[str]) -> list[str]:
    """One line per pod not seen bound: its gates, the node it is pinned to and its scheduling condition;
    then, per such node, the pods bound or pinned there and its allocated devices, so a failed run says
    where the pods stopped."""
    lines, nodes = [], set()
    pods = core.list_pod_for_all_namespaces().items
    for item in pods:
        if item.metadata.namespace != namespace or item.metadata.name in bound:
            continue
        node = _pinned_node(item)
        nodes.add(node)
        scheduled = [f"{c.type}={c.status} {c.reason or ''} {(c.message or '')[:80]}".strip()
                     for c in item.status.conditions or []]
        lines.append(f"  unbound {item.metadata.name}: gates={[g.name for g in item.spec.scheduling_gates or []]} "
                     f"node={node} conditions={scheduled}")
    claims = client.CustomObjectsApi(core.api_client).list_cluster_custom_object(
        "resource.k8s.io", "v1", "resourceclaims")["items"]
    for node in sorted(n for n in nodes if n):
        on_node = [f"{p.metadata.namespace}/{p.metadata.name}" + ("" if p.spec.node_name else "(pinned)")
                   for p in pods if p.spec.node_name == node or (not p.spec.node_name and _pinned_node(p) == node)]
        devices = [f"{c['metadata']['namespace']}/{c['metadata']['name']}:{r['device']}"
                   for c in claims for r in ((c.get("status") or {}).get("allocation") or {})
                   .get("devices", {}).get("results", []) if r.get("pool") == node]
        lines.append(f"  node {node}: {len(on_node)} pods {on_node}; {len(devices)} devices allocated {devices}")
        lines.extend(_history(core, claims, [p for p in pods if p.metadata.namespace == namespace and (
            p.spec.node_name == node or (not p.spec.node_name and _pinned_node(p) == node))]))
    return lines


def _history(core: Any, claims: list[dict[str, Any]], pods: list[Any]) -> list[str]:
    """When each pod's group was admitted (and to which devices), and when its claim was allocated."""
    groups = client.CustomObjectsApi(core.api_client)
    lines = []
    for item in pods:
        name, namespace = item.metadata.name, item.metadata.namespace
        try:
            status = groups.get_namespaced_custom_object("draq.io", "v1alpha1", namespace, "podgroups", name)["status"]
        except Exception:
            status = {}
        plan = [d["device"] for c in (status.get("plan") or {}).get("claims", []) for d in c.get("devices", [])]
        allocated = [f"{f.get('time')}" for c in claims if c["metadata"]["name"].startswith(f"{name}-")
                     for f in c["metadata"].get("managedFields", []) if f.get("subresource") == "status"]
        lines.append(f"    {name}: admitted {status.get('admittedAt')} plan {plan} phase {status.get('phase')}; "
                     f"claim status written {allocated}")
    return lines


def _pinned_node(item: Any) -> str:
    try:
        terms = item.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
        return str(terms[0].match_fields[0].values[0])
    except (AttributeError, IndexError, TypeError):
        return ""


def figures(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    return (f"median {statistics.median(ordered):.2f} s, p90 {p90:.2f} s, "
            f"range {ordered[0]:.2f}-{ordered[-1]:.2f} s")


def describe(label: str, run: tuple[list[float], list[float], float]) -> str:
    bound, released, creating = run
    return (f"{label}: creation to bound {figures(bound)}; creation to released {figures(released)}; "
            f"create requests took {creating:.1f} s; load {os.getloadavg()[0]:.2f}")


def tear_down(plane: ControlPlane, work: Path, keep: bool, parts: Iterable[subprocess.Popen[Any] | NodeSimulator | None]
              ) -> None:
    """Stop draq's processes and the node simulators in the order given, then the control plane; keep the
    logs (`--keep`) or remove them."""
    for part in parts:
        if isinstance(part, NodeSimulator):
            part.stop()
        elif part is not None:
            part.terminate()
            part.wait(timeout=30)
    plane.stop()
    if keep:
        print(f"logs kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--keep", action="store_true", help="keep the control plane's directory (logs)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="draq-bench-bound-"))
    plane = ControlPlane(work)
    draq = None
    sim = None
    try:
        plane.start()
        sim = NodeSimulator(plane.client())
        sim.apply_device_classes()
        nodes = -(-2 * args.pods // 8)
        for n in range(nodes):
            sim.add_node(f"h100-{n:04d}", "h100")
        sim.start()
        plane.kubectl("create", "namespace", PLAIN)
        plane.wait_for_service_account(PLAIN)
        without = timed_run(plane, PLAIN, args.pods, args.threads, args.timeout)
        print(describe(f"{args.pods} pods x one 1-GPU claim, {nodes} nodes x 8 GPUs, without draq", without),
              flush=True)
        draq = start_draq(plane, None)
        plane.kubectl("apply", "-f", "-", input=queue_objects())
        plane.wait_for_service_account(QUEUED)
        time.sleep(2)  # the operator's caches have the queue
        with_draq = timed_run(plane, QUEUED, args.pods, args.threads, args.timeout)
        print(describe(f"{args.pods} single-pod groups, same nodes, with draq", with_draq), flush=True)
        added = statistics.median(with_draq[0]) / statistics.median(without[0]) - 1
        print(f"draq adds {added:+.0%} to the median creation-to-bound time (goal <= +50%)", flush=True)
    finally:
        tear_down(plane, work, args.keep, (draq, sim))


if __name__ == "__main__":
    main()
