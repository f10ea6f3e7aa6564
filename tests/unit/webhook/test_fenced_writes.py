"""The fence on draq's releases, evictions and suspensions: a pod UPDATE or DELETE, or an UPDATE of a
workload kind draq suspends (a Job, JobSet, RayCluster, PyTorchJob, ...), by
draq's own user must carry (for a DELETE: the pod being deleted must carry) the epoch the Lease stands
for now in the annotation draq.io/epoch; others' writes and unstamped writes are not the fence's."""

from __future__ import annotations

import json
from typing import Any

import pytest

from admission.core.labels import DEFAULT_DRAQ_USER, EPOCH_ANNOTATION, GATE, QUEUE_LABEL
from admission.core.review import GatingPolicy, validate
from admission.core.review.envelope import AdmissionRequest, GroupVersionKind, ReviewBuilder, parse_review
from admission.webhook.configurations import WebhookTarget, configurations

from .match_conditions import conditions_hold
from .test_fence import epoch, lease, lookups

POD = GroupVersionKind("", "v1", "Pod")
JOB = GroupVersionKind("batch", "v1", "Job")
POLICY = GatingPolicy()
CURRENT = lease("draq-1", 5)


def pod(stamp: dict[str, Any] | str | None, gated: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "train-0", "namespace": "team", "labels": {QUEUE_LABEL: "lq"}}
    if stamp is not None:
        meta["annotations"] = {EPOCH_ANNOTATION: stamp if isinstance(stamp, str) else json.dumps(stamp)}
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "x"}]}
    if gated:
        spec["schedulingGates"] = [{"name": GATE}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def job(stamp: dict[str, Any] | None, suspend: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "train", "namespace": "team"}
    if stamp is not None:
        meta["annotations"] = {EPOCH_ANNOTATION: json.dumps(stamp)}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {"suspend": suspend}}


def review(kind: GroupVersionKind, resource: str, operation: str, new: dict[str, Any] | None,
           old: dict[str, Any] | None, username: str = DEFAULT_DRAQ_USER) -> AdmissionRequest:
    builder = ReviewBuilder(kind, resource, operation, "team", username)
    return parse_review(builder.build("uid-1", new, old, name=str((new or old or {})["metadata"]["name"])))


def release(stamp: dict[str, Any] | None, username: str = DEFAULT_DRAQ_USER) -> AdmissionRequest:
    return review(POD, "pods", "UPDATE", pod(stamp), pod(None, gated=True), username)


def test_a_release_under_the_current_epoch_is_allowed() -> None:
    assert validate(release(epoch("draq-1", 5)), lookups(CURRENT), POLICY).allowed


def test_a_release_by_a_deposed_leader_is_refused() -> None:
    decision = validate(release(epoch("draq-0", 4)), lookups(CURRENT), POLICY)
    assert not decision.allowed and decision.code == 409
    assert decision.message.startswith("Pod team/train-0: update written under the leadership of draq-0 "
                                        "(lease transition 4), which has ended")
    assert "held by draq-1 (lease transition 5)" in decision.message


def test_a_deletion_is_judged_by_the_stamp_on_the_pod_being_deleted() -> None:
    def delete(stamp: dict[str, Any] | None) -> AdmissionRequest:
        return review(POD, "pods", "DELETE", None, pod(stamp))
    assert validate(delete(epoch("draq-1", 5)), lookups(CURRENT), POLICY).allowed
    refused = validate(delete(epoch("draq-0", 4)), lookups(CURRENT), POLICY)
    assert not refused.allowed and refused.code == 409 and "deletion written under" in refused.message
    assert validate(delete(None), lookups(), POLICY).allowed  # without leader election


def test_a_suspension_by_a_deposed_leader_is_refused() -> None:
    def suspend(stamp: dict[str, Any]) -> AdmissionRequest:
        return review(JOB, "jobs", "UPDATE", job(stamp, True), job(None, False))
    assert validate(suspend(epoch("draq-1", 5)), lookups(CURRENT), POLICY).allowed
    refused = validate(suspend(epoch("draq-1", 4)), lookups(CURRENT), POLICY)
    assert not refused.allowed and refused.message.startswith("Job team/train: update written under")


