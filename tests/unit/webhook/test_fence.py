"""The fence on PodGroup status: draq's own status writes must carry the epoch the Lease stands for now, read
afresh for every decision; a deposed leader's write is refused with a message that says so, and a write that
cannot be checked is refused too."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from admission.core.labels import DEFAULT_DRAQ_USER
from admission.core.review import GatingPolicy, validate
from admission.core.review.envelope import (
    AdmissionRequest,
    GroupVersionKind,
    ObjectRef,
    ReviewBuilder,
    parse_review,
)
from admission.kube import kinds
from admission.kube.client import KubeApiError
from admission.webhook.cache import WebhookCache
from admission.webhook.configurations import WebhookTarget, configurations
from admission.webhook.handlers import AdmissionHandlers

from .builders import FakeLookups
from .match_conditions import conditions_hold

POD_GROUP = GroupVersionKind("draq.io", "v1alpha1", "PodGroup")
POLICY = GatingPolicy()
LEASE_KEY = ("draq-system", "draq-operator")


def lease(holder: str, transitions: int, uid: str = "u-1") -> dict[str, Any]:
    return {"metadata": {"name": "draq-operator", "namespace": "draq-system", "uid": uid},
            "spec": {"holderIdentity": holder, "leaseTransitions": transitions, "leaseDurationSeconds": 15}}


def group(epoch: dict[str, Any] | None, phase: str = "Admitted") -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if epoch is not None:
        status["epoch"] = epoch
    return {"apiVersion": "draq.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "train", "namespace": "team"},
            "spec": {"minMember": 2, "queue": "lq"}, "status": status}


def epoch(holder: str = "draq-0", transitions: int = 4, uid: str = "u-1") -> dict[str, Any]:
    return {"holder": holder, "leaseTransitions": transitions, "leaseUID": uid}


def status_update(new: dict[str, Any], username: str = DEFAULT_DRAQ_USER) -> AdmissionRequest:
    builder = ReviewBuilder(POD_GROUP, "podgroups", "UPDATE", "team", username, extra={"subResource": "status"})
    return parse_review(builder.build("uid-1", new, group(None, "Pending")))


def lookups(*leases: dict[str, Any]) -> FakeLookups:
    found = FakeLookups()
    for one in leases:
        found.leases[LEASE_KEY] = one
    return found


def test_the_current_leaders_write_is_allowed() -> None:
    decision = validate(status_update(group(epoch())), lookups(lease("draq-0", 4)), POLICY)
    assert decision.allowed


@pytest.mark.parametrize(("current", "now_held"), [
    (lease("draq-1", 5), "held by draq-1 (lease transition 5)"),  # taken over
    (lease("draq-0", 5), "held by draq-0 (lease transition 5)"),  # a restart of the same replica, a new term
    (lease("draq-0", 4, uid="u-2"), "held by draq-0 (lease transition 4)"),  # the Lease was deleted and made again
    (lease("", 4), "held by nobody"),  # released on a clean stop
])
def test_a_deposed_leaders_write_is_refused(current: dict[str, Any], now_held: str) -> None:
    decision = validate(status_update(group(epoch())), lookups(current), POLICY)
    assert not decision.allowed and decision.code == 409
    assert "written under the leadership of draq-0 (lease transition 4), which has ended" in decision.message
    assert f"the Lease draq-system/draq-operator is now {now_held}" in decision.message


def test_a_lease_that_cannot_be_read_refuses_the_write_and_asks_for_it() -> None:
    decision = validate(status_update(group(epoch())), lookups(), POLICY)
    assert not decision.allowed and decision.code == 503
    assert decision.missing == (ObjectRef("Lease", "draq-system", "draq-operator"),)
    assert "could not be read" in decision.message


def test_writes_that_are_not_fenced() -> None:
    none = lookups()
    assert validate(status_update(group(None)), none, POLICY).allowed  # draq without leader election
    malformed = group(None)
    malformed["status"]["epoch"] = {"holder": "draq-0", "leaseTransitions": "4"}
    decision = validate(status_update(malformed), none, POLICY)
    assert not decision.allowed and decision.code == 422 and "status.epoch" in decision.message


def test_another_lease_can_be_configured() -> None:
    policy = GatingPolicy(lease_namespace="ops", lease_name="draq")
    found = FakeLookups(leases={("ops", "draq"): lease("draq-0", 4)})
    assert validate(status_update(group(epoch())), found, policy).allowed
    assert not validate(status_update(group(epoch())), lookups(lease("draq-0", 4)), policy).allowed


class LeaseReader:
    """A fetcher that reads the Lease, as the webhook's cache does; None when the API server is away."""

    def __init__(self, lookups: FakeLookups, current: dict[str, Any] | None) -> None:
        self.lookups = lookups
        self.current = current
        self.asked: list[tuple[ObjectRef, ...]] = []

    async def fetch(self, refs: tuple[ObjectRef, ...]) -> FakeLookups | None:
        self.asked.append(refs)
        if self.current is None:
            return None
        seen = copy.deepcopy(self.lookups)
        seen.leases[LEASE_KEY] = self.current
        return seen


