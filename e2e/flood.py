"""A hostile client of the webhook port: slow connections and concurrent large bodies, for a while.

Run as its own process (`python -m e2e.flood PORT CA_FILE SECONDS`) so that the test measuring the webhook
during the flood does not share an interpreter with it. It prints one JSON line of counts at the end.

- silent: TCP connections that never start the TLS handshake (the server cuts them after its handshake
  timeout); each one cut is opened again.
- slow: TLS connections that send a request's headers one line a second (cut after the idle timeout).
- bodies: concurrent posts of bodies of the largest accepted size (a review whose object holds as many
  small JSON values as the webhook parses, the costliest to parse) and of bodies larger than accepted, one
  after the other.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

from admission.core.review.envelope import GroupVersionKind, ReviewBuilder

MIB = 1024 * 1024
ACCEPTED_BYTES = 7 * MIB
OVERSIZED_BYTES = 12 * MIB
CHUNK = 256 * 1024


@dataclass(frozen=True)
class FloodPlan:
    port: int
    ca_file: str
    seconds: float
    silent: int = 500
    slow: int = 200
    bodies: int = 120
    host: str = "127.0.0.1"


@dataclass
class FloodCounts:
    opened: int = 0
    cut: int = 0
    refused: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    sent_bytes: int = 0

    def as_dict(self) -> dict[str, object]:
        return {"opened": self.opened, "cut": self.cut, "refused": self.refused,
                "statuses": dict(self.statuses), "sent_mib": round(self.sent_bytes / MIB)}


def review_body(size: int, values: int = 240_000) -> bytes:
    """A pod review of exactly `size` bytes whose object holds `values` small numbers (the costliest to parse;
    the webhook parses up to 250,000 values) and a string for the rest."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "flood", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}, "filler": [0], "pad": ""}
    document = ReviewBuilder(GroupVersionKind("", "v1", "Pod"), "pods", "CREATE", "default", "mallory") \
        .build("flood", pod, None)
    head, tail = json.dumps(document, separators=(",", ":")).encode().split(b'"filler":[0],"pad":""')
    numbers = b'"filler":[0' + b",0" * (values - 1) + b'],"pad":"'
    return head + numbers + b"a" * (size - len(head) - len(tail) - len(numbers) - 1) + b'"' + tail


class Flood:
    def __init__(self, plan: FloodPlan) -> None:
        self.plan = plan
        self.counts = FloodCounts()
        self.context = ssl.create_default_context(cafile=plan.ca_file)
        self.deadline = 0.0
        self.accepted = review_body(ACCEPTED_BYTES)

    def running(self) -> bool:
        return time.monotonic() < self.deadline

    async def run(self) -> FloodCounts:
        self.deadline = time.monotonic() + self.plan.seconds
        plan = self.plan
        workers = ([self._silent() for _ in range(plan.silent)] + [self._slow() for _ in range(plan.slow)]
                   + [self._bodies(i) for i in range(plan.bodies)])
        await asyncio.gather(*workers)
        return self.counts

    async def _open(self, tls: bool) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        try:
            streams = await asyncio.open_connection(self.plan.host, self.plan.port,
                                                    ssl=self.context if tls else None)
        except (OSError, ssl.SSLError):
            self.counts.refused += 1
            await asyncio.sleep(0.2)
            return None
        self.counts.opened += 1
        return streams

    async def _silent(self) -> None:
        while self.running():
            streams = await self._open(tls=False)
            if streams is None:
                continue
            reader, writer = streams
            if await self._closed_before(reader, self.deadline - time.monotonic()):
                self.counts.cut += 1
            writer.close()

    async def _slow(self) -> None:
        while self.running():
            streams = await self._open(tls=True)
            if streams is None:
                continue
            reader, writer = streams
            try:
                writer.write(b"POST /validate HTTP/1.1\r\nHost: draq\r\n")
                line = 0
                while self.running():
                    if await self._closed_before(reader, 1.0):
                        self.counts.cut += 1
                        break
                    writer.write(b"X-Slow-%d: 1\r\n" % line)
                    line += 1
            except (OSError, ssl.SSLError):
                self.counts.cut += 1
            writer.close()

    @staticmethod
    async def _closed_before(reader: asyncio.StreamReader, seconds: float) -> bool:
        try:
            await asyncio.wait_for(reader.read(1), max(seconds, 0.01))
        except TimeoutError:
            return False
        except (OSError, ssl.SSLError):
            return True
        return True

    async def _bodies(self, worker: int) -> None:
        oversized = worker % 2 == 1
        while self.running():
            streams = await self._open(tls=True)
            if streams is None:
                continue
            try:
                status = await asyncio.wait_for(self._post(*streams, OVERSIZED_BYTES if oversized else ACCEPTED_BYTES),
                                                max(self.deadline - time.monotonic(), 0.01))
            except TimeoutError:
                status = "unanswered at the end"
            self.counts.statuses[status] += 1

    async def _post(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, size: int) -> str:
        headers = (b"POST /validate HTTP/1.1\r\nHost: draq\r\nContent-Type: application/json\r\n"
                   b"Content-Length: %d\r\n\r\n" % size)
        sending = asyncio.ensure_future(self._send(writer, headers, size))
        try:
            line = await asyncio.wait_for(reader.readline(), 60)
            return line.split(b" ")[1].decode() if line.startswith(b"HTTP/1.1 ") else "closed"
        except (OSError, ssl.SSLError, TimeoutError):
            return "closed"
        finally:
            sending.cancel()
            await asyncio.gather(sending, return_exceptions=True)
            writer.close()

    async def _send(self, writer: asyncio.StreamWriter, headers: bytes, size: int) -> None:
        writer.write(headers)
        body = memoryview(self.accepted)
        sent = 0
        while sent < size:
            piece = body[sent % len(body):][:min(CHUNK, size - sent)]
            writer.write(piece)
            await writer.drain()
            sent += len(piece)
            self.counts.sent_bytes += len(piece)


def main(argv: list[str]) -> int:
    port, ca_file, seconds = int(argv[0]), argv[1], float(argv[2])
    counts = asyncio.run(Flood(FloodPlan(port, ca_file, seconds)).run())
    print(json.dumps(counts.as_dict()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
