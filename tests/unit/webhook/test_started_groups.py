"""A burst of pods that each start a group, faster than the operator writes their PodGroups: the webhook counts
the groups it let start as pending until their PodGroups are cached, so the LocalQueue's cap holds exactly,
later members of those groups still pass, and a group whose PodGroup never comes stops counting after a while."""

from __future__ import annotations

import asyncio
from typing import Any

from admission.core.labels import MANAGED_LABEL
from admission.core.review import GatingPolicy, validate
from admission.core.review.envelope import parse_review
from admission.webhook.cache import WebhookCache
from admission.webhook.handlers import AdmissionHandlers
from admission.webhook.started import STARTED_MEMORY_SECONDS
from tests.support import builders as manifests
from tests.support.clock import FakeClock
from tests.support.fake_api import FakeApi

from .builders import POD, review

CAP = 5
POLICY = GatingPolicy(max_pending_groups=CAP)


def _put(cache: WebhookCache, kind: str, obj: dict[str, Any]) -> None:
    cache.reflectors[kind].apply_event("ADDED", obj)  # as a watch event stores it


def _cache(clock: FakeClock) -> WebhookCache:
    cache = WebhookCache(FakeApi(), clock=clock)  # type: ignore[arg-type]
    _put(cache, "Namespace", {"metadata": {"name": "team-a", "labels": {MANAGED_LABEL: "true"}}})
    _put(cache, "LocalQueue", {"apiVersion": "draq.io/v1alpha1", "kind": "LocalQueue",
                               "metadata": {"name": "gpu", "namespace": "team-a"}, "spec": {"clusterQueue": "cq"}})
    return cache


def _create(handlers: AdmissionHandlers, name: str, group: str) -> tuple[bool, str]:
    pod = manifests.pod(name, "team-a", queue="gpu", group=group, group_min=2, gated=True, container="c")
    request = parse_review(review(POD, pod))
    decision = asyncio.run(handlers._decide(request, lambda r, seen: validate(r, seen, POLICY),
                                            handlers._note_started))
    return decision.allowed, decision.message


def _pod_group(name: str, phase: str = "Pending") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "team-a", "uid": name}, "spec": {"queue": "gpu", "minMember": 2},
            "status": {"phase": phase}}


def test_a_burst_of_new_groups_stops_at_the_cap_before_any_podgroup_is_written() -> None:
    clock = FakeClock()
    cache = _cache(clock)
    handlers = AdmissionHandlers(cache, POLICY, starts=cache)
    answers = [_create(handlers, f"p{i}", f"g{i}") for i in range(40)]
    allowed = [i for i, (ok, _) in enumerate(answers) if ok]
    assert allowed == list(range(CAP))
    assert "already holds 5 pending groups, at or over its cap of 5" in answers[CAP][1]
    assert _create(handlers, "p0-b", "g0") == (True, "")  # the second member of a group let start
    assert cache.pending_groups("team-a", "gpu") == CAP


def test_started_groups_give_way_to_their_podgroups_and_expire_without_them() -> None:
    clock = FakeClock()
    cache = _cache(clock)
    handlers = AdmissionHandlers(cache, POLICY, starts=cache)
    for i in range(CAP):
        assert _create(handlers, f"p{i}", f"g{i}")[0]
    _put(cache, "PodGroup", _pod_group("g0", "Admitted"))  # written, and admitted at once: one place frees
    _put(cache, "PodGroup", _pod_group("g1"))
    assert cache.pending_groups("team-a", "gpu") == CAP - 1
    assert len(cache.started) == CAP - 2  # the groups whose PodGroup is cached are not kept
    assert _create(handlers, "late", "late")[0]
    assert not _create(handlers, "over", "over")[0]
    clock.advance(STARTED_MEMORY_SECONDS)  # their pods were never stored, or the operator never wrote them
    assert cache.pending_groups("team-a", "gpu") == 1  # g1, still pending
    assert cache.pod_group("team-a", "g2") is None
    assert _create(handlers, "again", "again")[0]


def test_a_refused_or_dry_run_pod_starts_nothing() -> None:
    clock = FakeClock()
    cache = _cache(clock)
    handlers = AdmissionHandlers(cache, POLICY, starts=cache)
    pod = manifests.pod("dry", "team-a", queue="gpu", group="dry", group_min=1, gated=True, container="c")
    document = review(POD, pod)
    document["request"]["dryRun"] = True
    decision = asyncio.run(handlers._decide(parse_review(document), lambda r, seen: validate(r, seen, POLICY),
                                            handlers._note_started))
    assert decision.allowed and len(cache.started) == 0
    ungated = manifests.pod("open", "team-a", queue="gpu", group="open", group_min=1, gated=False, container="c")
    decision = asyncio.run(handlers._decide(parse_review(review(POD, ungated)),
                                            lambda r, seen: validate(r, seen, POLICY), handlers._note_started))
    assert not decision.allowed and len(cache.started) == 0
