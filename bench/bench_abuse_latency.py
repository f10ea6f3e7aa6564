"""Fairness under abuse, end to end: another tenant's admission latency on the real control plane, first on
an idle cluster, then with thousands of abandoned one-pod groups pending in one namespace.

The local control plane (the one the e2e tests use) gets simulated H100 nodes, and draq runs as in
`draq demo` (operator and webhooks in one process, its own ServiceAccount). The tenant creates its groups
one after another, each once the previous one is bound: --singles one-pod groups (one 1-GPU claim) and
--gangs gangs of --gang-size pods (one 1-GPU claim each); for each, the time from the first create request
to the moment a watch sees all its pods released (no scheduling gates) and bound (spec.nodeName). Then the
abusing namespace creates --flood one-pod groups, spread over LocalQueues of at most 1,000 groups each
(`spec.maxPendingGroups`), that can never be admitted: each asks for 16 GPUs, more than any node has (or,
with --abuse quota, one GPU of a ClusterQueue whose quota is 0). Once draq has written their PodGroups and
its CPU has settled, the tenant runs again. draq's resident memory and CPU are read from /proc, idle
(before the flood) and flooded (after it settled, nothing changing).

    .venv/bin/python bench/bench_abuse_latency.py [--flood 6000] [--singles 20] [--gangs 10]

Goal (issue 25, item 7): the tenant's median latency flooded is within 20% of idle.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_bound_latency import BoundWatch, tear_down
from kubernetes import client

from admission.cli.demo import start_draq
from admission.core.labels import GROUP_LABEL, GROUP_MIN_LABEL, MANAGED_LABEL, QUEUE_LABEL
from admission.localcluster.controlplane import ControlPlane
from admission.localcluster.nodesim import NodeSimulator

GPU_CLASS = "gpu.nvidia.com"
TENANT, ABUSER = "team", "flood"
QUEUE_CAP = 1000  # groups per abusing LocalQueue: the webhook's default cap
TICKS = os.sysconf("SC_CLK_TCK")
RETRIES = 6
WARM_SINGLES = 2  # and one gang: the first use of every path, before the idle run


def queue_objects(flood_queues: int, abuse: str) -> str:
    abuser_nominal = 0 if abuse == "quota" else 100000
    text = f"""
apiVersion: draq.io/v1alpha1
kind: QuotaUnit
metadata: {{name: bench-gpus}}
spec: {{devices: {{deviceClassNames: [{GPU_CLASS}]}}}}
---
apiVersion: draq.io/v1alpha1
kind: ClusterQueue
metadata: {{name: tenant}}
spec: {{namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: {TENANT}}}}},
        quotas: [{{unit: bench-gpus, nominal: 100000}}]}}
---
apiVersion: draq.io/v1alpha1
kind: ClusterQueue
metadata: {{name: abuser}}
spec: {{namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: {ABUSER}}}}},
        quotas: [{{unit: bench-gpus, nominal: {abuser_nominal}}}]}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: {TENANT}, labels: {{{MANAGED_LABEL}: "true"}}}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: {ABUSER}, labels: {{{MANAGED_LABEL}: "true"}}}}
---
apiVersion: draq.io/v1alpha1
kind: LocalQueue
metadata: {{name: lq, namespace: {TENANT}}}
spec: {{clusterQueue: tenant}}
"""
    for index in range(flood_queues):
        text += f"""---
