"""The webhook over real TLS sockets: answers, certificate swaps without dropped requests, file reloads."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import socket
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography import x509

from admission.core.errors import DraqError, InvalidInput
from admission.core.labels import GATE, QUEUE_LABEL
from admission.webhook.certificates import issue_serving, new_ca
from admission.webhook.rotation import ServingCertRotator
from admission.webhook.tls import CertFileWatcher, ServingTLS
from tests.support.clock import FakeClock

from .builders import POD, apply_patch, cluster, decode_patch, pod, review
from .serving import LiveServer, live_server


def client_context(live: LiveServer) -> ssl.SSLContext:
    assert live.ca is not None
    return ssl.create_default_context(cadata=live.ca.cert_pem.decode())


def peer_serial(live: LiveServer) -> int:
    with socket.create_connection(("127.0.0.1", live.port)) as raw, client_context(live).wrap_socket(
        raw, server_hostname="127.0.0.1"
    ) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


async def post(session: aiohttp.ClientSession, url: str, body: Any) -> tuple[int, dict[str, Any]]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with session.post(url, data=data, headers={"Content-Type": "application/json"}) as response:
        return response.status, await response.json()


def test_mutating_endpoint_gates_a_pod_over_tls() -> None:
    with live_server(cluster()) as live:
        original = pod("x", labels={QUEUE_LABEL: "gpu"})

        async def go() -> tuple[int, dict[str, Any]]:
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_context(live))) as s:
                return await post(s, f"https://127.0.0.1:{live.port}/mutate", review(POD, original, uid="abc"))

        status, answer = asyncio.run(go())
        assert status == 200 and answer["response"]["uid"] == "abc" and answer["response"]["allowed"]
        assert apply_patch(original, decode_patch(answer))["spec"]["schedulingGates"] == [{"name": GATE}]


def test_validating_endpoint_denies_an_unknown_queue() -> None:
    with live_server(cluster()) as live:
        obj = pod("x", labels={QUEUE_LABEL: "nope"}, gates=[GATE])

        async def go() -> tuple[int, dict[str, Any]]:
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_context(live))) as s:
                return await post(s, f"https://127.0.0.1:{live.port}/validate", review(POD, obj))

        status, answer = asyncio.run(go())
        assert status == 200 and answer["response"]["allowed"] is False
        assert "LocalQueue 'nope'" in answer["response"]["status"]["message"]


@pytest.mark.parametrize(
    "body",
    [b"", b"not json", b"[" * 100_000 + b"]" * 100_000, b'{"kind": "AdmissionReview"}', b"\xff\xfe\x00",
     json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                 "request": {"uid": "u", "operation": "CREATE", "kind": {}, "resource": {},
                             "object": {"metadata": [], "spec": "x"}}}).encode()],
)
def test_garbage_gets_a_well_formed_answer(body: bytes) -> None:
    with live_server(cluster(), use_tls=False) as live:

        async def go() -> list[tuple[int, dict[str, Any]]]:
            async with aiohttp.ClientSession() as s:
                return [await post(s, f"http://127.0.0.1:{live.port}/{path}", body)
                        for path in ("mutate", "validate")]

        for status, answer in asyncio.run(go()):
            assert status == 200 and answer["kind"] == "AdmissionReview"
            assert isinstance(answer["response"]["allowed"], bool)


def test_certificate_swaps_in_place_without_dropping_requests() -> None:
    lookups = cluster()
    with live_server(lookups) as live:
        assert live.tls is not None and live.ca is not None
        rotator = ServingCertRotator(live.ca, ["127.0.0.1"], live.tls)
        body = json.dumps(review(POD, pod("x", labels={QUEUE_LABEL: "gpu"}))).encode()
        errors: list[str] = []
        answered = [0]

        async def hammer(stop: asyncio.Event) -> None:
            connector = aiohttp.TCPConnector(ssl=client_context(live), force_close=False, limit=4)
            async with aiohttp.ClientSession(connector=connector) as session:
                while not stop.is_set():
                    try:
                        status, answer = await post(session, f"https://127.0.0.1:{live.port}/mutate", body)
                        assert status == 200 and answer["response"]["allowed"]
                        answered[0] += 1
                    except Exception as err:
                        errors.append(repr(err))

        async def rotate_in_server_loop() -> bool:
            return rotator.ensure_current(force=True)

        serials = {peer_serial(live)}

        async def go() -> None:
            stop = asyncio.Event()
            workers = [asyncio.create_task(hammer(stop)) for _ in range(4)]
            for _ in range(5):
                await asyncio.sleep(0.1)
                assert live.call(rotate_in_server_loop())
                serials.add(await asyncio.to_thread(peer_serial, live))
            stop.set()
            await asyncio.gather(*workers)

        asyncio.run(go())
        assert errors == [] and answered[0] > 20
        assert len(serials) == 6  # every swap served a new certificate to new connections


def test_rotator_does_nothing_until_due() -> None:
    ca = new_ca("ca", dt.datetime.now(dt.UTC))
    tls = ServingTLS()
    now = dt.datetime.now(dt.UTC)
    rotator = ServingCertRotator(ca, ["127.0.0.1"], tls, clock=FakeClock(now))
    try:
        assert rotator.ensure_current() and not rotator.ensure_current()
        assert 19 * 86400 < rotator.seconds_until_due() < 21 * 86400
        host_change = ServingCertRotator(ca, ["127.0.0.1", "draq.svc"], tls, clock=FakeClock(now))
        assert host_change.ensure_current()
    finally:
        tls.close()


def test_file_watcher_reloads_changed_files_and_keeps_the_old_on_garbage(tmp_path: Path) -> None:
    ca = new_ca("ca", dt.datetime.now(dt.UTC))
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    first = issue_serving(ca, ["127.0.0.1"], dt.datetime.now(dt.UTC))
    cert.write_bytes(first.cert_pem)
    key.write_bytes(first.key_pem)
    tls = ServingTLS()
    try:
        watcher = CertFileWatcher(tls, cert, key)
        assert watcher.load() and tls.current == first and not watcher.load()
        second = issue_serving(ca, ["127.0.0.1"], dt.datetime.now(dt.UTC))
        cert.write_bytes(second.cert_pem)  # key not yet rewritten: a mismatched pair
        with pytest.raises(InvalidInput, match="does not belong"):
            watcher.load()
        assert tls.current == first
        key.write_bytes(second.key_pem)
        assert watcher.load() and tls.current == second
        key.unlink()
        with pytest.raises(DraqError, match=r"tls\.key"):
            watcher.load()
    finally:
        tls.close()
