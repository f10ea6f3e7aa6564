"""The webhook server: aiohttp over TLS, serving /mutate and /validate, with bounds on what a client can hold.

Health and readiness are not answered here: the plain-HTTP probe port (`admission.kube.probes`, served by
`draq run` and by `draq webhook --metrics-port`) answers them from the real checks (`WebhookService.unready`,
the operator's loop health). This port only exists once the cache has synced, so an `ok` here would tell
nothing more than that it accepts connections.

Connections are accepted here rather than by `loop.create_server`, so that each one is counted from the
moment its socket exists, TLS handshake included: past `ConnectionLimits.max_connections` a new socket is
closed at once instead of holding a file descriptor. A TLS handshake, and the closing one, must finish
within `handshake_seconds` (the TLS machinery is set up only once the client has sent its first bytes);
aiohttp's keep-alive timer (`idle_seconds`) starts when the connection is made and again after each answer,
and closes a connection whose next request's headers have not all arrived by then, so it bounds both idle
keep-alive and headers sent slowly. Bodies are bounded by the handlers (`handlers.BodyLimits`)."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import resource
import socket
import ssl
from dataclasses import dataclass, field

from aiohttp import web

from admission.core.errors import DraqError
from admission.webhook.configurations import MUTATE_PATH, VALIDATE_PATH
from admission.webhook.handlers import AdmissionHandlers

log = logging.getLogger(__name__)

RESERVED_FILES = 256
"""File descriptors kept out of the connection cap: the operator's watches and writes, the Lease, the
probe port's connections, certificate and log files."""
M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number
ACCEPT_BATCH = 100
LINGERING_SECONDS = 0.0
"""How long the unread rest of a refused body (413, 429, 408) is read and dropped before the connection
closes: not at all. Only a client that sends what the API server never sends is refused, and reading
its body to the end would cost as much as accepting it."""


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int = 1000
    handshake_seconds: float = 5.0
    idle_seconds: float = 15.0
    max_line_bytes: int = 8190
    max_header_bytes: int = 8190
    max_headers: int = 64


def connection_cap(wanted: int, open_files: int | None = None) -> int:
    """`wanted`, lowered to leave RESERVED_FILES of the process's file limit (RLIMIT_NOFILE) free."""
    if open_files is None:
        open_files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if open_files == resource.RLIM_INFINITY:
        return wanted
    room = open_files - RESERVED_FILES
    if room < 16:
        raise DraqError(f"the process may open only {open_files} files (RLIMIT_NOFILE): the webhook needs at "
                        f"least {RESERVED_FILES + 16}; raise the limit (ulimit -n) of draq's container")
    return min(wanted, room)


def map_large_buffers() -> None:
    """Have glibc's malloc give every buffer of 256 KiB or more its own mapping, returned to the system when
    freed. By default the threshold rises to the size of the largest buffer freed, so after the first body of
    a few MiB later ones come from the heap, which fragments and keeps its peak: the process's memory would
    follow the largest burst of bodies ever read rather than the bodies held now. (Not glibc: nothing.)"""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    libc.mallopt(M_MMAP_THRESHOLD, 256 * 1024)


def build_app(handlers: AdmissionHandlers) -> web.Application:
    # The review handlers read their bodies with their own bound (handlers.read_body); this one is
    # aiohttp's, for anything that would read a body whole.
    app = web.Application(client_max_size=handlers.limits.max_body_bytes)
    app.router.add_post(MUTATE_PATH, handlers.mutate)
    app.router.add_post(VALIDATE_PATH, handlers.validate)
    return app


