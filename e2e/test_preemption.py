"""Preemption on the real control plane: a high-priority gang pinned to two nodes evicts exactly the
groups on those nodes (not the one admitted last, which a choice by quota alone would take first) and
is bound there once they are gone."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from admission.core.labels import GATE
from admission.localcluster.controlplane import ControlPlane
from admission.localcluster.nodesim import NodeSimulator
from e2e.test_operator import (  # noqa: F401 (fixtures)
    GPU_CLASS,
    RunningOperator,
    admitted_reason,
    apply,
    crds,
    gang,
    operator,
    pod_group,
    priority_class,
)
from e2e.waiting import until


def phase(api: Any, namespace: str, group: str) -> str:
    return str(((pod_group(api, namespace, group) or {}).get("status") or {}).get("phase") or "")


def test_a_high_priority_gang_preempts_the_groups_on_the_nodes_it_needs_and_is_bound_there(
        control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, namespace: str, unique: str,
        operator: RunningOperator) -> None:  # noqa: F811
    nodes = [f"pre-{unique}-{i}" for i in range(3)]
    for node in nodes:
        nodesim.add_node(node, "h100")
    unit, cq = f"gpus-{unique}", f"cq-{unique}"
    apply(control_plane,
          {"apiVersion": "draq.io/v1alpha1", "kind": "QuotaUnit", "metadata": {"name": unit},
           "spec": {"devices": {"deviceClassNames": [GPU_CLASS]}}},
          {"apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": cq},
           "spec": {"namespaceSelector": {}, "quotas": [{"unit": unit, "nominal": 24}],
                    "preemption": {"withinClusterQueue": "LowerPriority"}}},
          {"apiVersion": "draq.io/v1alpha1", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": namespace},
           "spec": {"clusterQueue": cq}})
    core = client.CoreV1Api(api)
    # One 8-GPU group per node, low-2 and low-1 first, low-0 last: low-0 is the most recently admitted.
    for index in (2, 1, 0):
        [member] = gang(control_plane, namespace, f"low-{index}", [nodes[index]], gpus_each=8)
        until(f"low-{index} running", lambda m=member: (p := core.read_namespaced_pod(m, namespace))
              .status.phase == "Running" and bool(p.spec.node_name), timeout=60)
        until(f"low-{index} recorded Running", lambda i=index: phase(api, namespace, f"low-{i}") == "Running",
              timeout=30)
    high = priority_class(control_plane, f"high-{unique}", 5)  # the group's priority comes from its pods' class
    members = gang(control_plane, namespace, "high", nodes[1:], gpus_each=8, priority_class=high)
    until("low-1 and low-2 preempted", lambda: all(
        admitted_reason(pod_group(api, namespace, g) or {}) == "Preempted" for g in ("low-1", "low-2")), timeout=60)
    for group in ("low-1", "low-2"):
        status = (pod_group(api, namespace, group) or {})["status"]
        assert status["phase"] == "Evicted" and f"preempted by group {namespace}/high" in status["message"]
    bound = until("high bound on the two nodes", lambda: all(
        (p := core.read_namespaced_pod(m, namespace)).status.phase == "Running" and p.spec.node_name
        for m in members), timeout=120)
    assert bound
    assert sorted(core.read_namespaced_pod(m, namespace).spec.node_name for m in members) == sorted(nodes[1:])
    assert phase(api, namespace, "low-0") == "Running"  # the group on the node it does not need stays
    events = client.CoreV1Api(api).list_namespaced_event(namespace).items
    preempted = sorted(e.involved_object.name for e in events if e.reason == "Preempted")
    assert preempted == ["low-1", "low-2"]


def test_a_pod_group_priority_written_by_a_tenant_preempts_nothing(
        control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, namespace: str, unique: str,
        operator: RunningOperator) -> None:  # noqa: F811
    node = f"ten-{unique}"
    nodesim.add_node(node, "h100")
    unit, cq = f"gpus-{unique}", f"cq-{unique}"
    apply(control_plane,
          {"apiVersion": "draq.io/v1alpha1", "kind": "QuotaUnit", "metadata": {"name": unit},
           "spec": {"devices": {"deviceClassNames": [GPU_CLASS]}}},
          {"apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": cq},
           "spec": {"namespaceSelector": {}, "quotas": [{"unit": unit, "nominal": 8}],
                    "preemption": {"withinClusterQueue": "LowerPriority"}}},
          {"apiVersion": "draq.io/v1alpha1", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": namespace},
           "spec": {"clusterQueue": cq}})
    gang(control_plane, namespace, "other-team", [node], gpus_each=8)
    until("other-team recorded Running", lambda: phase(api, namespace, "other-team") == "Running", timeout=60)
    apply(control_plane, {"apiVersion": "draq.io/v1alpha1", "kind": "PodGroup",
                          "metadata": {"name": "tenant", "namespace": namespace},
                          "spec": {"minMember": 1, "queue": "lq", "priority": 2147483647}})
    [member] = gang(control_plane, namespace, "tenant", [node], gpus_each=8)
    group = until("tenant to wait for quota, not to preempt", lambda: pod_group(api, namespace, "tenant"),
                  accept=lambda g: admitted_reason(g) == "QuotaExceeded", timeout=30)
    assert "preempting" not in group["status"]["message"]
    assert phase(api, namespace, "other-team") == "Running"
    assert GATE in [g.name for g in client.CoreV1Api(api).read_namespaced_pod(member, namespace).spec.scheduling_gates]
    events = client.CoreV1Api(api).list_namespaced_event(namespace).items
    assert not [e for e in events if e.reason == "Preempted"]
