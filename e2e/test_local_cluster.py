"""The local control plane does DRA end to end, and honours scheduling gates."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from admission.localcluster.controlplane import ControlPlane
from admission.localcluster.nodesim import NodeSimulator
from e2e.waiting import until


def gpu_pod(name: str, node: str, template: str, gates: list[str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeSelector": {"kubernetes.io/hostname": node},
        "containers": [{"name": "main", "image": "registry.example/cuda:12",
                        "resources": {"claims": [{"name": "gpus"}]}}],
        "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": template}],
    }
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def two_gpu_template(name: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}]}}}}


def claims_of(api: Any, namespace: str) -> list[dict[str, Any]]:
    custom = client.CustomObjectsApi(api)
    return list(custom.list_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaims")["items"])


def h100_node_with_template(nodesim: NodeSimulator, api: Any, namespace: str, unique: str,
                            template: dict[str, Any]) -> tuple[str, Any]:
    """A fresh simulated H100 node and the template in the namespace; returns the node and a CoreV1Api."""
    node = f"h100-{unique}"
    nodesim.add_node(node, "h100")
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        "resource.k8s.io", "v1", namespace, "resourceclaimtemplates", template)
    return node, client.CoreV1Api(api)


def test_template_claim_is_created_allocated_and_pod_bound(
        control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, namespace: str, unique: str) -> None:
    node, core = h100_node_with_template(nodesim, api, namespace, unique, two_gpu_template("two-gpus"))
    core.create_namespaced_pod(namespace, gpu_pod("trainer", node, "two-gpus"))

    pod = until("the pod to run", lambda: (p := core.read_namespaced_pod("trainer", namespace))
                .status.phase == "Running" and p)
    assert pod.spec.node_name == node
    [claim] = claims_of(api, namespace)
    results = claim["status"]["allocation"]["devices"]["results"]
    assert len(results) == 2
    assert {r["pool"] for r in results} == {node}
    assert all(r["driver"] == "gpu.nvidia.com" and r["device"].startswith("gpu-") for r in results)
    assert claim["status"]["reservedFor"][0]["name"] == "trainer"

    nodesim.complete(namespace, "trainer")
    until("the generated claim to be deleted after the pod completed", lambda: not claims_of(api, namespace))


def test_gated_pod_waits_until_its_gate_is_removed(
        control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, namespace: str, unique: str) -> None:
    node, core = h100_node_with_template(nodesim, api, namespace, unique, two_gpu_template("two-gpus"))
    core.create_namespaced_pod(namespace, gpu_pod("gated", node, "two-gpus", gates=["draq.io/admission"]))

    def scheduled_condition() -> Any:
        conditions = core.read_namespaced_pod("gated", namespace).status.conditions or []
        return next((c for c in conditions if c.type == "PodScheduled"), None)

    # Wait for the gated verdict itself, not whichever PodScheduled condition shows up first.
    condition = until("the PodScheduled condition False with reason SchedulingGated", scheduled_condition,
                      accept=lambda c: (c.status, c.reason) == ("False", "SchedulingGated"))
    assert (condition.status, condition.reason) == ("False", "SchedulingGated")
    [claim] = until("the template claim to be created", lambda: claims_of(api, namespace))
    assert "allocation" not in claim.get("status", {})
    assert core.read_namespaced_pod("gated", namespace).spec.node_name is None

    # A JSON patch: a strategic-merge patch with [] would merge into the keyed list and remove nothing.
    core.patch_namespaced_pod("gated", namespace, [{"op": "remove", "path": "/spec/schedulingGates"}])
    pod = until("the pod to be bound after its gate was removed",
                lambda: (p := core.read_namespaced_pod("gated", namespace)).spec.node_name and p)
    assert pod.spec.node_name == node
    [claim] = claims_of(api, namespace)
    assert len(claim["status"]["allocation"]["devices"]["results"]) == 2


def test_pod_that_cannot_get_devices_stays_unschedulable(
        control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, namespace: str, unique: str) -> None:
    template = two_gpu_template("nine-gpus")
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 9
    node, core = h100_node_with_template(nodesim, api, namespace, unique, template)
    core.create_namespaced_pod(namespace, gpu_pod("greedy", node, "nine-gpus"))

    def unschedulable() -> Any:
        conditions = core.read_namespaced_pod("greedy", namespace).status.conditions or []
        return next((c for c in conditions if c.type == "PodScheduled" and c.reason == "Unschedulable"), None)

    condition = until("the scheduler to report the pod unschedulable", unschedulable)
    assert "cannot allocate all claims" in condition.message
