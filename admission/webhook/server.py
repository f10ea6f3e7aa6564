"""The webhook server: aiohttp over TLS, serving /mutate and /validate.

Health and readiness are not answered here: the plain-HTTP probe port (`admission.kube.probes`, served by
`draq run` and by `draq webhook --metrics-port`) answers them from the real checks (`WebhookService.unready`,
the operator's loop health). This port only exists once the cache has synced, so an `ok` here would tell
nothing more than that it accepts connections."""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from aiohttp import web

from admission.webhook.configurations import MUTATE_PATH, VALIDATE_PATH
from admission.webhook.handlers import MAX_BODY_BYTES, AdmissionHandlers


def build_app(handlers: AdmissionHandlers) -> web.Application:
    # The review handlers read their bodies with their own bound (handlers.read_body); this one is
    # aiohttp's, for anything that would read a body whole.
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app.router.add_post(MUTATE_PATH, handlers.mutate)
    app.router.add_post(VALIDATE_PATH, handlers.validate)
    return app


@dataclass
class RunningServer:
    runner: web.AppRunner
    port: int

    async def stop(self) -> None:
        await self.runner.cleanup()


async def start_server(
    app: web.Application, ssl_context: ssl.SSLContext, host: str = "0.0.0.0", port: int = 9443
) -> RunningServer:
    """Listen over TLS; port 0 picks a free port (returned)."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context, backlog=512, reuse_address=True)
    await site.start()
    server = site._server
    sockets = getattr(server, "sockets", None) or []
    bound = sockets[0].getsockname()[1] if sockets else port
    return RunningServer(runner, int(bound))
