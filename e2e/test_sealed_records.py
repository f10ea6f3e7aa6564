"""Records draq did not write, on the real control plane: a tenant's forged PodGroup status is bad input. A
forged Admitted with an empty charge releases nothing and charges nothing; a forged Finished on a running
group frees nothing, so no second group is admitted on top. A ClusterQueue without a namespaceSelector serves
no namespace. The tenant's writes are made with kubectl on the status subresource."""

from __future__ import annotations

import json
import time
from typing import Any

from kubernetes import client

from admission.localcluster.controlplane import ControlPlane
from admission.localcluster.nodesim import NodeSimulator
from e2e.test_operator import (  # noqa: F401 (fixtures)
    GPU_CLASS,
    RunningOperator,
    admitted_reason,
    apply,
    crds,
    gang,
    gated,
    operator,
    pod_group,
    queues,
)
from e2e.waiting import until


def forge(control_plane: ControlPlane, namespace: str, group: str, status: dict[str, Any]) -> None:
    control_plane.kubectl("patch", "podgroup", group, "-n", namespace, "--subresource=status", "--type=merge",
                          "-p", json.dumps({"status": status}))


def queue_row(control_plane: ControlPlane, cq: str) -> str:
    row: str = control_plane.kubectl("get", "clusterqueues", cq, "--no-headers").stdout
    return row


def waits_unsealed(api: Any, namespace: str, group: str) -> str:
    """The group's wait for a record draq did not write: its condition's message, once the Warning is posted."""
    found = until(f"PodGroup {group} to wait with reason RecordNotSealed", lambda: pod_group(api, namespace, group),
                  accept=lambda g: admitted_reason(g) == "RecordNotSealed", timeout=30)
    [condition] = found["status"]["conditions"]
    events = until("a RecordNotSealed Warning on the PodGroup", lambda: [
        e for e in client.CoreV1Api(api).list_namespaced_event(namespace).items
        if e.involved_object.name == group and e.reason == "RecordNotSealed"], timeout=30)
    assert events[0].type == "Warning" and events[0].message == condition["message"]
    return str(condition["message"])


def running_group(control_plane: ControlPlane, api: Any, namespace: str, node: str) -> None:
    gang(control_plane, namespace, "running", [node], gpus_each=4)
    until("group running to be Running", lambda: (pod_group(api, namespace, "running") or {}).get("status", {})
          .get("phase") == "Running", timeout=60)


def test_a_forged_admission_with_an_empty_charge_releases_and_charges_nothing(
        control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, namespace: str, unique: str,
        operator: RunningOperator) -> None:  # noqa: F811
    node = f"seal-{unique}"
    nodesim.add_node(node, "h100")
    cq = queues(control_plane, namespace, unique, gpus=4)
    running_group(control_plane, api, namespace, node)
    [intruder] = gang(control_plane, namespace, "intruder", [node], gpus_each=4)
    until("group intruder to wait for quota", lambda: pod_group(api, namespace, "intruder"),
          accept=lambda g: admitted_reason(g) == "QuotaExceeded", timeout=30)

    forge(control_plane, namespace, "intruder", {"phase": "Admitted", "clusterQueue": cq, "charge": []})
    message = waits_unsealed(api, namespace, "intruder")
    assert message.startswith(f"PodGroup {namespace}/intruder, field status: not written by draq: its status.seal "
                              "does not verify: the record was changed after draq wrote it; draq ignores the record")
    time.sleep(3)  # a pass or two later the member is still gated: no release is "finished" for it
    assert gated(api, namespace, intruder)
    row = until("the queue to show 4/4 and one admitted group", lambda: queue_row(control_plane, cq),
                accept=lambda r: f"gpus-{unique} 4/4" in r and r.split()[-2] == "1", timeout=30)
    assert f"gpus-{unique} 4/4" in row


def test_a_forged_finished_keeps_the_charge_and_admits_nothing_on_top(
        control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, namespace: str, unique: str,
        operator: RunningOperator) -> None:  # noqa: F811
    node = f"seal-{unique}"
    nodesim.add_node(node, "h100")
    cq = queues(control_plane, namespace, unique, gpus=4)
    running_group(control_plane, api, namespace, node)

    forge(control_plane, namespace, "running", {"phase": "Finished"})
    assert "its status.seal does not verify" in waits_unsealed(api, namespace, "running")
    [second] = gang(control_plane, namespace, "next", [node], gpus_each=4)
    until("group next to wait for quota", lambda: pod_group(api, namespace, "next"),
          accept=lambda g: admitted_reason(g) == "QuotaExceeded", timeout=30)
    assert gated(api, namespace, second)
    row = until("the queue to keep counting 4/4", lambda: queue_row(control_plane, cq),
                accept=lambda r: f"gpus-{unique} 4/4" in r, timeout=30)
    assert f"gpus-{unique} 4/4" in row


def test_a_cluster_queue_without_namespace_selector_serves_no_namespace(
        control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, namespace: str, unique: str,
        operator: RunningOperator) -> None:  # noqa: F811
    node = f"seal-{unique}"
    nodesim.add_node(node, "h100")
    unit, cq = f"gpus-{unique}", f"closed-{unique}"
    apply(control_plane,
          {"apiVersion": "draq.io/v1alpha1", "kind": "QuotaUnit", "metadata": {"name": unit},
           "spec": {"devices": {"deviceClassNames": [GPU_CLASS]}}},
          {"apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": cq},
           "spec": {"quotas": [{"unit": unit, "nominal": 8}]}},
          {"apiVersion": "draq.io/v1alpha1", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": namespace},
           "spec": {"clusterQueue": cq}})
    [member] = gang(control_plane, namespace, "train", [node], gpus_each=4)
    group = until("group train to wait for a queue", lambda: pod_group(api, namespace, "train"),
                  accept=lambda g: admitted_reason(g) == "QueueMissing", timeout=30)
    assert group["status"]["message"] == (
        f"ClusterQueue {cq} has no spec.namespaceSelector, so it serves no namespace (LocalQueue {namespace}/lq "
        "points to it); its administrator sets namespaceSelector to a selector matching the namespace, or {} for "
        "every namespace")
    assert gated(api, namespace, member)
