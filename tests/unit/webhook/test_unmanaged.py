"""No silent bypass: what names a draq queue outside the namespaces draq manages is sent to the validating
webhook and refused, with the namespace label that would make draq manage it."""

from __future__ import annotations

from typing import Any

import pytest

from admission.core.labels import MIRROR_ANNOTATION, QUEUE_LABEL
from admission.core.review import GatingPolicy, validate
from admission.core.review.envelope import GroupVersionKind, ObjectRef
from admission.webhook.configurations import WebhookTarget, validating_configuration

from .builders import JOB, POD, cluster, pod, request
from .match_conditions import sent

POLICY = GatingPolicy()
JOBSET = GroupVersionKind("jobset.x-k8s.io", "v1alpha2", "JobSet")


def queue_labelled_webhook() -> dict[str, Any]:
    configuration = validating_configuration(WebhookTarget(url="https://127.0.0.1:9443"), b"", "draq-system")
    [webhook] = [w for w in configuration["webhooks"] if w["name"].startswith("queue-labelled.")]
    return webhook


def ns(name: str, **labels: str) -> dict[str, str]:
    return {"kubernetes.io/metadata.name": name, **labels}


@pytest.mark.parametrize(("namespace_labels", "expected"), [
    (ns("plain"), True),
    (ns("team", **{"draq.io/managed": "false"}), True),
    (ns("team", **{"draq.io/managed": "true"}), False),  # the managed scopes' webhooks see it
    (ns("team", **{"draq.io/default-queue": "q"}), False),
    (ns("kube-system"), False),
    (ns("draq-system"), False),
])
def test_queue_labelled_pods_are_sent_from_every_namespace_no_other_webhook_selects(
        namespace_labels: dict[str, str], expected: bool) -> None:
    webhook = queue_labelled_webhook()
    labelled = pod("x", labels={QUEUE_LABEL: "gpu"})
    assert sent(webhook, namespace_labels, "CREATE", labelled) is expected
    assert not sent(webhook, namespace_labels, "CREATE", pod("x", labels={"app": "web"}))


def test_the_webhook_fails_closed_and_covers_every_grouped_workload_kind_at_create() -> None:
    webhook = queue_labelled_webhook()
    assert webhook["failurePolicy"] == "Fail"
    resources = {(r["apiGroups"][0], r["resources"][0]) for r in webhook["rules"]}
    assert {("", "pods"), ("batch", "jobs"), ("jobset.x-k8s.io", "jobsets"), ("apps", "deployments")} <= resources
    assert all(r["operations"] == ["CREATE"] for r in webhook["rules"])


def test_a_queue_labelled_pod_of_an_unmanaged_namespace_is_refused_with_the_fix() -> None:
    decision = validate(request(POD, pod("x", namespace="plain", labels={QUEUE_LABEL: "gpu"})), cluster(), POLICY)
    assert not decision.allowed and decision.code == 403
    assert "Pod plain/x names draq queue 'gpu'" in decision.message
    assert "namespace 'plain' is not managed by draq" in decision.message
    assert "kubectl label namespace plain draq.io/managed=true" in decision.message
    assert f"remove the label {QUEUE_LABEL}" in decision.message
    assert decision.missing == (ObjectRef("Namespace", "", "plain"),)  # a fresh look before the answer


def test_a_mirror_pod_is_left_alone() -> None:
    mirror = pod("x", namespace="plain", labels={QUEUE_LABEL: "gpu"})
    mirror["metadata"]["annotations"] = {MIRROR_ANNOTATION: "hash"}
    assert validate(request(POD, mirror), cluster(), POLICY).allowed


def workload(kind: GroupVersionKind, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": f"{kind.group}/{kind.version}", "kind": kind.kind,
            "metadata": {"name": "train", "namespace": namespace, "labels": labels}, "spec": {}}


@pytest.mark.parametrize("kind", [JOB, JOBSET])
def test_a_queue_labelled_workload_of_an_unmanaged_namespace_is_refused(kind: GroupVersionKind) -> None:
    decision = validate(request(kind, workload(kind, "plain", {QUEUE_LABEL: "gpu"})), cluster(), POLICY)
    assert not decision.allowed
    assert f"{kind.kind} plain/train names draq queue 'gpu'" in decision.message


def test_workloads_without_a_queue_or_in_managed_namespaces_pass() -> None:
    assert validate(request(JOB, workload(JOB, "plain", {"app": "etl"})), cluster(), POLICY).allowed
    assert validate(request(JOB, workload(JOB, "team-a", {QUEUE_LABEL: "gpu"})), cluster(), POLICY).allowed
    assert validate(request(JOB, workload(JOB, "unknown", {QUEUE_LABEL: "gpu"})), cluster(), POLICY).missing
