"""What a hostile client can hold of the webhook: refused bodies (413 before reading, 408, 429), a bounded
body budget, a connection cap at accept, timeouts for stalled handshakes and headers, and client
authentication by bearer token and by client certificate."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import socket
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from admission.core.errors import DraqError
from admission.core.labels import QUEUE_LABEL
from admission.webhook.certificates import KeyPair, new_ca
from admission.webhook.clients import TokenFile
from admission.webhook.handlers import SMALL_BODY_BYTES, BodyBudget, BodyLimits, BodyTooLarge, read_body
from admission.webhook.server import RESERVED_FILES, ConnectionLimits, connection_cap
from admission.webhook.tls import ServingTLS

from .builders import POD, cluster, pod, review
from .serving import LiveServer, live_server

REVIEW = json.dumps(review(POD, pod("x", labels={QUEUE_LABEL: "gpu"}), uid="u1")).encode()


class Chunks:
    def __init__(self, body: bytes, chunk: int = 16 * 1024) -> None:
        self.parts = [body[i:i + chunk] for i in range(0, len(body), chunk)]
        self.taken = 0

    async def readany(self) -> bytes:
        if not self.parts:
            return b""
        part = self.parts.pop(0)
        self.taken += len(part)
        return part


def test_read_body_stops_one_chunk_past_the_limit() -> None:
    assert asyncio.run(read_body(Chunks(REVIEW), 1024 * 1024)) == REVIEW
    large = Chunks(b"x" * 3 * 1024 * 1024)
    with pytest.raises(BodyTooLarge):
        asyncio.run(read_body(large, 1024 * 1024))
    assert large.taken <= 1024 * 1024 + 16 * 1024


def test_the_budget_holds_bytes_until_released_and_refuses_after_the_wait() -> None:
    async def go() -> tuple[bool, bool, bool, int]:
        budget = BodyBudget(100)
        async with budget.reserved(80, 0.1) as first:
            async with budget.reserved(30, 0.05) as second:
                pass

            async def later() -> bool:
                async with budget.reserved(30, 1.0) as granted:
                    return granted

            waiting = asyncio.ensure_future(later())
            await asyncio.sleep(0.05)
        third = await waiting
        return first, second, third, budget.free

    assert asyncio.run(go()) == (True, False, True, 100)


def test_large_bodies_leave_the_reserve_to_small_ones() -> None:
    big, small = SMALL_BODY_BYTES + 1, 1000

    async def go() -> tuple[bool, bool, bool]:
        budget = BodyBudget(3 * big, reserve=big)
        async with budget.reserved(big, 0) as first, budget.reserved(big, 0.05) as second, \
                budget.reserved(big, 0.05) as third, budget.reserved(small, 0) as fits:
            return first and second, third, fits

    assert asyncio.run(go()) == (True, False, True)


def test_limits_that_cannot_work_together_are_named() -> None:
    assert BodyLimits().problem() == ""
    assert "smaller than the body limit" in BodyLimits(budget_bytes=7 * 1024 * 1024).problem()
    assert "below 262144 bytes" in BodyLimits(max_body_bytes=1000).problem()


def test_the_connection_cap_leaves_room_under_the_file_limit() -> None:
    assert connection_cap(1000, 100_000) == 1000
    assert connection_cap(1000, 1024) == 1024 - RESERVED_FILES
    with pytest.raises(DraqError, match="RLIMIT_NOFILE"):
        connection_cap(1000, 200)


async def _post(port: int, body: Any, headers: dict[str, str] | None = None,
                context: ssl.SSLContext | None = None) -> tuple[int, str]:
    scheme = "https" if context is not None else "http"
    connector = aiohttp.TCPConnector(ssl=context) if context is not None else None
    async with aiohttp.ClientSession(connector=connector) as session, session.post(
            f"{scheme}://127.0.0.1:{port}/mutate", data=body,
            headers={"Content-Type": "application/json", **(headers or {})}) as response:
        return response.status, await response.text()


async def _stream(body: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(body), 256 * 1024):
        yield body[start:start + 256 * 1024]


def test_a_declared_oversized_body_is_refused_before_it_is_read() -> None:
    limits = BodyLimits(max_body_bytes=1024 * 1024, budget_bytes=4 * 1024 * 1024)
    with live_server(cluster(), use_tls=False, bodies=limits) as live:
        with socket.create_connection(("127.0.0.1", live.port)) as raw:
            raw.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        b"Content-Length: 100000000\r\n\r\n")
            raw.settimeout(5)
            answer = raw.recv(4096)
        assert answer.startswith(b"HTTP/1.1 413 ") and b"1048576 bytes" in answer


def _send_chunked_until_refused(port: int, total: int) -> tuple[int, bytes]:
    """Bytes of a chunked body sent before the server answered or closed, and what it answered."""
    chunk = b"x" * 64 * 1024
    sent, answer = 0, b""
    with socket.create_connection(("127.0.0.1", port)) as raw:
        raw.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        raw.settimeout(0.001)
        try:
            while sent < total and not answer:
                raw.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
                with contextlib.suppress(TimeoutError):
                    answer = raw.recv(4096)
        except (BrokenPipeError, ConnectionResetError):
            pass
    return sent, answer


def test_an_undeclared_oversized_body_is_refused_once_past_the_limit() -> None:
    limits = BodyLimits(max_body_bytes=1024 * 1024, budget_bytes=4 * 1024 * 1024)
    with live_server(cluster(), use_tls=False, bodies=limits) as live:
        sent, answer = _send_chunked_until_refused(live.port, 64 * 1024 * 1024)
        # Refused (413, then closed without reading the rest) long before the 64 MiB were sent.
        assert sent < 32 * 1024 * 1024 and (answer == b"" or answer.startswith(b"HTTP/1.1 413 ")), (sent, answer)
        assert asyncio.run(_post(live.port, REVIEW))[0] == 200


def test_a_body_that_stalls_is_cut_with_408() -> None:
    limits = BodyLimits(body_seconds=0.3)
    with live_server(cluster(), use_tls=False, bodies=limits) as live:
        with socket.create_connection(("127.0.0.1", live.port)) as raw:
            raw.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
            raw.settimeout(5)
            started = time.monotonic()
            answer = raw.recv(4096)
        assert answer.startswith(b"HTTP/1.1 408 ") and time.monotonic() - started < 3


def test_reviews_past_the_body_budget_get_429_and_the_budget_comes_back() -> None:
    limits = BodyLimits(max_body_bytes=256 * 1024, budget_bytes=256 * 1024, wait_seconds=0.2, body_seconds=5)
    with live_server(cluster(), use_tls=False, bodies=limits) as live:
        with socket.create_connection(("127.0.0.1", live.port)) as holder:
            # Declares the whole budget and sends nothing more: the next review waits, then gets 429.
            holder.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 262144\r\n\r\n{")
            time.sleep(0.2)
            status, text = asyncio.run(_post(live.port, REVIEW))
            assert status == 429 and "retry" in text
        time.sleep(0.3)
        assert asyncio.run(_post(live.port, REVIEW))[0] == 200


def _open_idle(port: int, count: int) -> list[socket.socket]:
    return [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]


def _closed_by_server(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_connections_past_the_cap_are_closed_at_accept() -> None:
    with live_server(cluster(), use_tls=False, connections=ConnectionLimits(max_connections=5)) as live:
        held = _open_idle(live.port, 5)
        try:
            time.sleep(0.2)
            extra = socket.create_connection(("127.0.0.1", live.port))
            assert _closed_by_server(extra, 2)
            extra.close()
            assert live.server.acceptor.refused == 1
        finally:
            for sock in held:
                sock.close()
        time.sleep(0.2)
        assert asyncio.run(_post(live.port, REVIEW))[0] == 200


def test_headers_that_stall_and_idle_connections_are_closed() -> None:
    with live_server(cluster(), use_tls=False, connections=ConnectionLimits(idle_seconds=0.5)) as live:
        slow = socket.create_connection(("127.0.0.1", live.port))
        slow.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\n")
        idle = socket.create_connection(("127.0.0.1", live.port))
        assert _closed_by_server(slow, 3) and _closed_by_server(idle, 3)
        slow.close()
        idle.close()


def test_a_stalled_tls_handshake_is_cut() -> None:
    with live_server(cluster(), connections=ConnectionLimits(handshake_seconds=0.3)) as live:
        silent = socket.create_connection(("127.0.0.1", live.port))
        assert _closed_by_server(silent, 3)
        silent.close()
        assert live.server.acceptor.open_connections == 0


def test_a_bearer_token_is_required_when_configured(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("first\n\nsecond\n")
    with live_server(cluster(), use_tls=False, clients=TokenFile(tokens, recheck_seconds=0)) as live:
        assert asyncio.run(_post(live.port, REVIEW))[0] == 401
        assert asyncio.run(_post(live.port, REVIEW, {"Authorization": "Bearer wrong"}))[0] == 401
        assert asyncio.run(_post(live.port, REVIEW, {"Authorization": "Basic second"}))[0] == 401
        assert asyncio.run(_post(live.port, REVIEW, {"Authorization": "Bearer second"}))[0] == 200
        tokens.write_text("third\n")
        assert asyncio.run(_post(live.port, REVIEW, {"Authorization": "Bearer second"}))[0] == 401
        assert asyncio.run(_post(live.port, REVIEW, {"Authorization": "Bearer third"}))[0] == 200


def test_a_token_file_without_tokens_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "tokens"
    empty.write_text("\n  \n")
    with pytest.raises(DraqError, match="holds no token"):
        TokenFile(empty)
    with pytest.raises(DraqError, match="client token file"):
        TokenFile(tmp_path / "missing")


def client_certificate(ca: KeyPair, now: dt.datetime) -> KeyPair:
    """A client certificate (clientAuth) for the user kube-apiserver, signed by `ca`."""
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
            .issuer_name(ca.certificate.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), key_pem)


def _client_context(live: LiveServer, client: KeyPair | None, tmp_path: Path) -> ssl.SSLContext:
    assert live.ca is not None
    context = ssl.create_default_context(cadata=live.ca.cert_pem.decode())
    if client is not None:
        cert, key = tmp_path / "client.crt", tmp_path / "client.key"
        cert.write_bytes(client.cert_pem)
        key.write_bytes(client.key_pem)
        context.load_cert_chain(cert, key)
    return context


def test_mtls_admits_only_clients_with_a_certificate_of_the_client_ca(tmp_path: Path) -> None:
    now = dt.datetime.now(dt.UTC)
    client_ca, stranger_ca = new_ca("api-server-clients", now), new_ca("someone-else", now)
    ca_file = tmp_path / "client-ca.crt"
    ca_file.write_bytes(client_ca.cert_pem)
    with live_server(cluster(), client_ca_file=ca_file) as live:
        signed = client_certificate(client_ca, now)
        status, _ = asyncio.run(_post(live.port, REVIEW, context=_client_context(live, signed, tmp_path)))
        assert status == 200
        for client in (None, client_certificate(stranger_ca, now)):
            with pytest.raises(aiohttp.ClientError):
                asyncio.run(_post(live.port, REVIEW, context=_client_context(live, client, tmp_path)))


def test_a_client_ca_file_that_is_not_pem_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "ca.crt"
    bad.write_text("not a certificate")
    tls = ServingTLS()
    try:
        with pytest.raises(DraqError, match="client CA file"):
            tls.require_client_certificates(bad)
        assert tls.context.verify_mode == ssl.CERT_NONE
    finally:
        tls.close()


def test_a_review_of_too_many_json_values_is_denied_unparsed_with_its_uid() -> None:
    document = review(POD, pod("x", labels={QUEUE_LABEL: "gpu"}), uid="many-values")
    document["request"]["object"]["filler"] = [0] * 5000
    body = json.dumps(document).encode()
    with live_server(cluster(), use_tls=False, bodies=BodyLimits(max_values=2000)) as live:
        status, text = asyncio.run(_post(live.port, body))
    response = json.loads(text)["response"]
    assert status == 200 and response["uid"] == "many-values" and response["allowed"] is False
    assert response["status"]["code"] == 400 and "more than the webhook parses (2000)" in response["status"]["message"]