apiVersion: draq.io/v1alpha1
kind: LocalQueue
metadata: {{name: lq-{index}, namespace: {ABUSER}}}
spec: {{clusterQueue: abuser, maxPendingGroups: {QUEUE_CAP}}}
"""
    return text


def template(namespace: str, name: str, gpus: int) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": gpus}}]}}}}


def pod(namespace: str, name: str, queue: str, claim_template: str, group: str, size: int) -> dict[str, Any]:
    labels = {QUEUE_LABEL: queue, GROUP_LABEL: group, GROUP_MIN_LABEL: str(size)}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"automountServiceAccountToken": False, "terminationGracePeriodSeconds": 0,
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": claim_template}],
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": "10m"}, "claims": [{"name": "gpu"}]}}]}}


@dataclass
class Latencies:
    """Per group: seconds from its first create request to all its pods released, and to all bound."""

    released: dict[str, list[float]] = field(default_factory=lambda: {"single": [], "gang": []})
    bound: dict[str, list[float]] = field(default_factory=lambda: {"single": [], "gang": []})


def tenant_run(api: Any, watcher: BoundWatch, label: str, singles: int, gangs: int, gang_size: int,
               timeout: float) -> Latencies:
    """The tenant's groups, one after another, each created once the previous one is bound."""
    core: Any = client.CoreV1Api(api)
    found = Latencies()
    plan = [("single", 1)] * singles + [("gang", gang_size)] * gangs
    before = pod_groups(api, TENANT)
    for index, (kind, size) in enumerate(plan):
        group = f"{label}-{kind}-{index:03d}"
        names = [f"{group}-{member}" for member in range(size)]
        start = time.monotonic()
        for name in names:
            core.create_namespaced_pod(TENANT, pod(TENANT, name, "lq", "one-gpu", group, size))
        if not watcher.wait_bound(names, timeout):
            raise RuntimeError(f"{label}: group {group} was not bound within {timeout:.0f}s")
        found.released[kind].append(max(watcher.released.get(n, watcher.bound[n]) for n in names) - start)
        found.bound[kind].append(max(watcher.bound[n] for n in names) - start)
    if pod_groups(api, TENANT) - before != len(plan):  # each group went through draq's queue
        raise RuntimeError(f"{label}: {len(plan)} groups created, but draq recorded "
                           f"{pod_groups(api, TENANT) - before} PodGroups")
    return found


def flood(api: Any, groups: int, threads: int) -> tuple[int, int, float]:
    """The abuser's one-pod groups, created from `threads` threads, at most `QUEUE_CAP` per LocalQueue:
    (created, refused, seconds)."""
    core: Any = client.CoreV1Api(api)
    refused, retried = 0, 0
    lock = threading.Lock()

    def create(index: int) -> None:
        nonlocal refused, retried
        name = f"junk-{index:05d}"
        for attempt in range(RETRIES):
            try:
                core.create_namespaced_pod(ABUSER, pod(ABUSER, name, f"lq-{index // QUEUE_CAP}", "junk", name, 1))
                return
            except client.ApiException as err:
                if err.status == 409:  # an earlier attempt was applied after all
                    return
                if err.status == 403:
                    with lock:
                        refused += 1
                    return
                if err.status < 500 or attempt == RETRIES - 1:
                    raise
                with lock:  # e.g. a webhook call that timed out under the burst: the client tries again
                    retried += 1
                time.sleep(0.5 * (attempt + 1))

    start = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(create, range(groups)))
    if retried:
        print(f"flood: {retried} create requests failed on the server side and were tried again", flush=True)
    return groups - refused, refused, time.monotonic() - start


def count(api: Any, group: str, version: str, namespace: str, plural: str) -> int:
    """How many objects of a kind a namespace holds, from a one-item page (the rest is counted, not sent)."""
    listing = client.CustomObjectsApi(api).list_namespaced_custom_object(group, version, namespace, plural, limit=1)
    return len(listing.get("items") or []) + int((listing.get("metadata") or {}).get("remainingItemCount") or 0)


def pod_groups(api: Any, namespace: str) -> int:
    return count(api, "draq.io", "v1alpha1", namespace, "podgroups")


def claims(api: Any, namespace: str) -> int:
    return count(api, "resource.k8s.io", "v1", namespace, "resourceclaims")


def wait_for(what: str, current: Callable[[], int], wanted: int, timeout: float) -> float:
    """Seconds until `current()` reaches `wanted`; says so and goes on when it does not within `timeout`."""
    start = time.monotonic()
    while (now := current()) < wanted:
        if time.monotonic() - start > timeout:
            print(f"flood: only {now} of {wanted} {what} after {timeout:.0f} s", flush=True)
            break
        time.sleep(2)
    return time.monotonic() - start


