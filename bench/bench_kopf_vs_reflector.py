"""Pods through kopf's indexing against draq's list+watch reflector, on the real local control plane.

Why draq keeps Pods (and the other high-volume kinds) off kopf: N gated pods are created, then each
consumer runs in a fresh process of its own and is timed twice: the initial listing (from the start of
watching until every pod is known) and a burst of N watch events (every pod's label changed by this
script, 16 patches in flight; until the consumer has seen every change). Reported: wall time, the
consumer's CPU time, how long after the last patch it caught up, and its peak RSS (interpreter and imports
included; the RSS after imports is shown beside it). The kopf consumer is configured as `draq run`
configures kopf (no state written on objects, no peering) with one `@kopf.index` on pods; the reflector
keeps every pod whole, as the operator's cache does for its own pods.

    .venv/bin/python bench/bench_kopf_vs_reflector.py --pods 2000 --repeat 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from admission.kube import kinds  # noqa: E402
from admission.kube.client import KubeApi, KubeApiError, load_credentials  # noqa: E402

NAMESPACE = "bench-watch"
LABEL = "bench.draq.io/round"
IN_FLIGHT = 16


# ----- the consumers (each in its own process) ----------------------------------------------------------------
class Tally:
    """Counts pods seen with the label at the wanted round; says when all `count` are there."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.rounds: dict[str, str] = {}
        self.wanted = "1"
        self.done = asyncio.Event()

    def saw(self, name: str, labels: Mapping[str, Any]) -> None:
        self.rounds[name] = str(labels.get(LABEL, ""))
        if len(self.rounds) >= self.count and sum(v == self.wanted for v in self.rounds.values()) >= self.count:
            self.done.set()

    def expect(self, wanted: str) -> None:
        self.wanted = wanted
        self.done.clear()


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def timed(tally: Tally, started_wall: float, started_cpu: float) -> dict[str, float]:
    await tally.done.wait()
    return {"wall": time.monotonic() - started_wall, "cpu": time.process_time() - started_cpu,
            "finished_at": time.time()}


async def consume(kind: str, kubeconfig: Path, count: int) -> None:
    if kind == "kopf":
        import admission.operator.runtime  # noqa: F401  (kopf and draq's kopf settings, before the RSS is read)
    imports_rss = rss_mib()
    tally = Tally(count)
    started_wall, started_cpu = time.monotonic(), time.process_time()
    runner = asyncio.create_task(_reflector(kubeconfig, tally) if kind == "reflector" else _kopf(kubeconfig, tally))
    listing = await timed(tally, started_wall, started_cpu)
    print(json.dumps({"listing": listing}), flush=True)
    tally.expect("2")
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)  # the patches begin
    watch = await timed(tally, time.monotonic(), time.process_time())
    print(json.dumps({"watch": watch, "rss_mib": rss_mib(), "imports_rss_mib": imports_rss}), flush=True)
    runner.cancel()
    os._exit(0)  # measured; kopf's own shutdown is not part of it


async def _reflector(kubeconfig: Path, tally: Tally) -> None:
    from admission.kube.reflector import Reflector, metadata, without_managed_fields

    project = without_managed_fields(kinds.PODS)

    def counted(obj: Mapping[str, Any]) -> dict[str, Any]:
        kept = project(obj)
        meta = metadata(kept)
        tally.saw(str(meta.get("name")), meta.get("labels") or {})
        return kept

    async with KubeApi(load_credentials(kubeconfig)) as api:
        await Reflector(api, kinds.PODS, counted).run()


async def _kopf(kubeconfig: Path, tally: Tally) -> None:
    import logging

    import kopf

    from admission.kube.connection import connection_of
    from admission.operator.runtime import kopf_settings

    logging.getLogger("kopf").setLevel(logging.WARNING)
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        found = connection_of(load_credentials(kubeconfig))
        return kopf.ConnectionInfo(server=found.server, ca_path=found.ca_path, insecure=found.insecure,
                                   certificate_path=found.certificate_path,
                                   private_key_path=found.private_key_path, scheme=found.scheme, token=found.token)

    @kopf.index("pods", registry=registry)
    def pods(name: str, labels: Mapping[str, Any], body: kopf.Body, **_: Any) -> dict[str, Any]:
        tally.saw(name, labels)
        return {name: dict(body)}

    await kopf.operator(registry=registry, settings=kopf_settings("bench"), clusterwide=True, standalone=True)


