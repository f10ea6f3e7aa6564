"""The workload controllers of the local kit, without draq: each makes the object graph draq groups by.

KubeRay's ray-operator and Kubeflow's training-operator are the real ones (built from the Go module proxy);
JobSet and LeaderWorkerSet run as stand-ins (`admission.localcluster.standins`). These tests pin the owner
chains and labels that draq's workload kinds read, so a change in a controller shows here first.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client

from admission.localcluster.controlplane import ControlPlane
from admission.localcluster.integrations import WorkloadControllers

POD = {"containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "10m"}}}]}
JOB_POD = {"template": {"spec": {**POD, "restartPolicy": "Never"}}}
NOWHERE_POD = {"template": {"spec": {**POD, "restartPolicy": "Never", "nodeSelector": {"example.com/none": "x"}}}}


@pytest.fixture(scope="module")
def workload_controllers(control_plane: ControlPlane, api: Any) -> Iterator[WorkloadControllers]:
    with WorkloadControllers(control_plane, api) as running:
        yield running


def _apply(plane: ControlPlane, manifest: dict[str, Any]) -> None:
    plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))


def _pods(api: Any, namespace: str, selector: str = "") -> list[Any]:
    return list(client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=selector).items)


def _until(what: str, probe: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def _owner(obj: Any) -> tuple[str, str]:
    refs = [r for r in obj.metadata.owner_references or [] if r.controller]
    assert len(refs) == 1, obj.metadata.owner_references
    return refs[0].kind, refs[0].name


def test_jobset_makes_one_owned_job_per_replica(
        control_plane: ControlPlane, api: Any, namespace: str, workload_controllers: WorkloadControllers) -> None:
    _apply(control_plane, {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "train", "namespace": namespace},
        "spec": {"replicatedJobs": [
            {"name": "launcher", "template": {"spec": {"parallelism": 1, "completions": 1, **JOB_POD}}},
            {"name": "workers", "replicas": 2,
             "template": {"spec": {"parallelism": 2, "completions": 2, **JOB_POD}}}]}})
    jobs = _until("3 child Jobs", lambda: (lambda items: items if len(items) == 3 else None)(
        client.BatchV1Api(api).list_namespaced_job(namespace).items))
    assert sorted(j.metadata.name for j in jobs) == ["train-launcher-0", "train-workers-0", "train-workers-1"]
    assert {_owner(j) for j in jobs} == {("JobSet", "train")}
    pods = _until("5 pods", lambda: (lambda p: p if len(p) == 5 else None)(_pods(api, namespace)))
    assert {(p.metadata.labels["jobset.sigs.k8s.io/jobset-name"], _owner(p)[0]) for p in pods} == {("train", "Job")}
    workload_controllers.check()


def test_jobset_in_order_waits_for_ready_jobs(
        control_plane: ControlPlane, api: Any, namespace: str, workload_controllers: WorkloadControllers) -> None:
    _apply(control_plane, {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "ordered", "namespace": namespace},
        "spec": {"startupPolicy": {"startupPolicyOrder": "InOrder"}, "replicatedJobs": [
            {"name": "first", "template": {"spec": NOWHERE_POD}}, {"name": "second", "template": {"spec": JOB_POD}}]}})
    _until("the first Job", lambda: client.BatchV1Api(api).list_namespaced_job(namespace).items)
    time.sleep(2)  # no node can run the first Job's pod: the second must not appear
    assert [j.metadata.name for j in client.BatchV1Api(api).list_namespaced_job(namespace).items] == ["ordered-first-0"]


def test_leader_worker_set_makes_a_worker_set_per_leader(control_plane: ControlPlane, api: Any, namespace: str,
                                                         workload_controllers: WorkloadControllers) -> None:
    _apply(control_plane, {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "serve", "namespace": namespace},
        "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 3, "workerTemplate": {"spec": POD}}}})
    pods = _until("6 pods", lambda: (lambda p: p if len(p) == 6 else None)(_pods(api, namespace)))
    leaders = [p for p in pods if _owner(p) == ("StatefulSet", "serve")]
    assert sorted(p.metadata.labels["apps.kubernetes.io/pod-index"] for p in leaders) == ["0", "1"]
    for index in ("0", "1"):
        workers = [p for p in pods if _owner(p) == ("StatefulSet", f"serve-{index}")]
        assert len(workers) == 2
        assert {p.metadata.labels["leaderworkerset.sigs.k8s.io/group-index"] for p in workers} == {index}
        worker_set = client.AppsV1Api(api).read_namespaced_stateful_set(f"serve-{index}", namespace)
        assert _owner(worker_set) == ("Pod", f"serve-{index}")


def test_pytorchjob_pods_are_owned_by_the_job(control_plane: ControlPlane, api: Any, namespace: str,
                                             workload_controllers: WorkloadControllers) -> None:
    container = {"name": "pytorch", "image": "pytorch", "resources": {"requests": {"cpu": "10m"}}}
    _apply(control_plane, {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "ddp", "namespace": namespace},
        "spec": {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": {"spec": {"containers": [container]}}},
            "Worker": {"replicas": 2, "template": {"spec": {"containers": [container]}}}}}})
    pods = _until("3 PyTorchJob pods", lambda: (lambda p: p if len(p) == 3 else None)(_pods(api, namespace)),
                  timeout=90)
    assert {_owner(p) for p in pods} == {("PyTorchJob", "ddp")}
    assert {p.metadata.labels["training.kubeflow.org/replica-type"] for p in pods} == {"master", "worker"}
    workload_controllers.check()


def test_raycluster_pods_are_owned_by_the_cluster(control_plane: ControlPlane, api: Any, namespace: str,
                                                 workload_controllers: WorkloadControllers) -> None:
    container = {"name": "ray", "image": "rayproject/ray", "resources": {"requests": {"cpu": "10m"}}}
    _apply(control_plane, {
        "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc", "namespace": namespace},
        "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [container]}}},
                 "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "minReplicas": 2, "maxReplicas": 2,
                                       "rayStartParams": {}, "template": {"spec": {"containers": [container]}}}]}})
    pods = _until("3 Ray pods", lambda: (lambda p: p if len(p) == 3 else None)(_pods(api, namespace)), timeout=90)
    assert {_owner(p) for p in pods} == {("RayCluster", "rc")}
    assert sorted(p.metadata.labels["ray.io/node-type"] for p in pods) == ["head", "worker", "worker"]
    workload_controllers.check()
