"""The loop closed with the real scheduler: members bound where draq planned them (no test-side pinning),
a group that does not bind in time evicted and requeued, and native gangs where the cluster has them.

Pods are created gated and labelled directly, as the mutating webhook would leave them.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from admission.core.labels import GATE, GROUP_LABEL, GROUP_MIN_LABEL, QUEUE_LABEL
from admission.core.native_gangs import V1ALPHA1, gang_name, pod_reference
from admission.localcluster.controlplane import ControlPlane, gang_api
from admission.localcluster.nodesim import NodeSimulator
from admission.operator import OperatorSettings
from e2e.test_operator import GPU_CLASS, RunningOperator, apply, crds, pod_group, queues, settings
from e2e.waiting import until
from tests.support.affinity import pinned_node

__all__ = ["crds"]  # the module-scoped CRD fixture, shared with the operator tests
HOLD = "example.com/hold"  # another controller's gate: draq releases its own, the pod still cannot bind


def member(namespace: str, group: str, name: str, size: int, gpus: int, *, extra_gate: bool = False,
           native: bool = False) -> dict[str, Any]:
    gates = [{"name": GATE}] + ([{"name": HOLD}] if extra_gate else [])
    spec: dict[str, Any] = {
        "schedulingGates": gates,
        "containers": [{"name": "main", "image": "registry.example/cuda:12",
                        "resources": {"claims": [{"name": "gpus"}]}}],
        "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": f"{group}-gpus"}]}
    if native:
        spec["workloadRef"] = pod_reference(V1ALPHA1, group)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {QUEUE_LABEL: "lq", GROUP_LABEL: group, GROUP_MIN_LABEL: str(size)}},
            "spec": spec}


def template(namespace: str, group: str, gpus: int) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": f"{group}-gpus", "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": gpus}}]}}}}


def bound_where_planned(api: Any, namespace: str, group: str, members: list[str]) -> dict[str, str]:
    core = client.CoreV1Api(api)
    record = until(f"{group} recorded as admitted", lambda: pod_group(api, namespace, group),
                   accept=lambda g: bool(g and (g.get("status") or {}).get("plan")), timeout=60)
    planned = {p["name"]: p["node"] for p in record["status"]["plan"]["pods"]}
    pods = until(f"every member of {group} bound", lambda: [core.read_namespaced_pod(m, namespace) for m in members],
                 accept=lambda ps: all(p.spec.node_name for p in ps), timeout=90)
    for pod in pods:
        affinity = client.ApiClient().sanitize_for_serialization(pod.spec.affinity)
        assert pinned_node(affinity) == planned[pod.metadata.name], "released pinned to the planned node"
        assert pod.spec.node_name == planned[pod.metadata.name], "bound where draq planned"
    return {p.metadata.name: p.spec.node_name for p in pods}


def test_members_are_bound_on_the_nodes_draq_planned(
        control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, namespace: str, unique: str,
        crds: None) -> None:
    # Three nodes of 8 GPUs and three members of 6: one member per node, and no nodeSelector in the test.
    for i in range(3):
        nodesim.add_node(f"cl-{unique}-{i}", "h100")
    queues(control_plane, namespace, unique, gpus=24)
    members = [f"wide-{i}" for i in range(3)]
    running = RunningOperator(settings(control_plane, namespace)).start()
    try:
        apply(control_plane, template(namespace, "wide", 6), *(member(namespace, "wide", m, 3, 6) for m in members))
        placed = bound_where_planned(api, namespace, "wide", members)
        assert len(set(placed.values())) == 3, f"one member per node: {placed}"
    finally:
        running.stop()
    assert running.error is None, running.error


def test_a_job_that_does_not_bind_in_time_is_suspended_and_resumed_after_the_backoff(
        control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, namespace: str, unique: str,
        crds: None) -> None:
    nodesim.add_node(f"ev-{unique}", "h100")
    cq = queues(control_plane, namespace, unique, gpus=8)
    client.CustomObjectsApi(api).patch_cluster_custom_object(
        "draq.io", "v1alpha1", "clusterqueues", cq, {"spec": {"bindTimeoutSeconds": 10}})
    pod_spec = member(namespace, "held", "x", 2, 2, extra_gate=True)["spec"]
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "held", "namespace": namespace},
           "spec": {"parallelism": 2, "completions": 2, "backoffLimit": 0,
                    "template": {"metadata": {"labels": {QUEUE_LABEL: "lq", GROUP_LABEL: "held",
                                                         GROUP_MIN_LABEL: "2"}},
                                 "spec": {**pod_spec, "restartPolicy": "Never"}}}}
    running = RunningOperator(settings(control_plane, namespace)).start()
    try:
        apply(control_plane, template(namespace, "held", 2), job)
        evicted = until("the group evicted for not binding in time", lambda: pod_group(api, namespace, "held"),
                        accept=lambda g: bool(g and (g.get("status") or {}).get("phase") == "Evicted"), timeout=60)
        status = evicted["status"]
        assert status["evictions"] == 1 and status["suspended"] == [{"kind": "Job", "name": "held"}]
        assert "not bound" in status["message"] and "charge" not in status
        batch = client.BatchV1Api(api)
        # The record is written before the Job is suspended, so the suspension may still be on its way.
        suspended = until("the Job suspended", lambda: batch.read_namespaced_job("held", namespace),
                          accept=lambda j: j.spec.suspend is True, timeout=15)
        assert suspended.spec.suspend is True
        queue = client.CustomObjectsApi(api).get_cluster_custom_object("draq.io", "v1alpha1", "clusterqueues", cq)
        until("the charge released", lambda: client.CustomObjectsApi(api).get_cluster_custom_object(
            "draq.io", "v1alpha1", "clusterqueues", cq), accept=lambda q: q.get("status", {}).get(
            "admittedGroups") == 0, timeout=30)
        resumed = until("the Job resumed after the 30 s backoff", lambda: batch.read_namespaced_job("held", namespace),
                        accept=lambda j: j.spec.suspend is False, timeout=75)
        assert resumed.spec.suspend is False and queue is not None
        again = until("admitted again, and evicted again", lambda: pod_group(api, namespace, "held"),
                      accept=lambda g: bool(g and (g.get("status") or {}).get("evictions") == 2), timeout=90)
        assert again["status"]["requeueAt"] > status["requeueAt"]
    finally:
        running.stop()
    assert running.error is None, running.error


@pytest.fixture(scope="module")
def gang_plane() -> Iterator[ControlPlane]:
    """A second control plane with native gang scheduling (1.35's v1alpha1 Workload API) switched on; later
    releases' gang APIs are tested by `e2e/test_native_gang_apis.py` (`make e2e-gangs`)."""
    work_dir = Path(tempfile.mkdtemp(prefix="draq-e2e-gangs-"))
    plane = ControlPlane(work_dir, alpha_gangs=True)
    if gang_api(plane.minor()) != "v1alpha1":
        shutil.rmtree(work_dir, ignore_errors=True)
        pytest.skip(f"the v1alpha1 Workload API is served by 1.35, not 1.{plane.minor()} (make e2e-alpha runs this)")
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()
        shutil.rmtree(work_dir, ignore_errors=True)


def test_native_gang_members_get_their_workload_and_bind(gang_plane: ControlPlane, unique: str) -> None:
    from e2e.test_webhook import REPO

    api = gang_plane.client()
    sim = NodeSimulator(api)
    sim.apply_device_classes()
    sim.start()
    running = None
    try:
        gang_plane.kubectl("apply", "-f", str(REPO / "crds"))
        gang_plane.kubectl("wait", "--for=condition=Established", "crd/podgroups.draq.io", "--timeout=60s")
        namespace = f"ng-{unique}"
        gang_plane.kubectl("create", "namespace", namespace)
        gang_plane.wait_for_service_account(namespace)
        for i in range(2):
            sim.add_node(f"ng-{unique}-{i}", "h100")
        queues(gang_plane, namespace, unique, gpus=16)
        running = RunningOperator(OperatorSettings(kubeconfig=gang_plane.kubeconfig, lease_namespace=namespace,
                                                   lease_seconds=6.0, resync_seconds=5.0)).start()
        members = ["ng-0", "ng-1"]
        apply(gang_plane, template(namespace, "ng", 8), *(member(namespace, "ng", m, 2, 8, native=True)
                                                           for m in members))
        bound_where_planned(api, namespace, "ng", members)
        workload = client.CustomObjectsApi(api).get_namespaced_custom_object(
            "scheduling.k8s.io", "v1alpha1", namespace, "workloads", gang_name("ng"))
        assert workload["spec"]["podGroups"] == [{"name": "members", "policy": {"gang": {"minCount": 2}}}]
    finally:
        if running is not None:
            running.stop()
        sim.stop()
