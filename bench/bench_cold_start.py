"""Cold start, incremental set-up and idle CPU of the operator against a real API server.

The local control plane (the one the e2e tests use) is filled with 10,000 nodes x 8 GPUs (one
ResourceSlice each), 80,000 pods bound 8 per node and 5,000 pending groups of 4 gated pods, each pod
with one 4-GPU claim from a template, in one queue whose quota (8 GPUs) none of them fits: they all
wait, so every start finds the same cluster. The scheduler and the controller-manager are paused from
before the pending pods are created (their claims are then never generated: draq reads the template)
to the end, so that they do not compete for the machine's two cores; the API server and etcd run.

Measured:
  (a) `draq run` (operator only, no leader election) started from nothing, as a restarted replica would
      be, timed until its `/readyz` is ready (every cache listed, the first admission cycle run), with
      its peak RSS (VmHWM) then; repeated;
  (b) the incremental cycle set-up: in this process, the operator's cache (the same reflectors) and
      reader over the same API server; after one object is changed through the API and its watch event
      has arrived, the time of the next reading plus what `run_cycle` sets up (`bench_cycle_setup.setup`);
  (c) the CPU time of the last started `draq run` over `--idle-seconds` with nothing changing (/proc).

    PYTHONPATH=. .venv/bin/python bench/bench_cold_start.py [--nodes N] [--bound N] [--groups N]
        [--repeat N] [--hold | --kubeconfig PATH]

`--hold` keeps the filled control plane (paused components included) after the figures, until
interrupted, and prints its kubeconfig; `--kubeconfig` measures against such a held one without filling.
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
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from bench_cycle_setup import GATES, setup
from inventory import NODE_ALLOCATABLE, cluster_manifests

from admission.core.labels import GATE, GROUP_LABEL, GROUP_MIN_LABEL, QUEUE_LABEL
from admission.kube import kinds
from admission.kube.client import KubeApi, KubeApiError, load_credentials
from admission.localcluster.controlplane import ControlPlane, free_port
from admission.operator.cache import OperatorCache
from admission.operator.reading import CacheReader

REPO = Path(__file__).resolve().parent.parent
BOUND = "bound"
QUEUED = "queued"
CLIENTS = 4  # each API client holds at most 16 connections
CONCURRENCY = 64
START_GOAL_S, RSS_GOAL_MIB, CHANGE_GOAL_MS, IDLE_GOAL_CORE = 30.0, 1024.0, 20.0, 0.05


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
         "spec": {"namespaceSelector": {}, "quotas": [{"unit": "bench-gpus", "nominal": "8"}]}},
        {"apiVersion": group, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": QUEUED},
         "spec": {"clusterQueue": "bench"}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
         "metadata": {"name": "gpus", "namespace": QUEUED},
         "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu",
                                                                                "count": 4}}]}}}},
    ]


def gated_pod(group: int, member: int, size: int) -> dict[str, Any]:
    labels = {QUEUE_LABEL: "lq", GROUP_LABEL: f"g{group}", GROUP_MIN_LABEL: str(size)}
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


async def create_all(apis: list[KubeApi], manifests: Iterable[dict[str, Any]]) -> int:
    """Create every manifest, CONCURRENCY at a time over the clients (an existing one is kept); how many."""
    todo = iter(manifests)
    count = 0

    async def create(api: KubeApi, manifest: dict[str, Any]) -> None:
        for attempt in range(5):
            try:
                await api.create(collection_path(manifest), manifest)
                return
            except KubeApiError as err:
                if err.status == 409:
                    return
                if attempt == 4:
                    raise
            except (ConnectionError, TimeoutError, OSError):
                if attempt == 4:
                    raise
            await asyncio.sleep(0.5 * (attempt + 1))

    async def worker(api: KubeApi) -> None:
        nonlocal count
        for manifest in todo:
            await create(api, manifest)
            count += 1

    await asyncio.gather(*(worker(apis[n % len(apis)]) for n in range(CONCURRENCY)))
    return count


async def fill_step(plane: ControlPlane, manifests: Iterable[dict[str, Any]], what: str) -> None:
    credentials = load_credentials(plane.kubeconfig)
    apis = [KubeApi(credentials, timeout=120) for _ in range(CLIENTS)]
    started = time.monotonic()
    try:
        count = await create_all(apis, manifests)
    finally:
        for api in apis:
            await api.close()
    elapsed = time.monotonic() - started
    print(f"  created {count:,} {what} in {elapsed:.0f} s ({count / max(elapsed, 1e-9):.0f}/s); "
          f"load {os.getloadavg()[0]:.2f}", flush=True)


def prepare(plane: ControlPlane, args: argparse.Namespace) -> float:
    """Fill the API server; the controller-manager is paused (and left paused) before the pending pods."""
    for namespace in (BOUND, QUEUED, "draq-system"):  # draq's own: its record seal's key is kept there
        plane.kubectl("create", "namespace", namespace)
        plane.wait_for_service_account(namespace)
    plane.kubectl("apply", "-f", str(REPO / "crds"))
    plane.kubectl("wait", "--for", "condition=Established", "--timeout", "60s", "crd", "--all")
    started = time.monotonic()
    inventory = cluster_manifests(args.nodes, 8, ("H100", "A100"), NODE_ALLOCATABLE)
    names = [m["metadata"]["name"] for m in inventory if m["kind"] == "Node"]
    asyncio.run(fill_step(plane, inventory, "nodes, ResourceSlices and the DeviceClass"))
    asyncio.run(fill_step(plane, queue_objects(), "queue objects"))
    os.kill(component_pid(plane, "kube-controller-manager"), signal.SIGSTOP)
    pending = (gated_pod(g, m, args.group_size) for g in range(args.groups) for m in range(args.group_size))
    asyncio.run(fill_step(plane, pending, "pending pods"))
    per_node = max(1, args.bound // max(1, args.nodes))
    bound = (bound_pod(i, names[(i // per_node) % len(names)]) for i in range(args.bound))
    asyncio.run(fill_step(plane, bound, "bound pods"))  # last: a fill cut short still has every group
    return time.monotonic() - started


def component_pid(plane: ControlPlane, name: str) -> int:
    process = next(c for c in plane.components if c.name == name).process
    assert process is not None
    return process.pid


@contextlib.contextmanager
def frozen(plane: ControlPlane, *names: str) -> Iterator[None]:
    """These components stopped (SIGSTOP) for the block, whatever their state before; resumed after."""
    pids = [component_pid(plane, name) for name in names]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


# ----- (a) cold starts and (c) idle CPU ----------------------------------------------------------
def proc_status(pid: int, field: str) -> float:
    """A /proc/<pid>/status memory field in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


