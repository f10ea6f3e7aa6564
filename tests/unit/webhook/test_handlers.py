"""The handlers' second look: a decision that missed an object fetches it and decides again."""

from __future__ import annotations

import asyncio

from admission.core.admission_review import ObjectRef, parse_review
from admission.core.gating import GATE, QUEUE_LABEL, GatingPolicy, validate
from admission.webhook.handlers import AdmissionHandlers

from .builders import POD, FakeLookups, cluster, pod, review


class CatchingUp:
    """A refresher that finds the LocalQueue the cache had not seen yet."""

    def __init__(self, lookups: FakeLookups) -> None:
        self.lookups = lookups
        self.asked: list[tuple[ObjectRef, ...]] = []

    async def refresh(self, refs: tuple[ObjectRef, ...]) -> bool:
        self.asked.append(refs)
        self.lookups.with_queue("team-a", "new")
        return True


def test_a_queue_created_a_moment_ago_is_found_on_the_second_look() -> None:
    lookups = cluster()
    refresher = CatchingUp(lookups)
    handlers = AdmissionHandlers(lookups, GatingPolicy(), refresher)
    request = parse_review(review(POD, pod("x", labels={QUEUE_LABEL: "new"}, gates=[GATE])))
    decision = asyncio.run(handlers._decide(request, lambda r: validate(r, lookups, GatingPolicy())))
    assert decision.allowed
    assert refresher.asked == [(ObjectRef("LocalQueue", "team-a", "new"),)]


def test_a_failing_decision_becomes_a_denial_not_a_crash() -> None:
    handlers = AdmissionHandlers(cluster(), GatingPolicy())
    request = parse_review(review(POD, pod("x")))

    def broken(_: object) -> object:
        raise ZeroDivisionError

    decision = asyncio.run(handlers._decide(request, broken))  # type: ignore[arg-type]
    assert not decision.allowed and decision.code == 500 and "internal error" in decision.message
