"""Runs the webhook app in a background event loop (TLS or plain) for tests that speak HTTP to it."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from admission.core.review import GatingPolicy
from admission.webhook.certificates import KeyPair, issue_serving, new_ca
from admission.webhook.handlers import AdmissionHandlers, BodyLimits, ClientCheck
from admission.webhook.server import ConnectionLimits, RunningServer, build_app, start_server
from admission.webhook.tls import ServingTLS

from .builders import FakeLookups

T = TypeVar("T")
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


@dataclass
class LiveServer:
    loop: asyncio.AbstractEventLoop
    port: int
    tls: ServingTLS | None
    ca: KeyPair | None
    server: RunningServer

    def call(self, coroutine: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)


@contextmanager
def live_server(lookups: FakeLookups, use_tls: bool = True, bodies: BodyLimits | None = None,
                connections: ConnectionLimits | None = None, clients: ClientCheck | None = None,
                client_ca_file: Path | None = None) -> Iterator[LiveServer]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    tls = ServingTLS() if use_tls else None
    ca = new_ca("test-ca", dt.datetime.now(dt.UTC)) if use_tls else None
    if tls is not None and ca is not None:
        tls.install(issue_serving(ca, ["127.0.0.1", "localhost"], dt.datetime.now(dt.UTC)))
        if client_ca_file is not None:
            tls.require_client_certificates(client_ca_file)

    async def start() -> RunningServer:
        app = build_app(AdmissionHandlers(lookups, GatingPolicy(), limits=bodies, clients=clients))
        return await start_server(app, None if tls is None else tls.context, "127.0.0.1", 0, connections)

    server = asyncio.run_coroutine_threadsafe(start(), loop).result(30)
    try:
        yield LiveServer(loop, server.port, tls, ca, server)
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
        if tls is not None:
            tls.close()