@contextlib.contextmanager
def draq_run(kubeconfig: Path, log: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """`draq run` from this checkout's code (PYTHONPATH), stopped at the end of the block."""
    draq = shutil.which("draq", path=str(Path(sys.executable).parent)) or "draq"
    port = free_port()
    argv = [draq, "run", "--kubeconfig", str(kubeconfig), "--no-webhook", "--no-leader-election",
            "--metrics-port", str(port), "--kubernetes-version", "1.35"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with log.open("w") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            yield process, port
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def tail(log: Path, lines: int = 15) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def cold_start(kubeconfig: Path, log: Path, idle_seconds: float, timeout: float = 600
               ) -> tuple[float, float, float, float | None]:
    """Seconds from launching `draq run` to ready, the CPU seconds it had used then, its peak RSS in MiB
    then, and (with `idle_seconds`) the cores it used over that long afterwards, once 10 s have passed."""
    started = time.monotonic()
    with draq_run(kubeconfig, log) as (process, port):
        while not ready(port):
            if process.poll() is not None:
                raise RuntimeError(f"draq run exited with {process.returncode}: {tail(log)}")
            if time.monotonic() - started > timeout:
                raise RuntimeError(f"draq run not ready within {timeout:.0f}s: {tail(log)}")
            time.sleep(0.05)
        elapsed, cpu = time.monotonic() - started, cpu_seconds(process.pid)
        peak = proc_status(process.pid, "VmHWM")
        if not idle_seconds:
            return elapsed, cpu, peak, None
        time.sleep(10)
        before, since = cpu_seconds(process.pid), time.monotonic()
        time.sleep(idle_seconds)
        cores = (cpu_seconds(process.pid) - before) / (time.monotonic() - since)
        print(f"  idle: {cores:.3f} core over {idle_seconds:.0f} s (goal <= {IDLE_GOAL_CORE}), RSS "
              f"{proc_status(process.pid, 'VmRSS'):.0f} MiB; load {os.getloadavg()[0]:.2f}", flush=True)
        return elapsed, cpu, peak, cores


# ----- (b) incremental set-up --------------------------------------------------------------------
def changes(nodes: int, bound: int, groups: int) -> dict[str, tuple[str, Callable[[int], tuple[str, str]],
                                                                    Callable[[int], dict[str, Any]]]]:
    """Per case: the kind changed, the (namespace, name) of its i-th change, and its merge patch."""
    def touch(i: int) -> dict[str, Any]:
        return {"metadata": {"labels": {"bench.draq.io/touch": str(i)}}}
    return {
        "one bound pod": ("Pod", lambda i: (BOUND, f"web-{(i * 7919) % bound}"), touch),
        "one pending pod": ("Pod", lambda i: (QUEUED, f"g{(i * 97) % groups}-0"), touch),
        "one node": ("Node", lambda i: ("", f"node-{(i * 131) % nodes:05d}"), touch),
        "one ResourceSlice (new pool generation)": (
            "ResourceSlice", lambda i: ("", f"node-{(i * 131) % nodes:05d}-gpus"),
            lambda i: {"spec": {"pool": {"generation": 2 + i}}}),
    }


def object_path(kind: str, namespace: str, name: str) -> str:
    return kinds.BY_KIND[kind].object_path(namespace or None, name)


async def incremental(kubeconfig: Path, nodes: int, bound: int, groups: int, repeat: int) -> dict[str, float]:
    """The set-up of the first reading and the median per changed object, by case."""
    async with KubeApi(load_credentials(kubeconfig), timeout=120) as api:
        cache = OperatorCache(api)
        listed, cpu = time.monotonic(), time.process_time()
        await cache.start(timeout=600)
        print(f"  (b) the operator's cache listed in this process in {time.monotonic() - listed:.1f} s (CPU "
              f"{time.process_time() - cpu:.1f} s); load {os.getloadavg()[0]:.2f}", flush=True)
        try:
            reader = CacheReader(cache, GATES)
            first, first_cpu = timed_setup(reader)
            print(f"  (b) first set-up (everything parsed, every view built): CPU {first_cpu:.0f} ms "
                  f"({first:.0f} ms elapsed); this process's RSS {proc_status(os.getpid(), 'VmRSS'):.0f} MiB",
                  flush=True)
            medians = {}
            for case, (kind, key, patch) in changes(nodes, bound, groups).items():
                timings, elapsed = [], []
                for i in range(repeat):
                    namespace, name = key(i)
                    written = await api.merge_patch(object_path(kind, namespace, name), patch(i))
                    await arrived(cache, kind, (namespace, name), str(written["metadata"]["resourceVersion"]))
                    wall, cpu = timed_setup(reader)
                    timings.append(cpu)
                    elapsed.append(wall)
                medians[case] = statistics.median(timings)
                print(f"  (b) set-up after {case} changed: CPU median {medians[case]:.1f} ms (range "
                      f"{min(timings):.1f}-{max(timings):.1f}; goal <= {CHANGE_GOAL_MS:.0f} ms), elapsed median "
                      f"{statistics.median(elapsed):.1f} ms; load {os.getloadavg()[0]:.2f}", flush=True)
            return medians
        finally:
            await cache.stop()


def timed_setup(reader: CacheReader) -> tuple[float, float]:
    """The set-up's elapsed and CPU milliseconds."""
    before = time.process_time()
    wall = setup(reader)
    return wall, (time.process_time() - before) * 1000


async def arrived(cache: OperatorCache, kind: str, key: tuple[str, str], version: str) -> None:
    store = cache.reflectors[kind].store
    deadline = time.monotonic() + 300  # an API server under load delivers late
    while (store.get(key) or {}).get("metadata", {}).get("resourceVersion") != version:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the watch did not deliver {kind} {key} at {version} within 300 s")
        await asyncio.sleep(0.002)


# ----- the run -------------------------------------------------------------------------------------
def measure(kubeconfig: Path, work: Path, args: argparse.Namespace) -> None:
    if args.changes:
        asyncio.run(incremental(kubeconfig, args.nodes, args.bound, args.groups, args.changes))
    if args.repeat:
        cold_starts(kubeconfig, work, args)


def cold_starts(kubeconfig: Path, work: Path, args: argparse.Namespace) -> None:
    times, cpus, peaks = [], [], []
    for run in range(args.repeat):
        last = run == args.repeat - 1
        elapsed, cpu, peak, _ = cold_start(kubeconfig, work / f"draq-run-{run}.log",
                                           args.idle_seconds if last else 0, args.start_timeout)
        times.append(elapsed)
        cpus.append(cpu)
        peaks.append(peak)
        print(f"  (a) start {run + 1}: ready after {elapsed:.1f} s (CPU {cpu:.1f} s), peak RSS {peak:.0f} MiB; "
              f"load {os.getloadavg()[0]:.2f}", flush=True)
    scale = (f"{args.nodes:,} nodes x 8 GPUs, {args.bound:,} bound pods, {args.groups:,} pending groups of "
             f"{args.group_size}")
    print(f"(a) cold start of draq run, {scale}: first cycle after median {statistics.median(times):.1f} s "
          f"(range {min(times):.1f}-{max(times):.1f}; goal <= {START_GOAL_S:.0f} s; CPU median "
          f"{statistics.median(cpus):.1f} s), peak RSS median "
          f"{statistics.median(peaks):.0f} MiB (range {min(peaks):.0f}-{max(peaks):.0f}; goal <= "
          f"{RSS_GOAL_MIB:.0f} MiB)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--nodes", type=int, default=10000)
    parser.add_argument("--bound", type=int, default=80000, help="bound pods, spread evenly over the nodes")
    parser.add_argument("--groups", type=int, default=5000, help="pending groups")
    parser.add_argument("--group-size", type=int, default=4, help="gated pods per pending group")
    parser.add_argument("--repeat", type=int, default=3, help="cold starts; 0: none")
    parser.add_argument("--start-timeout", type=float, default=600, help="seconds for one start to be ready")
    parser.add_argument("--changes", type=int, default=7, help="changes per case for (b); 0: no (b)")
    parser.add_argument("--idle-seconds", type=float, default=60, help="(c) over the last start; 0: no (c)")
    held = parser.add_mutually_exclusive_group()
    held.add_argument("--hold", action="store_true", help="keep the filled control plane until interrupted")
    held.add_argument("--kubeconfig", type=Path, help="measure against a held control plane; no filling")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="draq-bench-cold-"))
    if args.kubeconfig:
        measure(args.kubeconfig, work, args)
        return
    plane = ControlPlane(work)
    try:
        plane.start()
        with frozen(plane, "kube-scheduler"):
            filled = prepare(plane, args)
            print(f"API server filled with {args.nodes:,} nodes x 8 GPUs, {args.bound:,} bound pods and "
                  f"{args.groups:,} pending groups in {filled:.0f} s", flush=True)
            try:
                measure(plane.kubeconfig, work, args)
            except RuntimeError as err:
                if not args.hold:
                    raise
                print(f"measuring failed: {err}", flush=True)
            if args.hold:
                print(f"holding the control plane: --kubeconfig {plane.kubeconfig}", flush=True)
                signal.signal(signal.SIGTERM, signal.default_int_handler)
                with contextlib.suppress(KeyboardInterrupt):
                    while True:
                        time.sleep(3600)
            os.kill(component_pid(plane, "kube-controller-manager"), signal.SIGCONT)
    finally:
        plane.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
