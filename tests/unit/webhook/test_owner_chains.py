"""The mutating webhook labels pods with their group, size and queue from their owner chain."""

from __future__ import annotations

from typing import Any

from admission.core.labels import GROUP_LABEL, GROUP_MIN_LABEL, QUEUE_LABEL
from admission.core.models import ObjectRef
from admission.core.review import GatingPolicy, mutate
from admission.core.review.envelope import parse_review, render_response

from .builders import POD, FakeLookups, apply_patch, cluster, decode_patch, job_owner, pod, review

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
EVERY_KIND = GatingPolicy(workload_kinds=frozenset({"Job", "JobSet", "LeaderWorkerSet", "ReplicaSet", "Deployment"}))


def owned(api_version: str, kind: str, name: str) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}", "controller": True}


def with_jobset(lookups: FakeLookups, labels: dict[str, str] | None = None) -> FakeLookups:
    job = {"spec": {"parallelism": 2, "completions": 2},
           "metadata": {"name": "train-w-0", "ownerReferences": [owned(JOBSET_API, "JobSet", "train")]}}
    lookups.jobs[("team-a", "train-w-0")] = job
    lookups.owners[("JobSet", "team-a", "train")] = {
        "metadata": {"name": "train", "labels": labels or {}},
        "spec": {"replicatedJobs": [{"name": "w", "replicas": 3, "template": {"spec": {"parallelism": 2}}}]}}
    return lookups


def decide(obj: dict[str, Any], lookups: FakeLookups, policy: GatingPolicy = EVERY_KIND) -> tuple[dict[str, Any], Any]:
    decision = mutate(parse_review(review(POD, obj)), lookups, policy)
    return apply_patch(obj, decode_patch(render_response("u", decision))), decision


def test_jobset_pods_are_one_group_sized_by_the_jobset() -> None:
    result, _ = decide(pod("train-w-0-0", labels={QUEUE_LABEL: "gpu"}, owner=job_owner("train-w-0")),
                       with_jobset(cluster()))
    assert result["metadata"]["labels"][GROUP_LABEL] == "train"
    assert result["metadata"]["labels"][GROUP_MIN_LABEL] == "6"


def test_the_queue_label_on_the_top_level_object_reaches_every_pod() -> None:
    result, _ = decide(pod("train-w-0-0", owner=job_owner("train-w-0")), with_jobset(cluster(), {QUEUE_LABEL: "gpu"}))
    assert result["metadata"]["labels"][QUEUE_LABEL] == "gpu"


def test_jobset_integration_off_groups_by_job() -> None:
    policy = GatingPolicy(workload_kinds=frozenset({"Job"}))
    result, _ = decide(pod("p", labels={QUEUE_LABEL: "gpu"}, owner=job_owner("train-w-0")),
                       with_jobset(cluster()), policy)
    assert (result["metadata"]["labels"][GROUP_LABEL], result["metadata"]["labels"][GROUP_MIN_LABEL]) == (
        "train-w-0", "2")


def test_an_unreadable_parent_is_named_missing_and_the_group_waits_for_it() -> None:
    lookups = with_jobset(cluster())
    del lookups.owners[("JobSet", "team-a", "train")]
    result, decision = decide(pod("p", labels={QUEUE_LABEL: "gpu"}, owner=job_owner("train-w-0")), lookups)
    assert decision.missing == (ObjectRef("JobSet", "team-a", "train"),)
    assert result["metadata"]["labels"][GROUP_LABEL] == "train"
    assert any("JobSet team-a/train is not known to draq yet" in w for w in decision.warnings)


def test_leaderworkerset_worker_joins_its_replica_group() -> None:
    lookups = cluster()
    lookups.owners[("LeaderWorkerSet", "team-a", "serve")] = {
        "metadata": {"name": "serve"}, "spec": {"leaderWorkerTemplate": {"size": 3}}}
    labels = {QUEUE_LABEL: "gpu", "leaderworkerset.sigs.k8s.io/name": "serve",
              "leaderworkerset.sigs.k8s.io/group-index": "0", "leaderworkerset.sigs.k8s.io/worker-index": "2"}
    result, _ = decide(pod("serve-0-2", labels=labels, owner=owned("apps/v1", "StatefulSet", "serve-0")), lookups)
    assert (result["metadata"]["labels"][GROUP_LABEL], result["metadata"]["labels"][GROUP_MIN_LABEL]) == (
        "serve-0", "3")


def test_unknown_owner_kind_warns_and_the_pod_is_its_own_group() -> None:
    result, decision = decide(pod("w-1", labels={QUEUE_LABEL: "gpu"}, owner=owned("example.com/v1", "Widget", "w")),
                              cluster())
    assert result["metadata"]["labels"][GROUP_LABEL] == "w-1"
    assert any("Widget w (example.com/v1) is not a workload kind draq groups" in w for w in decision.warnings)


def test_a_group_label_that_contradicts_the_owner_chain_is_kept_and_warned_about() -> None:
    labels = {QUEUE_LABEL: "gpu", GROUP_LABEL: "mine"}
    result, decision = decide(pod("p", labels=labels, owner=job_owner("train-w-0")), with_jobset(cluster()))
    assert result["metadata"]["labels"][GROUP_LABEL] == "mine"
    assert any("contradicts the owner chain" in w and "'train'" in w for w in decision.warnings)
