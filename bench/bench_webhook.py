"""Benchmark: draq's admission webhook over TLS on loopback, under open-loop load.

The server (the real aiohttp app, TLS context and decisions, with in-memory lookups) runs in this
process; the load comes from a separate process that sends AdmissionReviews at a fixed rate,
whatever the answers' latency (open loop: latency counts from when a request was due, so a slow
server cannot hide behind a slow client). Mixed traffic: pod CREATE to /mutate, pod CREATE and
gate-removal UPDATE to /validate.

    python bench/bench_webhook.py            # 60 s at 500/s, then the highest sustained rate
    python bench/bench_webhook.py --quick    # 10 s at 500/s, short ramp

Pass: p99 <= 15 ms and zero errors. Only 127.0.0.1 is used; every run is bounded in count and time.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

P99_LIMIT_MS = 15.0
REQUEST_TIMEOUT_S = 5.0
MAX_IN_FLIGHT = 2000
POOL_SIZE = 16


# ----- the server side --------------------------------------------------------------------------


class StaticLookups:
    """A namespace with LocalQueue `gpu`; enough for every path the traffic takes."""

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        return {"draq.io/managed": "true"}

    def local_queue(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return {"spec": {"clusterQueue": "cq"}} if name == "gpu" else None

    def cluster_queue(self, name: str) -> Mapping[str, Any] | None:
        return {"spec": {}}

    def quota_unit(self, name: str) -> Mapping[str, Any] | None:
        return {"spec": {}}

    def owner(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return {"spec": {"parallelism": 4}} if kind == "Job" else None

    def quota_units(self) -> Iterable[Mapping[str, Any]]:
        return []

    def device_class(self, name: str) -> Mapping[str, Any] | None:
        return None

    def lease(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return None

    def pod_group(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return None

    def pending_groups(self, namespace: str, local_queue: str) -> int:
        return 0


async def serve(ca_file: Path) -> tuple[Any, int]:
    from admission.core.review import GatingPolicy
    from admission.webhook.certificates import issue_serving, new_ca
    from admission.webhook.handlers import AdmissionHandlers
    from admission.webhook.server import build_app, start_server
    from admission.webhook.tls import ServingTLS

    now = dt.datetime.now(dt.UTC)
    ca = new_ca("bench-ca", now)
    ca_file.write_bytes(ca.cert_pem)
    tls = ServingTLS()
    tls.install(issue_serving(ca, ["127.0.0.1"], now))
    app = build_app(AdmissionHandlers(StaticLookups(), GatingPolicy()))
    server = await start_server(app, tls.context, "127.0.0.1", 0)
    return server, server.port


async def run_load(port: int, ca_file: Path, rate: float, seconds: float) -> dict[str, Any]:
    """One open-loop run in a separate process; its JSON summary comes back on stdout."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--load-generator", "--port", str(port), "--ca-file", str(ca_file),
        "--rate", str(rate), "--seconds", str(seconds),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), timeout=seconds + 60)
    if process.returncode != 0:
        raise RuntimeError(f"load generator failed: {err.decode()[-2000:]}")
    result: dict[str, Any] = json.loads(out)
    return result


def report(name: str, result: Mapping[str, Any]) -> str:
    verdict = "PASS" if passes(result) else "FAIL"
    return (f"{name}: {result['sent']} requests at {result['rate']:.0f}/s for {result['seconds']:.0f}s "
            f"(achieved {result['achieved_rate']:.0f}/s): p50 {result['p50_ms']:.2f} ms, "
            f"p90 {result['p90_ms']:.2f} ms, p99 {result['p99_ms']:.2f} ms, max {result['max_ms']:.1f} ms, "
            f"errors {result['errors']} -> {verdict}")


def passes(result: Mapping[str, Any]) -> bool:
    return bool(result["errors"] == 0 and result["p99_ms"] <= P99_LIMIT_MS and result["sent"] > 0)


async def bench(quick: bool) -> int:
    with tempfile.TemporaryDirectory(prefix="draq-bench-") as work:
        ca_file = Path(work, "ca.crt")
        server, port = await serve(ca_file)
        try:
            await run_load(port, ca_file, 200, 2)  # warm-up: imports, first handshakes
            steady_seconds = 10 if quick else 60
            steady = await run_load(port, ca_file, 500, steady_seconds)
            print(report("sustained", steady), flush=True)
            best = 500.0 if passes(steady) else 0.0
            step_seconds = 5 if quick else 10
            for rate in (600, 750, 900, 1000, 1250, 1500, 2000, 2500, 3000, 3500, 4000, 5000) if best else ():
                result = await run_load(port, ca_file, rate, step_seconds)
                print(report(f"ramp {rate}/s", result), flush=True)
                if not passes(result):
                    break
                best = rate
            print(f"maximum sustained rate with p99 <= {P99_LIMIT_MS:.0f} ms and no errors: {best:.0f}/s "
                  f"(steps of {step_seconds}s)")
            return 0 if passes(steady) else 1
        finally:
            await server.stop()


# ----- the load generator (separate process) -----------------------------------------------------


