"""Device taints after admission (Kubernetes 1.37, where device taints are GA): a group whose planned
devices are tainted `NoExecute` before its members bind is handled like one whose node was tainted: evicted
at its bind timeout, and once requeued it waits saying the devices are tainted.

Runs on a control plane of its own (1.37 or the session's release if later): the group must have no GPU node
but the tainted one, and the session's plane keeps other tests' nodes.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from admission.localcluster.controlplane import ControlPlane
from admission.localcluster.nodesim import NodeSimulator
from e2e.test_closed_loop import member, template
from e2e.test_operator import RunningOperator, apply, pod_group, queues, settings
from e2e.waiting import until

TAINT = {"key": "gpu.example.com/unhealthy", "value": "xid-79", "effect": "NoExecute"}


@pytest.fixture(scope="module")
def plane_1_37(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    from e2e.test_webhook import REPO

    work_dir = Path(tempfile.mkdtemp(prefix="draq-e2e-device-taints-"))
    plane = ControlPlane(work_dir, version=control_plane.version if control_plane.minor() >= 37 else "1.37")
    plane.start()
    try:
        plane.kubectl("apply", "-f", str(REPO / "crds"))
        plane.kubectl("wait", "--for=condition=Established", "crd/podgroups.draq.io", "--timeout=60s")
        yield plane
    finally:
        plane.stop()
        shutil.rmtree(work_dir, ignore_errors=True)


def taint_node_devices(api: Any, node: str) -> None:
    """The node's DRA driver marks every device of its slices unhealthy, evicting their users."""
    custom = client.CustomObjectsApi(api)
    for rs in custom.list_cluster_custom_object("resource.k8s.io", "v1", "resourceslices")["items"]:
        if rs["spec"].get("nodeName") != node:
            continue
        for device in rs["spec"].get("devices") or []:
            device["taints"] = [TAINT]
        custom.replace_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", rs["metadata"]["name"], rs)


def test_planned_devices_tainted_no_execute_evict_and_requeue_the_group(plane_1_37: ControlPlane, unique: str) -> None:
    plane, api = plane_1_37, plane_1_37.client()
    namespace = f"dt-{unique}"
    plane.kubectl("create", "namespace", namespace)
    plane.wait_for_service_account(namespace)
    with NodeSimulator(api) as sim:
        sim.apply_device_classes()
        node = f"dt-{unique}"
        sim.add_node(node, "h100")
        cq = queues(plane, namespace, unique, gpus=8)
        client.CustomObjectsApi(api).patch_cluster_custom_object(
            "draq.io", "v1alpha1", "clusterqueues", cq, {"spec": {"bindTimeoutSeconds": 10}})
        running = RunningOperator(settings(plane, namespace)).start()
        try:
            # Another controller's gate holds the member after draq releases it: admitted, not bound.
            apply(plane, template(namespace, "held", 8), member(namespace, "held", "held-0", 1, 8, extra_gate=True))
            until("the group admitted", lambda: pod_group(api, namespace, "held"),
                  accept=lambda g: bool(g and (g.get("status") or {}).get("phase") == "Admitted"), timeout=60)
            taint_node_devices(api, node)
            evicted = until("the group evicted at its bind timeout", lambda: pod_group(api, namespace, "held"),
                            accept=lambda g: bool(g and (g.get("status") or {}).get("phase") == "Evicted"), timeout=60)
            assert evicted["status"]["evictions"] == 1
            until("its member deleted", lambda: client.CoreV1Api(api).list_namespaced_pod(namespace).items,
                  accept=lambda ps: not ps, timeout=30)
            apply(plane, member(namespace, "held", "held-1", 1, 8))  # its controller would recreate it
            waiting = until("its new member waiting for untainted devices",
                            lambda: pod_group(api, namespace, "held"),
                            accept=lambda g: "has a taint that is not tolerated" in str(
                                (g or {}).get("status", {}).get("message", "")), timeout=90)
            assert waiting["status"]["phase"] != "Admitted" and waiting["status"]["evictions"] == 1
            # Every GPU of the only node is tainted: as the cluster stands, even emptied, nothing holds the group.
            # It waits NeverAdmissible, and the taint's removal (a ResourceSlice change) has it evaluated again.
            assert waiting["status"]["conditions"][0]["reason"] == "NeverAdmissible"
        finally:
            running.stop()
    assert running.error is None, running.error
