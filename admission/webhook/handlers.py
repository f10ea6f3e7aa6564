"""HTTP handlers: bytes of an AdmissionReview in, an AdmissionReview out.

Whatever the API server can send (not JSON, too deep, wrong shapes) gets a well-formed AdmissionReview
back with HTTP 200; a malformed one is denied with code 400. A bug in a decision is logged and answered
with a denial that says so, never with an HTTP 500 the API server could only report as "webhook failed".

Past the limits a request is refused with an HTTP status and no review: 401 without the expected bearer
token (when one is configured); 413 for a body larger than `BodyLimits.max_body_bytes` (before any of it is
read when its length is declared); 429 when the bytes of the bodies being handled would pass
`BodyLimits.budget_bytes` for longer than `BodyLimits.wait_seconds`; 408 for a body not received within
`BodyLimits.body_seconds`. After a 413, 429 or 408 the connection ends at once. So at most `budget_bytes`
of bodies are held at once, however many clients send. A review of more JSON values than
`BodyLimits.max_values` is answered (denied, with its uid) unparsed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from admission.core.review import (
    AdmissionRequest,
    Decision,
    GatingPolicy,
    Lookups,
    MalformedReview,
    ObjectRef,
    malformed_response,
    mutate,
    parse_review,
    render_response,
    request_uid,
    started_group,
    uid_from_prefix,
    validate,
)

log = logging.getLogger(__name__)
Decide = Callable[[AdmissionRequest, Lookups], Decision]
Noted = Callable[[AdmissionRequest, Lookups, Decision], None]

MIB = 1024 * 1024
MAX_BODY_BYTES = 7 * MIB
"""The largest AdmissionReview the API server sends: object and oldObject of at most 3 MiB each (the API
server refuses a larger write request) and 1 MiB for the rest; docs/webhooks.md has the reasoning."""


MAX_VALUES = 250_000
"""The most JSON values of a review parsed, counted as its commas plus one (an upper bound, found without
parsing). Parsing holds the event loop, and every other review and the probes with it, for about 20 ms per
100,000 values: 0.7 s for the 3.6 million of a 7 MiB body of small numbers. The objects draq's webhooks see
(pods, claims, draq's own) are mostly strings and hold thousands of values, not hundreds of thousands."""
UID_PREFIX_BYTES = 64 * 1024
"""What the uid of a review not parsed is read from (the API server writes the uid first)."""
SMALL_BODY_BYTES = 256 * 1024
"""A review this small (a pod's is about 10 KiB) may use the whole body budget; larger ones leave
`BodyLimits.small_reserve_bytes` of it free, so that a flood of large bodies does not hold up the reviews the
API server sends every day."""


@dataclass(frozen=True)
class BodyLimits:
    max_body_bytes: int = MAX_BODY_BYTES
    # Bytes of bodies held at once (received, parsed or being decided on): eight of the largest reviews
    # beside the small-review reserve.
    budget_bytes: int = 64 * MIB
    # How long a review waits for room in the budget before it is refused with 429.
    wait_seconds: float = 2.0
    # How long a body may take to arrive, from the end of its headers.
    body_seconds: float = 10.0
    # A review of more JSON values is denied (code 400) without being parsed.
    max_values: int = MAX_VALUES

    @property
    def small_reserve_bytes(self) -> int:
        return self.budget_bytes // 8

    def problem(self) -> str:
        """Why these limits cannot work together ("" if they can)."""
        if self.max_body_bytes < SMALL_BODY_BYTES:
            return f"the body limit ({self.max_body_bytes} bytes) is below {SMALL_BODY_BYTES} bytes"
        if self.budget_bytes - self.small_reserve_bytes < self.max_body_bytes:
            return (f"the body budget ({self.budget_bytes} bytes) less its small-review reserve (an eighth) is "
                    f"smaller than the body limit ({self.max_body_bytes} bytes): the largest review could "
                    "never be read")
        if self.max_values < 1000:
            return f"the JSON value limit ({self.max_values}) is below 1000, fewer than a plain review holds"
        if not (self.wait_seconds >= 0 and self.body_seconds > 0):
            return "the waiting and reading times must be positive"
        return ""


class BodyBudget:
    """Bytes of request bodies that may be held at once; a reservation waits for room, for a while.
    Reservations above `SMALL_BODY_BYTES` leave `reserve` bytes free."""

    def __init__(self, capacity: int, reserve: int = 0) -> None:
        self.capacity = capacity
        self.reserve = reserve
        self.free = capacity
        self._changed = asyncio.Condition()

    @asynccontextmanager
    async def reserved(self, size: int, wait: float) -> AsyncIterator[bool]:
        """Holds `size` bytes for the block (True), or yields False if there was no room within `wait`."""
        size = min(size, self.capacity)
        if not await self._take(size, wait):
            yield False
            return
        try:
            yield True
        finally:
            async with self._changed:
                self.free += size
                self._changed.notify_all()

    async def _take(self, size: int, wait: float) -> bool:
        keep = self.reserve if size > SMALL_BODY_BYTES else 0
        async with self._changed:
            if self.free - size < keep:
                try:
                    await asyncio.wait_for(self._changed.wait_for(lambda: self.free - size >= keep), wait)
                except TimeoutError:
                    return False
            self.free -= size
            return True


class Chunks(Protocol):
    async def readany(self) -> bytes:
        """The next bytes of the body; b"" at its end."""
        ...


class BodyTooLarge(Exception):
    pass


async def read_body(content: Chunks, limit: int = MAX_BODY_BYTES, declared: int | None = None) -> bytearray:
    """The whole body; raises BodyTooLarge as soon as more than `limit` bytes arrived (at most one chunk more
    than `limit` is ever held). A declared length (at most `limit`) is allocated at once: one buffer of
    the final size, not a series of growing ones that leave the heap fragmented. The buffer is not copied
    again into bytes: json.loads reads a bytearray."""
    if declared is None:
        return await _read_growing(content, limit)
    body = bytearray(declared)
    filled = 0
    while chunk := await content.readany():
        if filled + len(chunk) > declared:
            raise BodyTooLarge
        body[filled:filled + len(chunk)] = chunk
        filled += len(chunk)
    del body[filled:]
    return body


async def _read_growing(content: Chunks, limit: int) -> bytearray:
    body = bytearray()
    while chunk := await content.readany():
        body.extend(chunk)
        if len(body) > limit:
            raise BodyTooLarge
    return body


class ClientCheck(Protocol):
    def admits(self, authorization: str | None) -> bool:
        """Whether a request with this Authorization header comes from the API server."""
        ...


class Fetcher(Protocol):
    async def fetch(self, refs: tuple[ObjectRef, ...]) -> Lookups | None:
        """Lookups with the objects a decision missed, for that decision only; None if none exists."""
        ...


class ReviewObserver(Protocol):
    def reviewed(self, webhook: str, request: AdmissionRequest | None, document: Mapping[str, Any],
                 seconds: float) -> None:
        """One review answered (`request` None when it did not parse), and how long it took."""
        ...


class GroupStarts(Protocol):
    def note_started(self, namespace: str, queue: str, group: str) -> None:
        """An allowed pod started a group whose PodGroup does not exist yet (`core.review.started_group`)."""
        ...


class AdmissionHandlers:
    def __init__(self, lookups: Lookups, policy: GatingPolicy, fetcher: Fetcher | None = None,
                 observer: ReviewObserver | None = None, limits: BodyLimits | None = None,
                 clients: ClientCheck | None = None, starts: GroupStarts | None = None) -> None:
        self._lookups = lookups
        self._policy = policy
        self._fetcher = fetcher
        self._observer = observer
        self.limits = limits or BodyLimits()
        self.budget = BodyBudget(self.limits.budget_bytes, self.limits.small_reserve_bytes)
        self._clients = clients
        self._starts = starts

    async def mutate(self, request: web.Request) -> web.StreamResponse:
        return await self._observed("mutate", request, lambda r, lookups: mutate(r, lookups, self._policy))

    async def validate(self, request: web.Request) -> web.StreamResponse:
        return await self._observed("validate", request, lambda r, lookups: validate(r, lookups, self._policy),
                                    self._note_started)

    def _note_started(self, review: AdmissionRequest, lookups: Lookups, decision: Decision) -> None:
        """Count a group an allowed pod starts as pending at once, before the operator writes its PodGroup
        (`webhook.started`). Decided and noted without an await between: no other review comes in between."""
        if self._starts is None or not decision.allowed:
            return
        started = started_group(review, lookups, self._policy)
        if started is not None:
            self._starts.note_started(review.namespace, *started)

    async def _observed(self, webhook: str, request: web.Request, decide: Decide,
                        noted: Noted | None = None) -> web.StreamResponse:
        started = time.perf_counter()
        refusal = self._refusal(request)
        if refusal is not None:
            return refusal
        declared = request.content_length
        if declared is not None and declared > self.limits.max_body_bytes:
            return await _cut(request, 413, self._too_large())
        reservation = self.limits.max_body_bytes if declared is None else declared
        async with self.budget.reserved(reservation, self.limits.wait_seconds) as room:
            if not room:
                return await _cut(request, 429, "the webhook is reading as many bodies as it holds at once; retry")
            body = await self._body(request)
            if isinstance(body, web.StreamResponse):
                return body
            review, document = await self._review(body, decide, noted)
        if self._observer is not None:
            self._observer.reviewed(webhook, review, document, time.perf_counter() - started)
        return _reply(document)

    async def _body(self, request: web.Request) -> bytearray | web.StreamResponse:
        """The body, or the answer that cut it (408 or 413)."""
        limits = self.limits
        try:
            async with asyncio.timeout(limits.body_seconds):
                return await read_body(request.content, limits.max_body_bytes, request.content_length)
        except TimeoutError:
            return await _cut(request, 408, f"the body did not arrive within {limits.body_seconds:g} seconds")
        except BodyTooLarge:
            return await _cut(request, 413, self._too_large())

    def _refusal(self, request: web.Request) -> web.Response | None:
        """The answer to a request without the client credential the webhook requires (None if it has it)."""
        if self._clients is not None and not self._clients.admits(request.headers.get("Authorization")):
            response = web.Response(status=401, text="a bearer token the webhook accepts is required\n")
            response.headers["WWW-Authenticate"] = "Bearer"
            return response
        return None

    def _too_large(self) -> str:
        return f"the body is larger than the webhook accepts ({self.limits.max_body_bytes} bytes)"

    async def _review(self, body: bytes | bytearray, decide: Decide,
                      noted: Noted | None) -> tuple[AdmissionRequest | None, dict[str, Any]]:
        review = self._read(body)
        if not isinstance(review, AdmissionRequest):
            return None, review
        return review, render_response(review.uid, await self._decide(review, decide, noted))

    def _read(self, body: bytes | bytearray) -> AdmissionRequest | dict[str, Any]:
        values = body.count(b",") + 1
        if values > self.limits.max_values:
            return malformed_response(uid_from_prefix(bytes(body[:UID_PREFIX_BYTES])),
                                      f"the review holds up to {values} JSON values, more than the webhook "
                                      f"parses ({self.limits.max_values})")
        return read_review(body)

    async def _decide(self, review: AdmissionRequest, decide: Decide, noted: Noted | None = None) -> Decision:
        try:
            lookups = self._lookups
            decision = decide(review, lookups)
            if decision.missing and self._fetcher is not None:
                fresh = await self._fetcher.fetch(decision.missing)
                if fresh is not None:
                    lookups = fresh
                    decision = decide(review, lookups)
            if noted is not None:
                noted(review, lookups, decision)
            return decision
        except Exception:
            log.exception("deciding on %s (uid %s) failed", review.describe(), review.uid)
            return Decision.deny(
                f"draq could not decide on {review.describe()} because of an internal error; "
                "the webhook's log has the details",
                "InternalError",
                500,
            )


def read_review(body: bytes | bytearray) -> AdmissionRequest | dict[str, Any]:
    """The request in a body, or the response that says why there is none."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError) as err:
        return malformed_response("", f"the body is not JSON ({type(err).__name__})")
    try:
        return parse_review(document)
    except MalformedReview as err:
        return malformed_response(request_uid(document), str(err))


def _reply(document: dict[str, Any]) -> web.Response:
    return web.Response(body=json.dumps(document, separators=(",", ":")), content_type="application/json")


async def _cut(request: web.Request, status: int, message: str) -> web.StreamResponse:
    """Answer `status` and drop the connection at once: the unread rest of the body is neither read nor
    decrypted (a graceful TLS close would read the peer's data until it stops sending)."""
    response = web.Response(status=status, text=message + "\n")
    response.force_close()
    await response.prepare(request)
    await response.write_eof()
    if request.transport is not None:
        request.transport.abort()
    return response
