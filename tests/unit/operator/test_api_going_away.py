"""An API server that goes away in the middle of a request (restarted, connection reset) is a connection error
the operator and the elector retry, not an aiohttp exception that would end the process."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import pytest

from admission.kube.client import Credentials, KubeApi


class NoAuth:
    def auth_settings(self) -> dict[str, Any]:
        return {}


def test_a_server_that_hangs_up_mid_request_is_a_connection_error() -> None:
    async def go() -> None:
        async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"items\"")  # then nothing more
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        api = KubeApi(Credentials(f"http://127.0.0.1:{port}", ssl.create_default_context(), NoAuth()))
        try:
            with pytest.raises(ConnectionError, match="GET /api/v1/pods"):
                await api.get("/api/v1/pods")
            with pytest.raises(OSError):
                await api.merge_patch("/api/v1/namespaces/t/pods/p", {"metadata": {}})
        finally:
            await api.close()
            server.close()
            await server.wait_closed()

    asyncio.run(go())