def bodies(count: int) -> list[tuple[str, bytes]]:
    from admission.core.review.envelope import GroupVersionKind, ReviewBuilder

    pod_kind = GroupVersionKind("", "v1", "Pod")
    create = ReviewBuilder(pod_kind, "pods", "CREATE", "team")
    update = ReviewBuilder(pod_kind, "pods", "UPDATE", "team")
    out = []
    for i in range(count):
        labels = {"draq.io/queue": "gpu", "app": "train", "draq.io/pod-group": "g", "draq.io/group-min": "4"}
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"train-{i}", "namespace": "team", "labels": labels},
               "spec": {"containers": [{"name": "main", "image": "registry.example/train:1",
                                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                        "schedulingGates": [{"name": "draq.io/admission"}]}}
        uid = str(uuid.uuid4())
        if i % 3 == 0:
            out.append(("/mutate", json.dumps(create.build(uid, pod)).encode()))
        elif i % 3 == 1:
            out.append(("/validate", json.dumps(create.build(uid, pod)).encode()))
        else:
            ungated = {**pod, "spec": {**pod["spec"], "schedulingGates": []}}
            out.append(("/validate", json.dumps(update.build(uid, ungated, pod)).encode()))
    return out


class Connections:
    """A fixed pool of keep-alive HTTP/1.1 connections over TLS, opened before the clock starts.

    One request at a time per connection (as a client pool does); a request waits for a free
    connection, and that wait counts in its latency. A plain asyncio client: the load generator
    must cost far less than the server it measures.
    """

    def __init__(self, port: int, context: Any, size: int) -> None:
        self._port = port
        self._context = context
        self._size = size
        self._idle: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()

    async def open(self) -> None:
        for _ in range(self._size):
            self._idle.put_nowait(await asyncio.open_connection(
                "127.0.0.1", self._port, ssl=self._context, server_hostname="127.0.0.1"))

    async def exchange(self, request: bytes) -> tuple[int, bytes]:
        reader, writer = await self._idle.get()
        try:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            length = 0
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = await reader.readexactly(length)
        except BaseException:
            writer.close()  # a broken connection is replaced, not reused
            self._idle.put_nowait(await asyncio.open_connection(
                "127.0.0.1", self._port, ssl=self._context, server_hostname="127.0.0.1"))
            raise
        self._idle.put_nowait((reader, writer))
        return status, body

    def close(self) -> None:
        while not self._idle.empty():
            self._idle.get_nowait()[1].close()


def http_request(path: str, body: bytes) -> bytes:
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    return head.encode() + body


async def generate(port: int, ca_file: Path, rate: float, seconds: float) -> dict[str, Any]:
    import ssl

    context = ssl.create_default_context(cafile=str(ca_file))
    total = int(rate * seconds)
    work = [http_request(path, body) for path, body in bodies(min(total, 3000))]
    connections = Connections(port, context, POOL_SIZE)
    await connections.open()
    latencies: list[float] = []
    errors: list[str] = []
    in_flight = 0

    async def one(due: float, request: bytes) -> None:
        nonlocal in_flight
        in_flight += 1
        try:
            status, body = await asyncio.wait_for(connections.exchange(request), REQUEST_TIMEOUT_S)
            answer = json.loads(body)
            if status != 200 or not isinstance(answer.get("response", {}).get("allowed"), bool):
                errors.append(f"HTTP {status}")
            else:
                latencies.append(time.perf_counter() - due)
        except Exception as err:
            errors.append(type(err).__name__)
        finally:
            in_flight -= 1

    tasks = []
    start = time.perf_counter() + 0.05
    for i in range(total):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if in_flight >= MAX_IN_FLIGHT:
            errors.append("overload: too many requests in flight")
            continue
        tasks.append(asyncio.create_task(one(due, work[i % len(work)])))
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - start
    connections.close()
    return summary(latencies, errors, total, rate, seconds, elapsed)


def summary(latencies: list[float], errors: list[str], sent: int, rate: float, seconds: float,
            elapsed: float) -> dict[str, Any]:
    ms = sorted(x * 1000 for x in latencies) or [float("nan")]

    def pct(p: float) -> float:
        return ms[min(len(ms) - 1, int(p * len(ms)))]

    return {"sent": sent, "rate": rate, "seconds": seconds, "achieved_rate": sent / elapsed if elapsed else 0,
            "p50_ms": statistics.median(ms), "p90_ms": pct(0.90), "p99_ms": pct(0.99), "max_ms": ms[-1],
            "errors": len(errors), "error_kinds": sorted(set(errors))[:5]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--quick", action="store_true", help="10 s at 500/s and a short ramp")
    parser.add_argument("--load-generator", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--ca-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--rate", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load_generator:
        result = asyncio.run(generate(args.port, args.ca_file, args.rate, args.seconds))
        print(json.dumps(result))
        return 0
    print(f"draq webhook benchmark: TLS on 127.0.0.1, open-loop load from a separate process, "
          f"pid {os.getpid()}, {os.cpu_count()} CPUs")
    return asyncio.run(bench(args.quick))


if __name__ == "__main__":
    sys.exit(main())
