"""A Job or JobSet whose pods together ask for more devices than their queue could ever hold is refused at
creation; the webhook reads the claim templates its pods name for that decision."""

from __future__ import annotations

from typing import Any

from admission.core.labels import QUEUE_LABEL
from admission.core.review import GatingPolicy, validate
from admission.core.review.envelope import Decision, GroupVersionKind, ObjectRef

from .builders import JOB, FakeLookups, cluster, request
from .test_claim_warnings import four_h100, lookups

JOBSET = GroupVersionKind("jobset.x-k8s.io", "v1alpha2", "JobSet")


def pod_template(template: str = "four-h100") -> dict[str, Any]:
    return {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "resources": {"claims": [{"name": "g"}]}}],
                     "resourceClaims": [{"name": "g", "resourceClaimTemplateName": template}]}}


def job(parallelism: int, completions: int | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"parallelism": parallelism, "template": pod_template()}
    if completions is not None:
        spec["completions"] = completions
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "team-b", "labels": labels or {}}, "spec": spec}


def jobset(replicas: int, parallelism: int) -> dict[str, Any]:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "train", "namespace": "team-b"},
            "spec": {"replicatedJobs": [{"name": "w", "replicas": replicas,
                                         "template": {"spec": {"parallelism": parallelism,
                                                               "template": pod_template()}}}]}}


def with_template(found: FakeLookups) -> FakeLookups:
    found.templates[("team-b", "four-h100")] = four_h100()
    return found


def check(kind: GroupVersionKind, obj: dict[str, Any], found: FakeLookups) -> Decision:
    return validate(request(kind, obj), found, GatingPolicy())


def test_a_job_whose_pods_together_exceed_the_queue_is_refused_with_the_sum() -> None:
    decision = check(JOB, job(5), with_template(lookups(gpus=16)))  # 5 pods x 4 GPUs on a queue of 16
    assert not decision.allowed
    assert decision.message.startswith("Job team-b/train could never be admitted by LocalQueue 'batch' "
                                       "(ClusterQueue research): gpus: its 5 pods ask for 20 together, the queue can "
                                       "hold at most 16")
    assert "Run fewer pods or ask for fewer devices per pod" in decision.message


def test_a_job_that_fits_and_a_jobset_over_the_queue() -> None:
    assert check(JOB, job(4), with_template(lookups(gpus=16))).allowed
    assert check(JOB, job(8, completions=4), with_template(lookups(gpus=16))).allowed  # never more than 4 at once
    decision = check(JOBSET, jobset(2, 3), with_template(lookups(gpus=16)))  # 6 pods x 4
    assert not decision.allowed and "its 6 pods ask for 24 together" in decision.message


def test_a_template_not_known_yet_is_read_and_one_that_does_not_exist_tells_nothing() -> None:
    decision = check(JOB, job(5), lookups(gpus=16))
    assert decision.allowed and decision.missing == (ObjectRef("ResourceClaimTemplate", "team-b", "four-h100"),)


def test_without_a_queue_it_can_name_the_pods_are_checked_later() -> None:
    found = with_template(cluster())  # team-a: opt-in namespace, the Job names no queue
    unlabelled = {**job(50), "metadata": {"name": "train", "namespace": "team-a"}}
    assert check(JOB, unlabelled, found).allowed
    labelled = {**job(50), "metadata": {"name": "train", "namespace": "team-a", "labels": {QUEUE_LABEL: "nope"}}}
    assert check(JOB, labelled, found).allowed


def test_jobs_and_jobsets_of_managed_namespaces_are_sent_failing_open() -> None:
    from admission.webhook.configurations import WebhookTarget, validating_configuration

    from .match_conditions import sent

    configuration = validating_configuration(WebhookTarget(url="https://127.0.0.1:9443"), b"", "draq-system")
    hooks = [w for w in configuration["webhooks"] if w["name"].startswith("workloads.")]
    assert len(hooks) == 2 and all(w["failurePolicy"] == "Ignore" for w in hooks)
    assert all({(r["apiGroups"][0], r["resources"][0]) for r in w["rules"]} == {
        ("batch", "jobs"), ("jobset.x-k8s.io", "jobsets")} for w in hooks)
    default_queue = {"kubernetes.io/metadata.name": "team-b", "draq.io/default-queue": "batch"}
    opt_in = {"kubernetes.io/metadata.name": "team-a", "draq.io/managed": "true"}
    assert sum(sent(w, default_queue, "CREATE", job(1)) for w in hooks) == 1
    assert sum(sent(w, opt_in, "CREATE", job(1)) for w in hooks) == 0  # names no queue: its pods are checked
    assert sum(sent(w, opt_in, "CREATE", job(1, labels={QUEUE_LABEL: "gpu"})) for w in hooks) == 1