# ----- the driver --------------------------------------------------------------------------------------------
def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {LABEL: "1", "app": "bench", "draq.io/queue": "none"},
                         "annotations": {"example.com/owner": "team-a", "example.com/build": "1234"}},
            "spec": {"schedulingGates": [{"name": "bench.draq.io/hold"}],
                     "containers": [{"name": "main", "image": "registry.example/train:1",
                                     "command": ["python", "-m", "train", "--epochs", "10"],
                                     "env": [{"name": f"VAR_{i}", "value": f"value-{i}"} for i in range(8)],
                                     "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                                   "limits": {"cpu": "1", "memory": "1Gi"}}}]}}


async def each(count: int, call: Callable[[int], Any]) -> float:
    """Run `call(i)` for every i with IN_FLIGHT at once; seconds taken."""
    slots = asyncio.Semaphore(IN_FLIGHT)
    started = time.monotonic()

    async def one(i: int) -> None:
        async with slots:
            await call(i)

    await asyncio.gather(*(one(i) for i in range(count)))
    return time.monotonic() - started


async def create_pods(kubeconfig: Path, count: int) -> float:
    async with KubeApi(load_credentials(kubeconfig)) as api:
        path = kinds.PODS.collection_path(NAMESPACE)
        return await each(count, lambda i: api.create(path, pod(f"p-{i:05d}")))


async def relabel(kubeconfig: Path, count: int, value: str) -> float:
    async with KubeApi(load_credentials(kubeconfig)) as api:
        await each(count, lambda i: api.merge_patch(kinds.PODS.object_path(NAMESPACE, f"p-{i:05d}"),
                                                    {"metadata": {"labels": {LABEL: value}}}))
    return time.time()


def measure(kind: str, kubeconfig: Path, count: int, round_: int) -> dict[str, Any]:
    """One consumer process: its listing, then a burst of `count` label changes."""
    argv = [sys.executable, __file__, "consume", kind, "--kubeconfig", str(kubeconfig), "--pods", str(count)]
    consumer = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert consumer.stdin is not None and consumer.stdout is not None
    listing = json.loads(consumer.stdout.readline())["listing"]
    consumer.stdin.write("go\n")
    consumer.stdin.flush()
    last_patch = asyncio.run(relabel(kubeconfig, count, "2"))
    result = json.loads(consumer.stdout.readline())
    consumer.wait(30)
    asyncio.run(relabel(kubeconfig, count, "1"))  # back to round 1: the next burst is a change again
    return {"kind": kind, "round": round_, "listing_s": listing["wall"], "listing_cpu_s": listing["cpu"],
            "watch_s": result["watch"]["wall"], "watch_cpu_s": result["watch"]["cpu"],
            "lag_s": max(0.0, result["watch"]["finished_at"] - last_patch), "rss_mib": result["rss_mib"],
            "imports_rss_mib": result["imports_rss_mib"]}


def report(results: list[dict[str, Any]], count: int) -> None:
    print(f"{count} pods; medians over {len(results) // 2} run(s) each")
    print(f"{'consumer':10} {'listing s':>9} {'cpu s':>6} {'watch s':>8} {'cpu s':>6} {'µs cpu/event':>12} "
          f"{'lag s':>6} {'RSS MiB':>8} {'(imports)':>9}")
    for kind in ("reflector", "kopf"):
        mine = [r for r in results if r["kind"] == kind]

        def med(key: str, rows: list[dict[str, Any]] = mine) -> float:
            return statistics.median(r[key] for r in rows)

        print(f"{kind:10} {med('listing_s'):9.2f} {med('listing_cpu_s'):6.2f} {med('watch_s'):8.2f} "
              f"{med('watch_cpu_s'):6.2f} {med('watch_cpu_s') / count * 1e6:12.0f} {med('lag_s'):6.2f} "
              f"{med('rss_mib'):8.0f} {med('imports_rss_mib'):9.0f}")


def drive(count: int, repeat: int) -> None:
    from admission.localcluster.controlplane import ControlPlane

    plane = ControlPlane(Path(tempfile.mkdtemp(prefix="draq-bench-")), keep_work_dir=False)
    plane.start()
    try:
        plane.kubectl("create", "namespace", NAMESPACE)
        plane.wait_for_service_account(NAMESPACE)
        created = asyncio.run(create_pods(plane.kubeconfig, count))
        print(f"{count} pods created in {created:.1f}s")
        results = []
        for round_ in range(repeat):
            for kind in (("reflector", "kopf") if round_ % 2 == 0 else ("kopf", "reflector")):
                results.append(measure(kind, plane.kubeconfig, count, round_))
                print(json.dumps(results[-1]))
        report(results, count)
    finally:
        plane.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("mode", nargs="?", default="drive", choices=("drive", "consume"))
    parser.add_argument("kind", nargs="?", choices=("reflector", "kopf"))
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--kubeconfig", type=Path)
    args = parser.parse_args()
    if args.mode == "consume":
        assert args.kind and args.kubeconfig
        asyncio.run(consume(args.kind, args.kubeconfig, args.pods))
    else:
        try:
            drive(args.pods, args.repeat)
        except KubeApiError as err:
            raise SystemExit(f"bench: {err}") from None


if __name__ == "__main__":
    main()
