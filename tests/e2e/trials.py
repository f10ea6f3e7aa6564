"""Run generated scenarios on the real control plane and read back the scheduler's verdicts."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.e2e.scenarios import Trial

GROUP, VERSION = "resource.k8s.io", "v1"


@dataclass(frozen=True)
class Verdict:
    outcome: str  # "bound", "unschedulable", "error" (any other scheduler failure) or "pending"
    message: str = ""


def create_cluster_objects(api: client.ApiClient, manifests: list[dict[str, Any]]) -> None:
    custom = client.CustomObjectsApi(api)
    for manifest in manifests:
        plural = {"DeviceClass": "deviceclasses", "ResourceSlice": "resourceslices"}[manifest["kind"]]
        try:
            custom.create_cluster_custom_object(GROUP, VERSION, plural, manifest)
        except ApiException as err:
            if err.status != 409:
                raise


def submit(api: client.ApiClient, namespace: str, trial: Trial) -> None:
    """Create the trial's node, slices, held claims (with their allocation) and finally the pod."""
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    node = {k: v for k, v in trial.node.items() if k != "status"}
    core.create_node(node)
    core.patch_node_status(trial.node_name, {"status": trial.node["status"]})
    create_cluster_objects(api, trial.slices)
    for held in trial.in_use:
        body = {k: v for k, v in held.items() if k != "status"}
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", body)
        custom.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, "resourceclaims",
                                                     held["metadata"]["name"], {"status": held["status"]})
    for claim in trial.claims:
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", claim)
    core.create_namespaced_pod(namespace, trial.pod)


def verdict_of(pod: Any) -> Verdict:
    if pod.spec.node_name:
        return Verdict("bound")
    for condition in pod.status.conditions or []:
        if condition.type == "PodScheduled" and condition.status == "False" and condition.reason:
            if condition.reason == "Unschedulable":
                return Verdict("unschedulable", condition.message or "")
            if condition.reason != "SchedulingGated":
                return Verdict("error", f"{condition.reason}: {condition.message}")
    return Verdict("pending")


def await_verdicts(api: client.ApiClient, namespace: str, pods: list[str], timeout: float = 60) -> dict[str, Verdict]:
    core = client.CoreV1Api(api)
    verdicts: dict[str, Verdict] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pod in core.list_namespaced_pod(namespace).items:
            if pod.metadata.name in pods and pod.metadata.name not in verdicts:
                verdict = verdict_of(pod)
                if verdict.outcome != "pending":
                    verdicts[pod.metadata.name] = verdict
        if len(verdicts) == len(pods):
            break
        time.sleep(0.2)
    return {name: verdicts.get(name, Verdict("pending", "no verdict before the timeout")) for name in pods}


def stored_objects(api: client.ApiClient, namespace: str, trial: Trial) -> list[dict[str, Any]]:
    """The trial's objects as the API server stored them (fields of disabled features dropped)."""
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    node = api.sanitize_for_serialization(core.read_node(trial.node_name))
    node.setdefault("apiVersion", "v1")
    node.setdefault("kind", "Node")
    slices = custom.list_cluster_custom_object(
        GROUP, VERSION, "resourceslices", field_selector=f"spec.nodeName={trial.node_name}")["items"]
    names = [c["metadata"]["name"] for c in trial.in_use]
    claims = [custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", n) for n in names]
    classes = custom.list_cluster_custom_object(GROUP, VERSION, "deviceclasses")["items"]
    for obj in slices + claims + classes:
        obj.setdefault("apiVersion", f"{GROUP}/{VERSION}")
    for obj, kind in [(s, "ResourceSlice") for s in slices] + [(c, "ResourceClaim") for c in claims] + \
            [(c, "DeviceClass") for c in classes]:
        obj.setdefault("kind", kind)
    pending = [custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", c["metadata"]["name"])
               for c in trial.claims]
    for claim in pending:
        claim.setdefault("kind", "ResourceClaim")
        claim.setdefault("apiVersion", f"{GROUP}/{VERSION}")
        claim.pop("status", None)  # the scheduler may have allocated it by now: ask about the spec only
    return [node, *classes, *slices, *claims, *pending]
