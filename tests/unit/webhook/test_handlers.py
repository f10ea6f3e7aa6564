"""The handlers' second look: a decision that missed an object fetches it and decides again."""

from __future__ import annotations

import asyncio
import copy

from admission.core.labels import GATE, QUEUE_LABEL
from admission.core.review import GatingPolicy, validate
from admission.core.review.envelope import ObjectRef, parse_review
from admission.webhook.handlers import AdmissionHandlers

from .builders import POD, FakeLookups, cluster, pod, review


class CatchingUp:
    """A fetcher that finds the LocalQueue the cache had not seen yet, for this decision only."""

    def __init__(self, lookups: FakeLookups) -> None:
        self.lookups = lookups
        self.asked: list[tuple[ObjectRef, ...]] = []

    async def fetch(self, refs: tuple[ObjectRef, ...]) -> FakeLookups:
        self.asked.append(refs)
        return copy.deepcopy(self.lookups).with_queue("team-a", "new")


def test_a_queue_created_a_moment_ago_is_found_on_the_second_look() -> None:
    lookups = cluster()
    refresher = CatchingUp(lookups)
    handlers = AdmissionHandlers(lookups, GatingPolicy(), refresher)
    request = parse_review(review(POD, pod("x", labels={QUEUE_LABEL: "new"}, gates=[GATE])))
    decision = asyncio.run(handlers._decide(request, lambda r, seen: validate(r, seen, GatingPolicy())))
    assert decision.allowed
    assert refresher.asked == [(ObjectRef("LocalQueue", "team-a", "new"),)]
    assert lookups.local_queue("team-a", "new") is None


def test_a_failing_decision_becomes_a_denial_not_a_crash() -> None:
    handlers = AdmissionHandlers(cluster(), GatingPolicy())
    request = parse_review(review(POD, pod("x")))

    def broken(_: object) -> object:
        raise ZeroDivisionError

    decision = asyncio.run(handlers._decide(request, broken))  # type: ignore[arg-type]
    assert not decision.allowed and decision.code == 500 and "internal error" in decision.message
