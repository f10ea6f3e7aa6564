"""PyTorchJob and MPIJob gangs on the real Kubeflow training operator v1.8.1, with draq in the loop.

The operator's CRDs carry the pod schema of Kubernetes 1.29, which refuses
`resourceClaims[].resourceClaimTemplateName` (and its Go types would drop the field), so these jobs
cannot carry DRA claims. What the 1.29 schema can carry and draq charges is a device plugin's extended
resource: the pods request `nvidia.com/gpu`, the simulated nodes offer it in their allocatable, and the
queue's QuotaUnit counts it (`extendedResources`). The gang is the same either way: all of the job's
pods are released together, or none is.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from admission.core.labels import QUEUE_LABEL
from admission.localcluster.controlplane import ControlPlane
from admission.localcluster.integrations import WorkloadControllers
from admission.localcluster.nodesim import NodeSimulator
from e2e.draq_process import DraqProcess
from e2e.test_operator import apply, crds, pod_group
from e2e.test_workload_gangs import controllers, draq_with, is_gated, pods, quota, running, setting
from e2e.waiting import until

__all__ = ["controllers", "crds", "setting"]
INTEGRATIONS = "kubeflow.org/pytorchjob,kubeflow.org/mpijob"
PLUGIN_GPU = "nvidia.com/gpu"


@pytest.fixture(scope="module")
def draq(control_plane: ControlPlane, crds: None, controllers: WorkloadControllers) -> Iterator[DraqProcess]:
    yield from draq_with(control_plane, INTEGRATIONS, "draq-kubeflow-")


@pytest.fixture
def plugin_gpus(setting: str, nodesim: NodeSimulator, unique: str, api: Any) -> str:
    """`setting`'s two H100 nodes with the device plugin's `nvidia.com/gpu` in their allocatable, and its
    QuotaUnit counting that resource too; the ClusterQueue's name (nominal 0 until `quota` sets it)."""
    for node in (f"wl-{unique}-a", f"wl-{unique}-b"):
        nodesim.add_node(node, "h100", device_plugin=True)
    client.CustomObjectsApi(api).patch_cluster_custom_object(
        "draq.io", "v1alpha1", "quotaunits", f"gpus-{unique}", {"spec": {"extendedResources": [{"name": PLUGIN_GPU}]}})
    return setting


def plugin_gpu_pod(container: str) -> dict[str, Any]:
    """A pod template with one container asking the device plugin for one GPU (no DRA claim)."""
    one = {"cpu": "100m", PLUGIN_GPU: "1"}
    return {"spec": {"containers": [{"name": container, "image": "registry.example/cuda:12",
                                     "resources": {"requests": one, "limits": {PLUGIN_GPU: "1"}}}]}}


def kubeflow_job(kind: str, namespace: str, name: str, replicas: dict[str, int], container: str) -> dict[str, Any]:
    specs = {role: {"replicas": count, "restartPolicy": "Never", "template": plugin_gpu_pod(container)}
             for role, count in replicas.items()}
    field = {"PyTorchJob": "pytorchReplicaSpecs", "MPIJob": "mpiReplicaSpecs"}[kind]
    return {"apiVersion": "kubeflow.org/v1", "kind": kind,
            "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: "lq"}},
            "spec": {field: specs}}


def assert_whole_or_nothing(api: Any, namespace: str, cq: str, job: dict[str, Any]) -> None:
    """3 pods on a quota of 2 GPUs: all stay gated, the group waiting for the unit; on 3, all are bound and
    the group is charged 3 GPUs."""
    name, unit = job["metadata"]["name"], f"gpus-{cq[3:]}"
    created = until("the job's 3 pods, gated", lambda: pods(api, namespace), accept=lambda found: len(found) == 3,
                    timeout=90)
    waiting = until(f"PodGroup {name} waiting for unit {unit}",
                    lambda: (pod_group(api, namespace, name) or {}).get("status"),
                    accept=lambda s: s.get("phase") == "Pending" and f"unit {unit}:" in s.get("message", ""),
                    timeout=60)
    assert "needs 3" in waiting["message"], waiting["message"]
    time.sleep(3)  # a few cycles: nothing of the 3-GPU gang may be released on a 2-GPU quota
    assert all(is_gated(p) for p in pods(api, namespace)), [p.metadata.name for p in created]
    quota(api, cq, 3)
    bound = until("all 3 pods bound", lambda: running(api, namespace), accept=lambda r: len(r) == 3, timeout=60)
    assert {p.metadata.owner_references[0].kind for p in bound} == {job["kind"]}
    assert {p.metadata.owner_references[0].name for p in bound} == {name}
    status = (pod_group(api, namespace, name) or {}).get("status") or {}
    charge = {c["unit"]: c["amount"] for c in status.get("charge", [])}
    assert charge.get(unit) == "3", charge


def test_pytorchjob_is_admitted_whole_or_not_at_all(api: Any, control_plane: ControlPlane, namespace: str,
                                                    plugin_gpus: str) -> None:
    quota(api, plugin_gpus, 2)
    job = kubeflow_job("PyTorchJob", namespace, "ddp", {"Master": 1, "Worker": 2}, "pytorch")
    apply(control_plane, job)
    assert_whole_or_nothing(api, namespace, plugin_gpus, job)


def test_mpijob_is_admitted_whole_or_not_at_all(api: Any, control_plane: ControlPlane, namespace: str,
                                                plugin_gpus: str) -> None:
    quota(api, plugin_gpus, 2)
    job = kubeflow_job("MPIJob", namespace, "allreduce", {"Launcher": 1, "Worker": 2}, "mpi")
    apply(control_plane, job)
    assert_whole_or_nothing(api, namespace, plugin_gpus, job)
