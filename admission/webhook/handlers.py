"""HTTP handlers: bytes of an AdmissionReview in, an AdmissionReview out, always with HTTP 200.

Whatever arrives (not JSON, too deep, too large, wrong shapes) gets a well-formed AdmissionReview
back; a malformed one is denied with code 400. A bug in a decision is logged and answered with a
denial that says so, never with an HTTP 500 the API server could only report as "webhook failed".

Bodies are read in chunks, never more than `MAX_BODY_BYTES` plus one chunk. A larger body is answered
from its first `UID_PREFIX_BYTES` only, with the uid read from them (`uid_from_prefix`); the rest is
not kept (aiohttp reads and drops it for up to ten seconds so the client can read the answer, then
closes the connection).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
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
    uid_from_prefix,
    validate,
)

log = logging.getLogger(__name__)
Decide = Callable[[AdmissionRequest, Lookups], Decision]

MAX_BODY_BYTES = 8 * 1024 * 1024
"""The largest AdmissionReview read whole: the API server caps an object at 3 MiB, and a review carries
up to two copies of it (object and oldObject)."""
UID_PREFIX_BYTES = 64 * 1024
"""What is kept of a larger body, to answer it with its uid (the API server writes the uid first)."""


class Chunks(Protocol):
    async def readany(self) -> bytes:
        """The next bytes of the body; b"" at its end."""
        ...


async def read_body(content: Chunks, declared_length: int | None,
                    limit: int = MAX_BODY_BYTES) -> tuple[bytes, bool]:
    """`(body, True)` for a body of at most `limit` bytes; `(its first UID_PREFIX_BYTES, False)` otherwise.

    A body declared larger than `limit` (Content-Length) is not read beyond the prefix; an undeclared
    one (chunked) is read until it passes `limit`, so at most `limit` plus one chunk is ever held.
    """
    body = bytearray()
    if declared_length is not None and declared_length > limit:
        while len(body) < UID_PREFIX_BYTES and (chunk := await content.readany()):
            body.extend(chunk)
        return bytes(body[:UID_PREFIX_BYTES]), False
    while chunk := await content.readany():
        body.extend(chunk)
        if len(body) > limit:
            return bytes(body[:UID_PREFIX_BYTES]), False
    return bytes(body), True


class Fetcher(Protocol):
    async def fetch(self, refs: tuple[ObjectRef, ...]) -> Lookups | None:
        """Lookups with the objects a decision missed, for that decision only; None if none exists."""
        ...


class ReviewObserver(Protocol):
    def reviewed(self, webhook: str, request: AdmissionRequest | None, document: Mapping[str, Any],
                 seconds: float) -> None:
        """One review answered (`request` None when it did not parse), and how long it took."""
        ...


class AdmissionHandlers:
    def __init__(self, lookups: Lookups, policy: GatingPolicy, fetcher: Fetcher | None = None,
                 observer: ReviewObserver | None = None) -> None:
        self._lookups = lookups
        self._policy = policy
        self._fetcher = fetcher
        self._observer = observer

    async def mutate(self, request: web.Request) -> web.Response:
        return await self._observed("mutate", request, lambda r, lookups: mutate(r, lookups, self._policy))

    async def validate(self, request: web.Request) -> web.Response:
        return await self._observed("validate", request, lambda r, lookups: validate(r, lookups, self._policy))

    async def _observed(self, webhook: str, request: web.Request, decide: Decide) -> web.Response:
        started = time.perf_counter()
        review, document = await self._review(request, decide)
        if self._observer is not None:
            self._observer.reviewed(webhook, review, document, time.perf_counter() - started)
        return _reply(document)

    async def _review(self, request: web.Request, decide: Decide) -> tuple[AdmissionRequest | None, dict[str, Any]]:
        body, whole = await read_body(request.content, request.content_length)
        if not whole:
            return None, malformed_response(
                uid_from_prefix(body),
                f"the body is larger than the webhook accepts ({MAX_BODY_BYTES // (1024 * 1024)} MiB)")
        review = read_review(body)
        if not isinstance(review, AdmissionRequest):
            return None, review
        return review, render_response(review.uid, await self._decide(review, decide))

    async def _decide(self, review: AdmissionRequest, decide: Decide) -> Decision:
        try:
            decision = decide(review, self._lookups)
            if decision.missing and self._fetcher is not None:
                fresh = await self._fetcher.fetch(decision.missing)
                if fresh is not None:
                    decision = decide(review, fresh)
            return decision
        except Exception:
            log.exception("deciding on %s (uid %s) failed", review.describe(), review.uid)
            return Decision.deny(
                f"draq could not decide on {review.describe()} because of an internal error; "
                "the webhook's log has the details",
                "InternalError",
                500,
            )


def read_review(body: bytes) -> AdmissionRequest | dict[str, Any]:
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