@pytest.mark.parametrize(("current", "allowed"), [(lease("draq-0", 4), True), (lease("draq-1", 5), False),
                                                  (None, False)])
def test_the_handler_reads_the_lease_for_the_decision(current: dict[str, Any] | None, allowed: bool) -> None:
    cache = FakeLookups()
    reader = LeaseReader(cache, current)
    handlers = AdmissionHandlers(cache, POLICY, reader)
    decision = asyncio.run(handlers._decide(status_update(group(epoch())), lambda r, seen: validate(r, seen, POLICY)))
    assert decision.allowed is allowed
    assert reader.asked == [(ObjectRef("Lease", "draq-system", "draq-operator"),)]


def fence_webhook() -> dict[str, Any]:
    [found] = [w for c in configurations(WebhookTarget(url="https://127.0.0.1:9443"), b"CA", "draq-system")
               for w in c["webhooks"] if w["name"].startswith("podgroup-status.")]
    return found


def test_the_fence_webhook_is_called_for_draqs_status_writes_with_an_epoch_and_fails_closed() -> None:
    webhook = fence_webhook()
    assert webhook["failurePolicy"] == "Fail"
    assert webhook["rules"] == [{"apiGroups": ["draq.io"], "apiVersions": ["v1alpha1"],
                                 "resources": ["podgroups/status"], "operations": ["UPDATE"], "scope": "Namespaced"}]
    old = group(None, "Pending")
    assert conditions_hold(webhook, "UPDATE", group(epoch()), old, DEFAULT_DRAQ_USER)
    assert not conditions_hold(webhook, "UPDATE", group(None), old, DEFAULT_DRAQ_USER)
    # Anyone else's status write is sent too, and refused (`test_only_draq_writes_pod_group_status`).
    assert conditions_hold(webhook, "UPDATE", group(epoch()), old, "kubernetes-admin")


def test_only_draq_writes_pod_group_status() -> None:
    decision = validate(status_update(group(epoch()), username="kubernetes-admin"), lookups(), POLICY)
    assert not decision.allowed and decision.code == 403
    assert "only draq (system:serviceaccount:draq-system:draq) writes PodGroup status" in decision.message


class LeaseApi:
    def __init__(self) -> None:
        self.gets: list[str] = []
        self.lease: dict[str, Any] | None = None

    async def get(self, path: str, params: Any = None) -> dict[str, Any]:
        self.gets.append(path)
        if path.endswith("/leases/draq-operator"):
            if self.lease is None:
                raise KubeApiError("GET", path, 404, "not found")
            return copy.deepcopy(self.lease)
        return {"metadata": {"resourceVersion": "1"}, "items": []}

    async def watch(self, path: str, version: str, timeout_seconds: int = 300) -> Any:
        await asyncio.sleep(3600)
        yield {}


def test_the_cache_reads_the_lease_afresh_for_every_decision() -> None:
    async def go() -> None:
        api = LeaseApi()
        cache = WebhookCache(api, ((kinds.NAMESPACES, lambda o: dict(o)),), miss_memory=60)  # type: ignore[arg-type]
        await cache.start(timeout=5)
        ref = ObjectRef("Lease", "draq-system", "draq-operator")
        assert await cache.fetch((ref,)) is None  # absent: not remembered as missing
        api.lease = {**lease("draq-0", 4), "status": {"ignored": True}}
        first = await cache.fetch((ref,))
        assert first is not None and (first.lease(*LEASE_KEY) or {})["spec"]["leaseTransitions"] == 4
        api.lease = lease("draq-1", 5)
        second = await cache.fetch((ref,))
        assert second is not None and (second.lease(*LEASE_KEY) or {})["spec"]["holderIdentity"] == "draq-1"
        assert cache.lease(*LEASE_KEY) is None  # never kept in the shared cache
        assert api.gets.count(kinds.LEASES.object_path(*LEASE_KEY)) == 3
        await cache.stop()

    asyncio.run(go())
