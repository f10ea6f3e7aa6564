"""The webhook's TLS port serves the two review paths and nothing else: health and readiness are the
probe port's (`admission.kube.probes`), answered from the real checks."""

from __future__ import annotations

import asyncio

from aiohttp.test_utils import TestClient, TestServer

from admission.core.review import GatingPolicy
from admission.webhook.configurations import MUTATE_PATH, VALIDATE_PATH
from admission.webhook.handlers import AdmissionHandlers
from admission.webhook.server import build_app

from .builders import cluster


def test_the_tls_app_routes_only_the_reviews() -> None:
    app = build_app(AdmissionHandlers(cluster(), GatingPolicy()))
    routes = {(route.method, route.resource.canonical) for route in app.router.routes() if route.resource}
    assert {path for method, path in routes if method != "HEAD"} == {MUTATE_PATH, VALIDATE_PATH}

    async def statuses() -> list[int]:
        async with TestClient(TestServer(app)) as client:
            return [(await client.get(path)).status for path in ("/healthz", "/readyz")]

    assert asyncio.run(statuses()) == [404, 404]
