"""Gangs of the workload controllers teams run, with draq in the loop (webhook and operator: `draq run`).

The real KubeRay and Kubeflow training operators and the stand-in JobSet and LeaderWorkerSet controllers
(`admission.localcluster.integrations`) create the pods; the user writes only a queue label on the
top-level object. Each test checks what a user sees: the whole group released or none of it, replica
groups admitted one by one, in-order startup served (also when a LimitRange changed every member, so none
matches its role template), eviction through the owner. Not proven here yet
(docs/limitations.md): PyTorchJob gangs with DRA claims (the v1.8.1 CRD's pod schema predates them).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from admission.core.labels import GATE, MANAGED_LABEL, QUEUE_LABEL
from admission.localcluster.controlplane import ControlPlane
from admission.localcluster.integrations import WorkloadControllers
from admission.localcluster.nodesim import NodeSimulator
from e2e.draq_process import DraqProcess
from e2e.test_metrics import service_account_kubeconfig, start_draq
from e2e.test_operator import GPU_CLASS, apply, crds
from e2e.waiting import until

__all__ = ["crds"]
HOLD = "example.com/hold"  # another controller's gate: draq releases its own, the pod still cannot bind


INTEGRATIONS = ",".join(("batch/job", "jobset.x-k8s.io/jobset", "leaderworkerset.x-k8s.io/leaderworkerset",
                          "kubeflow.org/pytorchjob", "ray.io/raycluster"))


def draq_with(control_plane: ControlPlane, integrations: str, prefix: str) -> Iterator[DraqProcess]:
    """draq as the chart's ServiceAccount with these integrations on, for a module's tests."""
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    process = start_draq(service_account_kubeconfig(control_plane, directory), directory / "draq.log",
                         "--integrations", integrations)
    yield process
    process.stop()


@pytest.fixture(scope="module")
def draq(control_plane: ControlPlane, crds: None, controllers: WorkloadControllers) -> Iterator[DraqProcess]:
    yield from draq_with(control_plane, INTEGRATIONS, "draq-workloads-")


@pytest.fixture(scope="module")
def controllers(control_plane: ControlPlane, api: Any) -> Iterator[WorkloadControllers]:
    with WorkloadControllers(control_plane, api) as running:
        yield running


@pytest.fixture
def setting(control_plane: ControlPlane, nodesim: NodeSimulator, namespace: str, unique: str,
            draq: DraqProcess, controllers: WorkloadControllers) -> str:
    """A managed namespace with a GPU claim template `gpu` (1 GPU) and two 8-GPU nodes; the ClusterQueue's name
    (nominal 0 GPUs until `quota` sets it)."""
    control_plane.kubectl("label", "namespace", namespace, f"{MANAGED_LABEL}=true")
    for node in (f"wl-{unique}-a", f"wl-{unique}-b"):
        nodesim.add_node(node, "h100")
    unit, cq = f"gpus-{unique}", f"cq-{unique}"
    apply(control_plane,
          {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
           "metadata": {"name": "gpu", "namespace": namespace},
           "spec": {"spec": {"devices": {"requests": [
               {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": 1}}]}}}},
          {"apiVersion": "draq.io/v1alpha1", "kind": "QuotaUnit", "metadata": {"name": unit},
           "spec": {"devices": {"deviceClassNames": [GPU_CLASS]}}})
    until("the QuotaUnit", lambda: control_plane.kubectl("apply", "-f", "-", check=False, input=_json(
        {"apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": cq},
         "spec": {"namespaceSelector": {}, "quotas": [{"unit": unit, "nominal": 0}]}})).returncode == 0, timeout=20)
    until("the ClusterQueue", lambda: control_plane.kubectl("apply", "-f", "-", check=False, input=_json(
        {"apiVersion": "draq.io/v1alpha1", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": namespace},
         "spec": {"clusterQueue": cq}})).returncode == 0, timeout=20)
    return cq


def _json(obj: dict[str, Any]) -> str:
    return json.dumps(obj)


def quota(api: Any, cq: str, gpus: int) -> None:
    client.CustomObjectsApi(api).patch_cluster_custom_object(
        "draq.io", "v1alpha1", "clusterqueues", cq, {"spec": {"quotas": [{"unit": f"gpus-{cq[3:]}", "nominal": gpus}]}})


def gpu_pod(*, hold: bool = False, name: str = "main") -> dict[str, Any]:
    """A pod spec with one container using one GPU from the claim template `gpu`."""
    spec: dict[str, Any] = {
        "containers": [{"name": name, "image": "registry.example/cuda:12",
                        "resources": {"requests": {"cpu": "100m"}, "claims": [{"name": "gpu"}]}}],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]}
    if hold:
        spec["schedulingGates"] = [{"name": HOLD}]
    return spec


def pods(api: Any, namespace: str) -> list[Any]:
    return list(client.CoreV1Api(api).list_namespaced_pod(namespace).items)


def is_gated(pod: Any) -> bool:
    return GATE in [g.name for g in pod.spec.scheduling_gates or []]


def running(api: Any, namespace: str) -> list[Any]:
    return [p for p in pods(api, namespace) if p.status.phase == "Running" and p.spec.node_name]


def jobset(namespace: str, name: str, *, workers: int = 2, per_job: int = 2, in_order: bool = False,
           hold: bool = False) -> dict[str, Any]:
    """A launcher Job of one pod and `workers` worker Jobs of `per_job` pods, every pod with one GPU."""
    def job(parallelism: int) -> dict[str, Any]:
        return {"spec": {"parallelism": parallelism, "completions": parallelism, "backoffLimit": 0,
                         "template": {"spec": {**gpu_pod(hold=hold), "restartPolicy": "Never"}}}}
    spec: dict[str, Any] = {"replicatedJobs": [{"name": "launcher", "replicas": 1, "template": job(1)},
                                               {"name": "workers", "replicas": workers, "template": job(per_job)}]}
    if in_order:
        spec["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: "lq"}}, "spec": spec}


def leader_worker_set(namespace: str, name: str, *, replicas: int, size: int, leader_ready: bool = False
                      ) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicas": replicas,
                            "leaderWorkerTemplate": {"size": size, "workerTemplate": {"spec": gpu_pod()}}}
    if leader_ready:
        spec["startupPolicy"] = "LeaderReady"
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: "lq"}}, "spec": spec}


def test_jobset_is_admitted_whole_or_not_at_all(control_plane: ControlPlane, api: Any, namespace: str,
                                                setting: str) -> None:
    quota(api, setting, 4)
    # 5 pods of 1 GPU on a queue of 4: the webhook already tells at creation (the webhook's cache may be a
    # moment behind the quota it was just given: refused within a few tries).
    refused = until("the JobSet to be refused at creation", lambda: control_plane.kubectl(
        "create", "-f", "-", check=False, input=json.dumps(jobset(namespace, "train"))),
        accept=lambda r: r.returncode != 0, timeout=30)
    assert f"JobSet {namespace}/train could never be admitted by LocalQueue 'lq'" in refused.stderr
    assert "its 5 pods ask for 5 together, the queue can hold at most 4" in refused.stderr
    assert pods(api, namespace) == []
    quota(api, setting, 5)
    until("the JobSet to be accepted on a queue of 5", lambda: control_plane.kubectl(
        "create", "-f", "-", check=False, input=json.dumps(jobset(namespace, "train"))),
        accept=lambda r: r.returncode == 0, timeout=30)
    created = until("the JobSet's 5 pods, gated or bound", lambda: pods(api, namespace),
                    accept=lambda found: len(found) == 5, timeout=60)
    assert created
    bound = until("all 5 pods bound", lambda: running(api, namespace), accept=lambda r: len(r) == 5, timeout=60)
    assert {p.metadata.owner_references[0].kind for p in bound} == {"Job"}


def test_leader_worker_set_is_admitted_replica_group_by_replica_group(
        control_plane: ControlPlane, api: Any, namespace: str, setting: str) -> None:
    quota(api, setting, 8)
    apply(control_plane, leader_worker_set(namespace, "serve", replicas=3, size=4))
    until("12 pods", lambda: pods(api, namespace), accept=lambda found: len(found) == 12, timeout=60)
    bound = until("two replica groups bound", lambda: running(api, namespace), accept=lambda r: len(r) == 8,
                  timeout=60)
    time.sleep(3)
    waiting = [p for p in pods(api, namespace) if is_gated(p)]
    assert len(waiting) == 4 and len(running(api, namespace)) == 8, [p.metadata.name for p in bound]
    groups = {p.metadata.name.split("-")[1] for p in waiting}  # serve-<group>[-<worker>]
    assert len(groups) == 1, [p.metadata.name for p in waiting]


def test_in_order_jobset_starts(control_plane: ControlPlane, api: Any, namespace: str, setting: str) -> None:
    quota(api, setting, 5)
    apply(control_plane, jobset(namespace, "ordered", in_order=True))
    bound = until("the launcher, then the workers, bound", lambda: running(api, namespace),
                  accept=lambda r: len(r) == 5, timeout=90)
    assert len(bound) == 5


def test_leader_ready_leader_worker_set_starts(control_plane: ControlPlane, api: Any, namespace: str,
                                               setting: str) -> None:
    quota(api, setting, 6)
    apply(control_plane, leader_worker_set(namespace, "ready", replicas=2, size=3, leader_ready=True))
    bound = until("both replica groups bound", lambda: running(api, namespace), accept=lambda r: len(r) == 6,
                  timeout=90)
    assert len(bound) == 6


def test_leader_ready_leader_worker_set_whose_pods_a_limit_range_changed_starts(
        control_plane: ControlPlane, api: Any, namespace: str, setting: str) -> None:
    """A LimitRange gives every container a CPU limit its template does not have: no member matches its role,
    so each one gives up a reserved slot and is placed as itself, within the same quota."""
    apply(control_plane, {"apiVersion": "v1", "kind": "LimitRange",
                          "metadata": {"name": "defaults", "namespace": namespace},
                          "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m"}}]}})
    quota(api, setting, 3)
    apply(control_plane, leader_worker_set(namespace, "odd", replicas=1, size=3, leader_ready=True))
    bound = until("the replica group bound", lambda: running(api, namespace), accept=lambda r: len(r) == 3,
                  timeout=90)
    assert all(c.resources.limits == {"cpu": "500m"} for p in bound for c in p.spec.containers)
    reasons = {e.reason for e in client.CoreV1Api(api).list_namespaced_event(namespace).items}
    assert "SlotsGivenUp" in reasons, sorted(reasons)


def test_jobset_that_does_not_bind_in_time_is_suspended_and_readmitted(
        control_plane: ControlPlane, api: Any, namespace: str, setting: str) -> None:
    quota(api, setting, 5)
    client.CustomObjectsApi(api).patch_cluster_custom_object(
        "draq.io", "v1alpha1", "clusterqueues", setting, {"spec": {"bindTimeoutSeconds": 10}})
    apply(control_plane, jobset(namespace, "held", workers=1, per_job=1, hold=True))
    custom = client.CustomObjectsApi(api)

    def suspended() -> bool:
        found = custom.get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", "held")
        return bool(found["spec"].get("suspend"))

    until("the JobSet suspended by the eviction", suspended, timeout=60)
    until("the JobSet resumed after the backoff", lambda: not suspended(), timeout=90)
    again = until("its pods created again and released again", lambda: pods(api, namespace),
                  accept=lambda found: len(found) == 2 and not any(is_gated(p) for p in found), timeout=60)
    assert {HOLD} == {g.name for p in again for g in p.spec.scheduling_gates or []}


def test_raycluster_is_a_gang(control_plane: ControlPlane, api: Any, namespace: str, setting: str) -> None:
    quota(api, setting, 2)
    pod = {"template": {"spec": gpu_pod(name="ray")}}
    apply(control_plane, {
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "rc", "namespace": namespace, "labels": {QUEUE_LABEL: "lq"}},
        "spec": {"headGroupSpec": {"rayStartParams": {}, **pod},
                 "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "minReplicas": 2, "maxReplicas": 2,
                                       "rayStartParams": {}, **pod}]}})
    until("3 gated pods", lambda: pods(api, namespace), accept=lambda found: len(found) == 3, timeout=90)
    time.sleep(3)
    assert all(is_gated(p) for p in pods(api, namespace))
    quota(api, setting, 3)
    until("all 3 bound", lambda: running(api, namespace), accept=lambda r: len(r) == 3, timeout=60)