class Process:
    """A process's resident memory and CPU time, from /proc; its passes, from its metrics."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        argv = Path(f"/proc/{pid}/cmdline").read_text().split("\0")
        self.metrics = f"http://127.0.0.1:{argv[argv.index('--metrics-port') + 1]}/metrics"

    def passes(self) -> tuple[int, float]:
        """Reconcile passes that ran an admission cycle so far, and their seconds in all."""
        found = {}
        with urllib.request.urlopen(self.metrics, timeout=10) as answer:
            for line in answer.read().decode().splitlines():
                if line.startswith(("draq_cycle_duration_seconds_count", "draq_cycle_duration_seconds_sum")):
                    name, value = line.split()
                    found[name] = float(value)
        return int(found.get("draq_cycle_duration_seconds_count", 0)), found.get("draq_cycle_duration_seconds_sum", 0.0)

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime

    def cores(self, seconds: float) -> float:
        before, start = self.cpu_seconds(), time.monotonic()
        time.sleep(seconds)
        return (self.cpu_seconds() - before) / (time.monotonic() - start)

    def quiet(self, seconds: float) -> str:
        """CPU with nothing changing over `seconds`, and the passes that ran meanwhile."""
        count, spent = self.passes()
        cores = self.cores(seconds)
        after, total = self.passes()
        each = f", {1000 * (total - spent) / (after - count):.0f} ms each" if after > count else ""
        return f"CPU {cores:.2f} cores with nothing changing ({after - count} passes in {seconds:.0f} s{each})"

    def settle(self, below: float, window: float, timeout: float) -> float:
        """Wait until a window's CPU use is below `below` cores (or `timeout`); the seconds waited."""
        start = time.monotonic()
        while time.monotonic() - start < timeout and self.cores(window) >= below:
            pass
        return time.monotonic() - start


def since(draq: Process, before: tuple[int, float]) -> tuple[int, float]:
    count, spent = draq.passes()
    return count - before[0], spent - before[1]


def figures(values: list[float]) -> str:
    if not values:
        return "none"
    return f"median {statistics.median(values):.2f} s (range {min(values):.2f}-{max(values):.2f})"


def describe(label: str, found: Latencies, draq: Process, quiet: str, passes: tuple[int, float]) -> str:
    count, spent = passes
    lines = [f"{label}: draq RSS {draq.rss_mib():.0f} MiB, {quiet}, load {os.getloadavg()[0]:.2f}",
             f"  passes while the tenant ran: {count}, {1000 * spent / max(count, 1):.0f} ms each on average"]
    for kind in ("single", "gang"):
        lines.append(f"  {kind:6}: creation to released {figures(found.released[kind])}; "
                     f"creation to bound {figures(found.bound[kind])}")
    return "\n".join(lines)


def ratio(flooded: list[float], idle: list[float]) -> str:
    return f"{statistics.median(flooded) / statistics.median(idle):.2f}x" if flooded and idle else "n/a"