@dataclass
class Acceptor:
    """Accepts connections on a listening socket and hands each one, TLS first, to aiohttp's protocol."""

    listener: socket.socket
    runner: web.AppRunner
    ssl_context: ssl.SSLContext | None
    limits: ConnectionLimits
    cap: int
    refused: int = 0
    _open: set[socket.socket] = field(default_factory=set)
    _handshakes: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def open_connections(self) -> int:
        self._open = {sock for sock in self._open if sock.fileno() != -1}
        return len(self._open)

    async def run(self) -> None:
        while True:
            await _readable(self.listener)
            # Up to a batch per wakeup, as asyncio's own servers do: a queue of floods' connections does
            # not make a real one wait a loop iteration per connection ahead of it.
            for _ in range(ACCEPT_BATCH):
                try:
                    sock, _ = self.listener.accept()
                except (BlockingIOError, InterruptedError):
                    break
                except OSError as err:  # EMFILE, ENFILE, ENOBUFS: try again once some have closed
                    log.warning("accepting webhook connections: %s", err)
                    await asyncio.sleep(0.1)
                    break
                sock.setblocking(False)
                self._admit(sock)

    def _admit(self, sock: socket.socket) -> None:
        if len(self._open) >= self.cap and self.open_connections >= self.cap:
            self._refuse(sock)
            return
        self._open.add(sock)
        task = asyncio.ensure_future(self._connect(sock))
        self._handshakes.add(task)
        task.add_done_callback(self._handshakes.discard)

    def _refuse(self, sock: socket.socket) -> None:
        self.refused += 1
        if self.refused == 1 or self.refused % 1000 == 0:
            log.warning("%d connections refused: %d are open, the cap (--max-connections)", self.refused, self.cap)
        # Reset rather than close gracefully: nothing of this connection stays in the kernel either.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.close()

    async def _connect(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        server = self.runner.server
        assert server is not None
        try:
            if self.ssl_context is None:
                await loop.connect_accepted_socket(server, sock)
                return
            started = loop.time()
            await asyncio.wait_for(_readable(sock), self.limits.handshake_seconds)
            await loop.connect_accepted_socket(
                server, sock, ssl=self.ssl_context,
                ssl_handshake_timeout=max(self.limits.handshake_seconds - (loop.time() - started), 0.1),
                ssl_shutdown_timeout=self.limits.handshake_seconds)
        except (OSError, ssl.SSLError, TimeoutError, ConnectionError) as err:
            log.debug("connection dropped before its first request: %s", err)
            sock.close()
        except asyncio.CancelledError:  # the server stops
            sock.close()
            raise

    async def stop(self) -> None:
        self.listener.close()
        for task in list(self._handshakes):
            task.cancel()
        await asyncio.gather(*self._handshakes, return_exceptions=True)


async def _readable(sock: socket.socket) -> None:
    """Until the client has sent something (its TLS ClientHello). asyncio's TLS protocol allocates a 256 KiB
    read buffer per connection as soon as it exists; a connection that sends nothing never gets one."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(sock.fileno(), wake)
    try:
        await ready
    finally:
        loop.remove_reader(sock.fileno())


@dataclass
class RunningServer:
    runner: web.AppRunner
    port: int
    acceptor: Acceptor
    _accepting: asyncio.Task[None]

    async def stop(self) -> None:
        self._accepting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._accepting
        await self.acceptor.stop()
        await self.runner.cleanup()


def listen(host: str, port: int, backlog: int = 512) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(backlog)
        listener.setblocking(False)
    except OSError:
        listener.close()
        raise
    return listener


async def start_server(app: web.Application, ssl_context: ssl.SSLContext | None, host: str = "0.0.0.0",
                       port: int = 9443, limits: ConnectionLimits | None = None) -> RunningServer:
    """Listen (over TLS unless `ssl_context` is None); port 0 picks a free port (returned)."""
    limits = limits or ConnectionLimits()
    cap = connection_cap(limits.max_connections)
    map_large_buffers()
    runner = web.AppRunner(app, access_log=None, handle_signals=False, keepalive_timeout=limits.idle_seconds,
                           max_line_size=limits.max_line_bytes, max_field_size=limits.max_header_bytes,
                           max_headers=limits.max_headers, lingering_time=LINGERING_SECONDS,
                           handler_cancellation=True)
    await runner.setup()
    listener = listen(host, port)
    acceptor = Acceptor(listener, runner, ssl_context, limits, cap)
    accepting = asyncio.ensure_future(acceptor.run())
    log.info("accepting at most %d webhook connections", cap)
    return RunningServer(runner, listener.getsockname()[1], acceptor, accepting)
