"""Bad input for the whole system (issue 26): a flood of pod creations into one namespace, and a node flapping
Ready/NotReady. Shared by `e2e/test_storm.py` (small, bounded) and `bench/bench_storm.py` (full size).

- `python -m e2e.storm flood KUBECONFIG NAMESPACE QUEUE TEMPLATE RATE SECONDS [CONNECTIONS]` creates one-pod
  groups at a target rate over many keep-alive connections, as a process of its own, and prints one JSON
  line of counts: created, refused at the LocalQueue's cap, other refusals and failures by status, the rate
  reached, and the create requests' latency.
- `Flapper` patches a node's Ready condition every second and, as the node-lifecycle controller would (the
  kit does not run it), adds the `node.kubernetes.io/not-ready:NoSchedule` taint while it is NotReady.
- `DraqFigures` reads draq's metrics: cycles and their seconds, groups evaluated, parked and woken, webhook
  reviews; and its memory from /proc.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from kubernetes import client

from admission.core.labels import GROUP_LABEL, GROUP_MIN_LABEL, MANAGED_LABEL, QUEUE_LABEL

REPO = Path(__file__).resolve().parents[1]
CAP_MESSAGE = "at or over its cap"
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}


def pod(namespace: str, name: str, queue: str, claim_template: str, group: str, size: int = 1,
        claim: str | None = None) -> dict[str, Any]:
    """A pod of `group` whose claim `gpu` comes from `claim_template`, or is the ResourceClaim `claim`."""
    labels = {QUEUE_LABEL: queue, GROUP_LABEL: group, GROUP_MIN_LABEL: str(size)}
    source = {"resourceClaimName": claim} if claim else {"resourceClaimTemplateName": claim_template}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"automountServiceAccountToken": False, "terminationGracePeriodSeconds": 0,
                     "resourceClaims": [{"name": "gpu", **source}],
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": "10m"}, "claims": [{"name": "gpu"}]}}]}}


def claim_template(namespace: str, name: str, gpus: int) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": gpus}}]}}}}


# ----- the scenario: four tenants -------------------------------------------------------------------------
ROLES = ("run", "new", "flood", "park")  # a running gang, a newcomer, the flood, the parked groups


def queue_objects(unique: str) -> list[dict[str, Any]]:
    """A QuotaUnit of GPUs, and per role a managed namespace `<role>-<unique>` with a ClusterQueue of its name."""
    objects: list[dict[str, Any]] = [
        {"apiVersion": "draq.io/v1alpha1", "kind": "QuotaUnit", "metadata": {"name": f"gpus-{unique}"},
         "spec": {"devices": {"deviceClassNames": ["gpu.nvidia.com"]}}}]
    for role in ROLES:
        namespace = f"{role}-{unique}"
        objects += [
            {"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": namespace, "labels": {MANAGED_LABEL: "true"}}},
            {"apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": namespace},
             "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                      "quotas": [{"unit": f"gpus-{unique}", "nominal": 100000}]}}]
    return objects


def local_queues(unique: str, cap: int, parked_queues: int) -> list[dict[str, Any]]:
    """LocalQueue `lq` of each role (the flood's capped at `cap` pending groups), and `lq-<i>` of the parked."""
    def local(namespace: str, name: str, **spec: Any) -> dict[str, Any]:
        return {"apiVersion": "draq.io/v1alpha1", "kind": "LocalQueue",
                "metadata": {"name": name, "namespace": namespace}, "spec": {"clusterQueue": namespace, **spec}}
    return [local(f"run-{unique}", "lq"), local(f"new-{unique}", "lq"),
            local(f"flood-{unique}", "lq", maxPendingGroups=cap),
            *(local(f"park-{unique}", f"lq-{i}") for i in range(parked_queues))]


def create_gang(api: Any, namespace: str, group: str, template: str, size: int, own_claims: bool = False
                ) -> list[str]:
    """`size` pods in LocalQueue `lq`. With `own_claims` each pod names a ResourceClaim made here from the
    template's request, so that the gang does not wait for the resourceclaim controller (which a flood of
    pods keeps busy making their claims, at its client's 20 requests a second)."""
    core = client.CoreV1Api(api)
    names = [f"{group}-{i}" for i in range(size)]
    templates = client.CustomObjectsApi(api)
    for name in names:
        claim = None
        if own_claims:
            spec = templates.get_namespaced_custom_object("resource.k8s.io", "v1", namespace,
                                                          "resourceclaimtemplates", template)["spec"]["spec"]
            claim = f"{name}-gpu"
            templates.create_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaims", {
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": claim, "namespace": namespace}, "spec": spec})
        core.create_namespaced_pod(namespace, pod(namespace, name, "lq", template, group, size, claim))
    return names


def placed(api: Any, namespace: str, names: list[str]) -> dict[str, tuple[str, str, str]] | None:
    """name -> (uid, node, phase) once every pod is bound and running; None before."""
    core = client.CoreV1Api(api)
    found = {}
    for name in names:
        p = core.read_namespaced_pod(name, namespace)
        if not p.spec.node_name or p.status.phase != "Running" or p.metadata.deletion_timestamp:
            return None
        found[name] = (p.metadata.uid, p.spec.node_name, p.status.phase)
    return found


def park(api: Any, namespace: str, queues: int, per_queue: int) -> None:
    """One-pod groups that never fit (template `junk`), `per_queue` in each LocalQueue `lq-<i>`."""
    core = client.CoreV1Api(api)
    for queue in range(queues):
        for index in range(per_queue):
            name = f"parked-{queue}-{index}"
            core.create_namespaced_pod(namespace, pod(namespace, name, f"lq-{queue}", "junk", name))


def start_flood(kubeconfig: Path, namespace: str, rate: float, seconds: float,
                connections: int) -> subprocess.Popen[str]:
    """The flood as a process of its own, into LocalQueue `lq` with template `junk`; `flood_counts` reads it."""
    return subprocess.Popen([sys.executable, "-m", "e2e.storm", "flood", str(kubeconfig), namespace, "lq", "junk",
                             str(rate), str(seconds), str(connections)],
                            cwd=REPO, stdout=subprocess.PIPE, text=True)


def flood_counts(process: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    try:
        output, _ = process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return dict(json.loads(output.strip().splitlines()[-1]))


def pod_count(api: Any, namespace: str) -> int:
    return len(client.CoreV1Api(api).list_namespaced_pod(namespace).items)


def pod_groups(api: Any, namespace: str) -> list[dict[str, Any]]:
    listing = client.CustomObjectsApi(api).list_namespaced_custom_object("draq.io", "v1alpha1", namespace, "podgroups")
    return list(listing["items"])


def phases(api: Any, namespace: str) -> dict[str, str]:
    return {g["metadata"]["name"]: g.get("status", {}).get("phase") for g in pod_groups(api, namespace)}


# ----- the flood ---------------------------------------------------------------------------------------------
@dataclass
class FloodCounts:
    attempted: int = 0
    created: int = 0
    refused_at_cap: int = 0
    statuses: Counter[str] = field(default_factory=Counter)  # other answers: HTTP status and a short reason
    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0
    sample_refusal: str = ""

    def as_dict(self) -> dict[str, Any]:
        ordered = sorted(self.latencies)

        def quantile(q: float) -> float:
            return round(ordered[min(int(q * len(ordered)), len(ordered) - 1)], 3) if ordered else 0.0
        return {"attempted": self.attempted, "created": self.created, "refused_at_cap": self.refused_at_cap,
                "other": dict(self.statuses), "seconds": round(self.seconds, 1),
                "rate": round(self.attempted / self.seconds, 1) if self.seconds else 0.0,
                "latency_median": quantile(0.5), "latency_p99": quantile(0.99), "latency_max": quantile(1.0),
                "sample_refusal": self.sample_refusal}


class ApiServer:
    """The admin's address and credentials from a kubeconfig of the kit (client certificate)."""

    def __init__(self, kubeconfig: Path, work: Path) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
        self.server = cluster["server"]
        for name, key in (("ca.crt", "certificate-authority-data"), ("client.crt", "client-certificate-data"),
                          ("client.key", "client-key-data")):
            (work / name).write_bytes(base64.b64decode(cluster.get(key) or user.get(key)))
        self.context = ssl.create_default_context(cafile=str(work / "ca.crt"))
        self.context.load_cert_chain(str(work / "client.crt"), str(work / "client.key"))


async def flood(api: ApiServer, namespace: str, queue: str, template: str, rate: float, seconds: float,
                connections: int) -> FloodCounts:
    """One-pod groups created at `rate` per second for `seconds`, each request on one of `connections`
    keep-alive connections; a request waits for a free connection, so the rate reached says what the API
    server (and its webhooks) could take."""
    counts = FloodCounts()
    url = f"{api.server}/api/v1/namespaces/{namespace}/pods"
    prefix = f"f{os.getpid()}-"
    started = time.monotonic()
    slots = asyncio.Semaphore(connections)
    connector = aiohttp.TCPConnector(ssl=api.context, limit=connections)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        tasks: set[asyncio.Task[None]] = set()
        index = 0
        while (now := time.monotonic() - started) < seconds:
            due = int(now * rate) + 1
            while index < due and time.monotonic() - started < seconds:
                await slots.acquire()
                name = f"{prefix}{index:06d}"
                task = asyncio.ensure_future(_create(session, url, pod(namespace, name, queue, template, name),
                                                     counts, slots))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                index += 1
            await asyncio.sleep(min(1 / rate, 0.01))
        await asyncio.gather(*tasks)
    counts.seconds = time.monotonic() - started
    return counts


async def _create(session: aiohttp.ClientSession, url: str, body: dict[str, Any], counts: FloodCounts,
                  slots: asyncio.Semaphore) -> None:
    started = time.monotonic()
    counts.attempted += 1
    try:
        async with session.post(url, json=body) as answer:
            text = await answer.text()
            status = answer.status
    except (aiohttp.ClientError, TimeoutError) as err:
        counts.statuses[f"client {type(err).__name__}"] += 1
        return
    finally:
        slots.release()
    counts.latencies.append(time.monotonic() - started)
    if status == 201:
        counts.created += 1
        return
    message = str(json.loads(text).get("message", "")) if text.startswith("{") else text
    if status == 403 and CAP_MESSAGE in message:
        counts.refused_at_cap += 1
        counts.sample_refusal = counts.sample_refusal or message
        return
    kind = "webhook failed" if "failed calling webhook" in message else message[:80]
    counts.statuses[f"{status} {kind}"] += 1


def run_flood(argv: list[str]) -> int:
    kubeconfig, namespace, queue, template, rate, seconds = argv[:6]
    connections = int(argv[6]) if len(argv) > 6 else 64
    with tempfile.TemporaryDirectory() as work:
        api = ApiServer(Path(kubeconfig), Path(work))
        counts = asyncio.run(flood(api, namespace, queue, template, float(rate), float(seconds), connections))
    print(json.dumps(counts.as_dict()), flush=True)
    return 0


# ----- the flapping node ------------------------------------------------------------------------------------
class Flapper:
    """Flips a node between Ready and NotReady every `period` seconds (its status condition and, when
    `tainted`, the not-ready taint the node-lifecycle controller would add) until stopped; ends Ready."""

    def __init__(self, core: Any, node: str, period: float = 1.0, tainted: bool = True) -> None:
        self.core = core
        self.node = node
        self.period = period
        self.tainted = tainted
        self.flips = 0
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"flap-{node}", daemon=True)

    def start(self) -> Flapper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._set(ready=True)

    def _run(self) -> None:
        ready = True
        while not self._stop.wait(self.period):
            ready = not ready
            try:
                self._set(ready)
                self.flips += 1
            except Exception:  # the API server may refuse one write under load: the next flip goes on
                self.errors += 1

    def _set(self, ready: bool) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        condition = {"type": "Ready", "status": "True" if ready else "False", "lastHeartbeatTime": now,
                     "lastTransitionTime": now, "reason": "KubeletReady" if ready else "KubeletNotReady",
                     "message": "simulated" if ready else "simulated flap"}
        self.core.patch_node_status(self.node, {"status": {"conditions": [condition]}})
        if not self.tainted:
            return
        node = self.core.read_node(self.node)
        taints = [t.to_dict() for t in (node.spec.taints or []) if t.key != NOT_READY_TAINT["key"]]
        taints = [{k: v for k, v in t.items() if v is not None} for t in taints]
        self.core.patch_node(self.node, {"spec": {"taints": taints if ready else [*taints, NOT_READY_TAINT]}})


# ----- draq's figures -----------------------------------------------------------------------------------------
def metric_samples(text: str) -> dict[str, float]:
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


@dataclass(frozen=True)
class Figures:
    cycles: int
    cycle_seconds: float
    evaluated: float
    parked: float
    woken: float
    parked_now: float
    reviews: float
    slow_reviews: float  # over 5 s, the API server's timeout for draq's pod webhooks
    cycle_buckets: dict[float, float]

    def since(self, before: Figures) -> dict[str, float]:
        cycles = self.cycles - before.cycles
        return {"cycles": cycles, "cycle_seconds": self.cycle_seconds - before.cycle_seconds,
                "mean_cycle": (self.cycle_seconds - before.cycle_seconds) / cycles if cycles else 0.0,
                "evaluated": self.evaluated - before.evaluated, "parked": self.parked - before.parked,
                "woken": self.woken - before.woken, "reviews": self.reviews - before.reviews,
                "slow_reviews": self.slow_reviews - before.slow_reviews,
                "slowest_cycle_bucket": self.slowest_bucket(before)}

    def slowest_bucket(self, before: Figures) -> float:
        """The upper bound of the histogram bucket of the slowest cycle since `before`."""
        bounds = sorted(self.cycle_buckets)
        total = self.cycles - before.cycles
        for bound in bounds:
            if self.cycle_buckets[bound] - before.cycle_buckets.get(bound, 0.0) >= total:
                return bound
        return float("inf")


class DraqFigures:
    def __init__(self, pid: int, metrics_port: int) -> None:
        self.pid = pid
        self.url = f"http://127.0.0.1:{metrics_port}/metrics"

    def read(self) -> Figures:
        with urllib.request.urlopen(self.url, timeout=10) as answer:
            samples = metric_samples(answer.read().decode())

        def groups(outcome: str) -> float:
            return samples.get(f'draq_cycle_groups_total{{outcome="{outcome}"}}', 0.0)
        reviews = sum(samples.get(f'draq_webhook_request_duration_seconds_count{{webhook="{w}"}}', 0.0)
                      for w in ("mutate", "validate"))
        fast = sum(value for name, value in samples.items()
                   if name.startswith("draq_webhook_request_duration_seconds_bucket{") and 'le="5.0"' in name)
        buckets = {float(name.split('le="')[1].split('"')[0]): value for name, value in samples.items()
                   if name.startswith("draq_cycle_duration_seconds_bucket") and "+Inf" not in name}
        return Figures(int(samples.get("draq_cycle_duration_seconds_count", 0)),
                       samples.get("draq_cycle_duration_seconds_sum", 0.0), groups("evaluated"), groups("parked"),
                       groups("woken"), samples.get("draq_parked_groups", 0.0), reviews, reviews - fast, buckets)

    def status_mib(self, field_name: str) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) / 1024
        raise AssertionError(f"{field_name} not in /proc/{self.pid}/status")

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class RssSampler:
    """draq's resident memory, sampled every `period` seconds in a thread."""

    def __init__(self, figures: DraqFigures, period: float = 0.5) -> None:
        self.figures = figures
        self.period = period
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.samples.append(self.figures.status_mib("VmRSS"))

    @property
    def peak(self) -> float:
        return max(self.samples, default=0.0)

    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else 0.0


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] != "flood":
        sys.exit("usage: python -m e2e.storm flood KUBECONFIG NAMESPACE QUEUE TEMPLATE RATE SECONDS [CONNECTIONS]")
    sys.exit(run_flood(sys.argv[2:]))
