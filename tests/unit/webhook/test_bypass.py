"""The gate cannot be bypassed in two steps: drop the queue label, then drop the gate.

Both steps are checked twice: the decision (the validating webhook denies them) and the webhook
configuration (the API server sends them to the validating webhook at all).
"""

from __future__ import annotations

from typing import Any

import pytest

from admission.core.labels import DEFAULT_DRAQ_USER, GATE, GROUP_LABEL, GROUP_MIN_LABEL, QUEUE_LABEL
from admission.core.review import GatingPolicy, validate
from admission.core.review.envelope import Decision
from admission.webhook.configurations import WebhookTarget, validating_configuration

from .builders import POD, FakeLookups, cluster, pod, request
from .match_conditions import sent

POLICY = GatingPolicy()
NAMESPACES = {
    "team-a": {"kubernetes.io/metadata.name": "team-a", "draq.io/managed": "true"},
    "team-b": {"kubernetes.io/metadata.name": "team-b", "draq.io/default-queue": "batch"},
}
QUEUES = {"team-a": "gpu", "team-b": "batch"}


def gated(namespace: str, **labels: str) -> dict[str, Any]:
    """A pod as the mutating webhook leaves it, with `labels` changed (an empty value removes a label)."""
    base = {QUEUE_LABEL: QUEUES[namespace], GROUP_LABEL: "g", GROUP_MIN_LABEL: "1", "app": "train"}
    merged = {k: v for k, v in {**base, **labels}.items() if v}
    return pod("x", namespace=namespace, labels=merged, gates=[GATE])


def without_gate(obj: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "spec": {**obj["spec"], "schedulingGates": []}}


def update(old: dict[str, Any], new: dict[str, Any], username: str = "alice",
           lookups: FakeLookups | None = None) -> Decision:
    return validate(request(POD, new, operation="UPDATE", old=old, username=username), lookups or cluster(), POLICY)


def pod_validators() -> list[dict[str, Any]]:
    configuration = validating_configuration(WebhookTarget(url="https://127.0.0.1:9443"), b"", "draq-system")
    return [w for w in configuration["webhooks"] if w["rules"][0]["resources"] == ["pods"]]


def validators_sent(namespace: str, old: dict[str, Any], new: dict[str, Any], username: str = "alice") -> int:
    return sum(sent(w, NAMESPACES[namespace], "UPDATE", new, old, username) for w in pod_validators())


@pytest.mark.parametrize("namespace", ["team-a", "team-b"])
def test_step_one_removing_the_queue_label_of_a_gated_pod_is_sent_and_denied(namespace: str) -> None:
    old = gated(namespace)
    for new in (gated(namespace, **{QUEUE_LABEL: ""}), pod("x", namespace=namespace, gates=[GATE])):
        assert validators_sent(namespace, old, new) == 1
        decision = update(old, new)
        assert not decision.allowed and decision.code == 403
        assert f"label {QUEUE_LABEL} cannot be removed" in decision.message
        assert f"LocalQueue {QUEUES[namespace]!r}" in decision.message
        assert "delete the pod and create it again" in decision.message


def test_an_empty_queue_label_counts_as_removed() -> None:
    old = gated("team-a")
    new = pod("x", labels={**old["metadata"]["labels"], QUEUE_LABEL: ""}, gates=[GATE])
    decision = update(old, new)
    assert not decision.allowed and "cannot be removed" in decision.message


@pytest.mark.parametrize("namespace", ["team-a", "team-b"])
def test_changing_the_queue_of_a_gated_pod_is_denied_even_to_an_existing_queue(namespace: str) -> None:
    lookups = cluster().with_queue(namespace, "other")
    decision = update(gated(namespace), gated(namespace, **{QUEUE_LABEL: "other"}), lookups=lookups)
    assert not decision.allowed
    assert f"label {QUEUE_LABEL} cannot be changed to 'other'" in decision.message


@pytest.mark.parametrize("namespace", ["team-a", "team-b"])
def test_step_two_removing_the_gate_of_a_pod_without_a_queue_label_is_sent_and_denied(namespace: str) -> None:
    # A gated pod without the queue label: left over from before this rule, or created so by hand.
    old = pod("x", namespace=namespace, labels={"app": "train"}, gates=[GATE])
    new = without_gate(old)
    assert validators_sent(namespace, old, new) == 1
    decision = update(old, new)
    assert not decision.allowed and decision.code == 403
    assert f"only draq ({DEFAULT_DRAQ_USER}) removes the gate {GATE}" in decision.message
    assert "names no queue" in decision.message and f"label {QUEUE_LABEL} naming a LocalQueue" in decision.message


def test_step_two_is_denied_whatever_the_labels_and_other_gates() -> None:
    old = pod("x", labels={"app": "a"}, gates=["other.io/wait", GATE])
    new = pod("x", labels={}, gates=["other.io/wait"])
    assert not update(old, new).allowed
    assert update(old, pod("x", labels={}, gates=[GATE])).allowed  # only the other gate went


def test_draq_may_remove_the_gate_and_its_requests_are_not_sent() -> None:
    old = pod("x", namespace="team-b", gates=[GATE])
    assert update(old, without_gate(old), username=DEFAULT_DRAQ_USER).allowed
    assert validators_sent("team-b", old, without_gate(old), username=DEFAULT_DRAQ_USER) == 0


def test_both_steps_in_a_row_leave_the_pod_gated() -> None:
    """What a tenant could do before: each step as the API server would route and the webhook decide."""
    current = gated("team-a")
    for step in (gated("team-a", **{QUEUE_LABEL: ""}), without_gate(gated("team-a", **{QUEUE_LABEL: ""}))):
        reviewed = validators_sent("team-a", current, step) > 0
        if not reviewed or update(current, step).allowed:
            current = step
    assert GATE in [g["name"] for g in current["spec"]["schedulingGates"]]
    assert current["metadata"]["labels"][QUEUE_LABEL] == "gpu"


def test_a_gated_pod_without_a_queue_may_get_an_existing_one_only() -> None:
    old = pod("x", labels={"app": "train"}, gates=[GATE])
    assert update(old, pod("x", labels={QUEUE_LABEL: "gpu"}, gates=[GATE])).allowed
    decision = update(old, pod("x", labels={QUEUE_LABEL: "nope"}, gates=[GATE]))
    assert not decision.allowed and "LocalQueue 'nope'" in decision.message


def test_other_updates_of_gated_pods_pass() -> None:
    old = gated("team-a")
    assert update(old, gated("team-a", app="serve", **{GROUP_LABEL: "h", GROUP_MIN_LABEL: "2"})).allowed
    bad_size = update(old, gated("team-a", **{GROUP_MIN_LABEL: "zero"}))
    assert not bad_size.allowed and GROUP_MIN_LABEL in bad_size.message


def test_updates_of_pods_draq_never_gated_are_not_sent() -> None:
    plain = pod("x", namespace="team-a", labels={"app": "a"}, gates=["other.io/wait"])
    assert validators_sent("team-a", plain, without_gate(plain)) == 0
    # In a default-queue namespace neither: a pod that never had the gate nor the label (a mirror pod).
    assert validators_sent("team-b", plain, without_gate(plain)) == 0