@pytest.mark.parametrize(("api_version", "kind", "resource", "spec"), [
    ("jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets", {"suspend": True}),
    ("ray.io/v1", "RayCluster", "rayclusters", {"suspend": True}),
    ("kubeflow.org/v1", "PyTorchJob", "pytorchjobs", {"runPolicy": {"suspend": True}}),
])
def test_a_suspension_of_a_workload_kind_by_a_deposed_leader_is_refused(
        api_version: str, kind: str, resource: str, spec: dict[str, Any]) -> None:
    group, _, version = api_version.rpartition("/")
    def suspend(stamp: dict[str, Any]) -> AdmissionRequest:
        meta = {"name": "train", "namespace": "team", "annotations": {EPOCH_ANNOTATION: json.dumps(stamp)}}
        new = {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec}
        old = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "train", "namespace": "team"}}
        return review(GroupVersionKind(group, version, kind), resource, "UPDATE", new, old)
    assert validate(suspend(epoch("draq-1", 5)), lookups(CURRENT), POLICY).allowed
    refused = validate(suspend(epoch("draq-0", 4)), lookups(CURRENT), POLICY)
    assert not refused.allowed and refused.code == 409
    assert refused.message.startswith(f"{kind} team/train: update written under")


def test_a_lease_that_cannot_be_read_refuses_the_write() -> None:
    decision = validate(release(epoch("draq-1", 5)), lookups(), POLICY)
    assert not decision.allowed and decision.code == 503 and decision.missing


def test_writes_the_fence_does_not_judge() -> None:
    assert validate(release(None), lookups(), POLICY).allowed  # draq without leader election
    # Anyone else's update of a stamped pod is judged by the pod rules alone (here: an admitted pod).
    other = review(POD, "pods", "UPDATE", pod(epoch("draq-0", 4)), pod(epoch("draq-0", 4)), "alice")
    assert validate(other, lookups(CURRENT), POLICY).allowed
    deletion = review(POD, "pods", "DELETE", None, pod(epoch("draq-0", 4)), "alice")
    assert validate(deletion, lookups(CURRENT), POLICY).allowed


@pytest.mark.parametrize("stamp", ["not json", json.dumps({"holder": "draq-0"})])
def test_a_malformed_stamp_is_refused_naming_the_annotation(stamp: str) -> None:
    request = review(POD, "pods", "UPDATE", pod(stamp), pod(None, gated=True))
    decision = validate(request, lookups(CURRENT), POLICY)
    assert not decision.allowed and decision.code == 422
    assert f"metadata.annotations[{EPOCH_ANNOTATION}]" in decision.message


def fenced_writes_webhook() -> dict[str, Any]:
    [found] = [w for c in configurations(WebhookTarget(url="https://127.0.0.1:9443"), b"CA", "draq-system")
               for w in c["webhooks"] if w["name"].startswith("fenced-writes.")]
    return found


def test_the_webhook_is_called_for_draqs_stamped_pod_and_job_writes_and_fails_closed() -> None:
    webhook = fenced_writes_webhook()
    assert webhook["failurePolicy"] == "Fail"
    assert [(r["apiGroups"], r["resources"], r["operations"]) for r in webhook["rules"]] == [
        ([""], ["pods"], ["UPDATE", "DELETE"]), (["batch"], ["jobs"], ["UPDATE"]),
        (["jobset.x-k8s.io"], ["jobsets"], ["UPDATE"]), (["trainer.kubeflow.org"], ["trainjobs"], ["UPDATE"]),
        (["kubeflow.org"], ["pytorchjobs"], ["UPDATE"]), (["kubeflow.org"], ["mpijobs"], ["UPDATE"]),
        (["ray.io"], ["rayclusters"], ["UPDATE"]), (["ray.io"], ["rayjobs"], ["UPDATE"])]
    assert "draq-system" in webhook["namespaceSelector"]["matchExpressions"][0]["values"]
    stamped, bare = pod(epoch()), pod(None, gated=True)
    assert conditions_hold(webhook, "UPDATE", stamped, bare, DEFAULT_DRAQ_USER)
    assert conditions_hold(webhook, "DELETE", None, stamped, DEFAULT_DRAQ_USER)
    assert conditions_hold(webhook, "UPDATE", job(epoch(), True), job(None, False), DEFAULT_DRAQ_USER)
    assert not conditions_hold(webhook, "UPDATE", bare, stamped, DEFAULT_DRAQ_USER)  # the stamp removed
    assert not conditions_hold(webhook, "DELETE", None, bare, DEFAULT_DRAQ_USER)
    assert not conditions_hold(webhook, "UPDATE", stamped, bare, "alice")