def run(plane: ControlPlane, args: argparse.Namespace, started: Callable[[Any], None]) -> None:
    api = plane.client()
    sim = NodeSimulator(api)
    sim.apply_device_classes()
    tenant_gpus = 2 * (args.singles + args.gangs * args.gang_size) + WARM_SINGLES + args.gang_size
    nodes = max(2, -(-tenant_gpus // 8) + 1)  # room for every tenant pod of both runs: none ends
    for n in range(nodes):
        sim.add_node(f"h100-{n:04d}", "h100")
    sim.start()
    started(sim)
    queues = -(-args.flood // QUEUE_CAP)
    draq = start_draq(plane, None)
    started(draq)
    process = Process(draq.pid)
    plane.kubectl("apply", "-f", "-", input=queue_objects(queues, args.abuse))
    plane.wait_for_service_account(TENANT)
    plane.wait_for_service_account(ABUSER)
    custom = client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object("resource.k8s.io", "v1", TENANT, "resourceclaimtemplates",
                                           template(TENANT, "one-gpu", 1))
    custom.create_namespaced_custom_object("resource.k8s.io", "v1", ABUSER, "resourceclaimtemplates",
                                           template(ABUSER, "junk", 1 if args.abuse == "quota" else 16))
    print(f"{nodes} nodes x 8 GPUs; tenant: {args.singles} one-pod groups then {args.gangs} gangs of "
          f"{args.gang_size} pods, one after another, 1 GPU per pod; abuser: {args.flood} one-pod groups in "
          f"{queues} LocalQueues ({args.abuse}); {os.cpu_count()} cores", flush=True)
    watcher = BoundWatch(api, TENANT).start()
    time.sleep(2)
    tenant_run(api, watcher, "warm", WARM_SINGLES, 1, args.gang_size, args.timeout)  # first-use costs of every path
    process.settle(0.05, 3, 30)
    idle_quiet = process.quiet(args.window)
    before = process.passes()
    idle = tenant_run(api, watcher, "idle", args.singles, args.gangs, args.gang_size, args.timeout)
    print(describe("idle", idle, process, idle_quiet, since(process, before)), flush=True)

    created, refused, seconds = flood(api, args.flood, args.threads)
    print(f"flood: {created} pods created, {refused} refused, in {seconds:.1f} s", flush=True)
    waited = wait_for("PodGroups", lambda: pod_groups(api, ABUSER), created, args.timeout)
    written = pod_groups(api, ABUSER)
    print(f"flood: {written} PodGroups written {waited:.0f} s after the last create; "
          f"draq RSS {process.rss_mib():.0f} MiB", flush=True)
    # The resourceclaim controller creates the flood's claims at its client's rate (20 per second by default):
    # until it is through, the tenant's claims queue behind them, whatever draq does.
    waited = wait_for("ResourceClaims", lambda: claims(api, ABUSER), created, args.timeout)
    print(f"flood: the resourceclaim controller created the flood's claims {waited:.0f} s after that", flush=True)
    waited = process.settle(0.3, 5, args.timeout)
    flooded_quiet = process.quiet(args.window)
    print(f"flood: draq settled after {waited:.0f} s more", flush=True)
    before = process.passes()
    flooded = tenant_run(api, watcher, "flooded", args.singles, args.gangs, args.gang_size, args.timeout)
    watcher.stop()
    print(describe(f"flooded ({written} abandoned groups pending)", flooded, process, flooded_quiet,
                   since(process, before)), flush=True)
    for kind in ("single", "gang"):
        print(f"{kind}: flooded/idle median, creation to released {ratio(flooded.released[kind], idle.released[kind])}"
              f", to bound {ratio(flooded.bound[kind], idle.bound[kind])} (goal <= 1.20x)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--flood", type=int, default=6000, help="the abuser's groups (default %(default)s)")
    parser.add_argument("--abuse", choices=("unplaceable", "quota"), default="unplaceable",
                        help="why the abuser's groups never fit: 16 GPUs each, or a quota of 0 (default %(default)s)")
    parser.add_argument("--singles", type=int, default=20, help="the tenant's one-pod groups per run")
    parser.add_argument("--gangs", type=int, default=10, help="the tenant's gangs per run")
    parser.add_argument("--gang-size", type=int, default=4)
    parser.add_argument("--threads", type=int, default=8, help="threads creating the flood")
    parser.add_argument("--window", type=float, default=20, help="seconds over which draq's CPU is read")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--keep", action="store_true", help="keep the control plane's directory (logs)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="draq-bench-abuse-"))
    plane = ControlPlane(work)
    running: list[Any] = []
    try:
        plane.start()
        run(plane, args, running.append)
    finally:
        tear_down(plane, work, args.keep, reversed(running))


if __name__ == "__main__":
    main()
