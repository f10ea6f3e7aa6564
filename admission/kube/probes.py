"""The probe and metrics port: `/metrics` (Prometheus), `/healthz` (liveness) and `/readyz` (readiness)
over plain HTTP, for the kubelet's probes and Prometheus' scrapes.

A check returns "" when all is well, else why not; `/healthz` and `/readyz` answer 200 `ok`, or 503 with
one line per failing check.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from aiohttp import web
from prometheus_client import CollectorRegistry, ProcessCollector, disable_created_metrics
from prometheus_client.exposition import choose_encoder

log = logging.getLogger(__name__)

Check = Callable[[], str]


def process_registry() -> CollectorRegistry:
    """The one registry of a draq process: its own metrics plus the process' CPU, memory and file
    descriptors. Counters and histograms carry no `_created` series (they would double the series)."""
    disable_created_metrics()  # type: ignore[no-untyped-call]
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    return registry


@dataclass
class Probes:
    registry: CollectorRegistry
    live: list[tuple[str, Check]] = field(default_factory=list)
    ready: list[tuple[str, Check]] = field(default_factory=list)


def build_probe_app(probes: Probes) -> web.Application:
    async def metrics(request: web.Request) -> web.Response:
        encode, content_type = choose_encoder(request.headers.get("Accept", ""))
        response = web.Response(body=encode(probes.registry))
        response.headers["Content-Type"] = content_type
        return response

    async def healthz(_: web.Request) -> web.Response:
        return _answer(probes.live)

    async def readyz(_: web.Request) -> web.Response:
        return _answer(probes.ready)

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


def _answer(checks: Sequence[tuple[str, Check]]) -> web.Response:
    failing = []
    for name, check in checks:
        try:
            problem = check()
        except Exception as err:  # a check that fails to run is a failing check, never a 500
            log.exception("probe check %s", name)
            problem = f"the check failed: {err}"
        if problem:
            failing.append(f"{name}: {problem}")
    if failing:
        return web.Response(status=503, text="\n".join(failing) + "\n")
    return web.Response(text="ok\n")


@dataclass
class ProbeServer:
    runner: web.AppRunner
    port: int

    async def stop(self) -> None:
        await self.runner.cleanup()


async def start_probe_server(probes: Probes, host: str, port: int) -> ProbeServer:
    """Listen over plain HTTP; port 0 picks a free port (returned)."""
    runner = web.AppRunner(build_probe_app(probes), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    await site.start()
    sockets = getattr(site._server, "sockets", None) or []
    bound = int(sockets[0].getsockname()[1]) if sockets else port
    log.info("serving /metrics, /healthz and /readyz on http://%s:%d", host, bound)
    return ProbeServer(runner, bound)
