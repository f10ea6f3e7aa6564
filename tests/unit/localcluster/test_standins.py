"""The stand-in JobSet and LeaderWorkerSet controllers' object graph, without a cluster."""

from __future__ import annotations

from typing import Any

from admission.localcluster.standins import child_jobs, leader_statefulset, worker_statefulset

POD = {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}


def _jobset(order: str = "AnyOrder", suspend: bool = False) -> dict[str, Any]:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "train", "namespace": "ns", "uid": "u1"},
            "spec": {"suspend": suspend, "startupPolicy": {"startupPolicyOrder": order}, "replicatedJobs": [
                {"name": "launcher", "template": {"spec": {"template": POD}}},
                {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 4, "template": POD}}}]}}


def test_every_replicated_job_gets_its_jobs_owned_and_labelled() -> None:
    jobs = child_jobs(_jobset(), {})
    assert [j["metadata"]["name"] for j in jobs] == ["train-launcher-0", "train-workers-0", "train-workers-1"]
    owner = jobs[0]["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("JobSet", "train", "u1", True)
    pod_labels = jobs[2]["spec"]["template"]["metadata"]["labels"]
    assert pod_labels == {"jobset.sigs.k8s.io/jobset-name": "train", "jobset.sigs.k8s.io/replicatedjob-name": "workers",
                          "jobset.sigs.k8s.io/replicatedjob-replicas": "2", "jobset.sigs.k8s.io/job-index": "1"}
    assert jobs[2]["spec"]["parallelism"] == 4


def test_in_order_stops_at_the_first_replicated_job_not_ready() -> None:
    assert [j["metadata"]["name"] for j in child_jobs(_jobset("InOrder"), {})] == ["train-launcher-0"]
    ready = {"train-launcher-0": True}
    assert len(child_jobs(_jobset("InOrder"), ready)) == 3


def test_suspend_is_copied_to_every_child_job() -> None:
    assert {j["spec"]["suspend"] for j in child_jobs(_jobset(suspend=True), {})} == {True}


def test_leader_and_worker_sets() -> None:
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
           "metadata": {"name": "serve", "namespace": "ns", "uid": "u2"},
           "spec": {"replicas": 3, "leaderWorkerTemplate": {"size": 4, "workerTemplate": POD}}}
    leaders = leader_statefulset(lws)
    assert (leaders["metadata"]["name"], leaders["spec"]["replicas"]) == ("serve", 3)
    assert leaders["metadata"]["ownerReferences"][0]["kind"] == "LeaderWorkerSet"
    leader_pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "serve-1", "uid": "p1"}}
    workers = worker_statefulset(lws, leader_pod, 1)
    assert (workers["metadata"]["name"], workers["spec"]["replicas"]) == ("serve-1", 3)
    assert workers["spec"]["ordinals"] == {"start": 1}  # pods serve-1-1 to serve-1-3, as the real controller's
    assert workers["metadata"]["ownerReferences"][0]["name"] == "serve-1"
    assert workers["spec"]["template"]["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-index"] == "1"
