"""A gang with `required: rack` on the real control plane: draq plans it inside one rack (the fullest that
holds it) and the real scheduler binds every member there; a high-priority gang that requires a rack
preempts groups inside one rack only, and is bound there.

Racks are node labels on simulated H100 nodes (8 GPUs each); other tests' nodes carry no rack label, so they
belong to no rack and are never used for the gang.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from admission.core.labels import GATE, GROUP_LABEL, GROUP_MIN_LABEL, QUEUE_LABEL
from admission.core.models import TOPOLOGY_REQUIRED_ANNOTATION
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

RACK_LABEL = "e2e.draq.io/rack"


def racked_nodes(api: Any, nodesim: NodeSimulator, unique: str, racks: dict[str, int],
                 label: str = RACK_LABEL) -> dict[str, str]:
    """`racks[name]` H100 nodes in each rack (node label `label`); node -> its rack."""
    core = client.CoreV1Api(api)
    found = {}
    for rack, count in racks.items():
        for index in range(count):
            name = f"topo-{unique}-{rack}-{index}"
            nodesim.add_node(name, "h100")
            core.patch_node(name, {"metadata": {"labels": {label: f"{unique}-{rack}"}}})
            found[name] = rack
    return found


def topology_queues(control_plane: ControlPlane, namespace: str, unique: str, preempting: bool = False,
                    label: str = RACK_LABEL) -> None:
    """A Topology of one level (rack, node label `label`), and a ClusterQueue naming it (evicting lower
    priority groups of its own for higher ones when `preempting`)."""
    unit, cq, topology = f"gpus-{unique}", f"cq-{unique}", f"racks-{unique}"
    spec: dict[str, Any] = {"namespaceSelector": {}, "topologyName": topology,
                            "quotas": [{"unit": unit, "nominal": 64}]}
    if preempting:
        spec["preemption"] = {"withinClusterQueue": "LowerPriority"}
    control_plane.kubectl("wait", "--for=condition=Established", "crd/topologies.draq.io", "--timeout=60s")
    apply(control_plane,
          {"apiVersion": "draq.io/v1alpha1", "kind": "Topology", "metadata": {"name": topology},
           "spec": {"levels": [{"name": "rack", "nodeLabel": label}]}},
          {"apiVersion": "draq.io/v1alpha1", "kind": "QuotaUnit", "metadata": {"name": unit},
           "spec": {"devices": {"deviceClassNames": [GPU_CLASS]}}},
          {"apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": cq}, "spec": spec},
          {"apiVersion": "draq.io/v1alpha1", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": namespace},
           "spec": {"clusterQueue": cq}})


def rack_gang(control_plane: ControlPlane, namespace: str, group: str, size: int,
              priority_class: str | None = None) -> list[str]:
    """`size` gated pods asking for one rack, each with its own claim of 8 GPUs (a whole node); no node pinned;
    of `priority_class` when given."""
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": f"{group}-gpus", "namespace": namespace},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": 8}}]}}}}
    names = [f"{group}-{i}" for i in range(size)]
    pods = [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": name, "namespace": namespace,
                          "labels": {QUEUE_LABEL: "lq", GROUP_LABEL: group, GROUP_MIN_LABEL: str(size)},
                          "annotations": {TOPOLOGY_REQUIRED_ANNOTATION: "rack"}},
             "spec": {"schedulingGates": [{"name": GATE}],
                      "containers": [{"name": "main", "image": "registry.example/cuda:12",
                                      "resources": {"claims": [{"name": "gpus"}]}}],
                      "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": f"{group}-gpus"}]}}
            for name in names]
    for pod in pods:
        if priority_class is not None:
            pod["spec"]["priorityClassName"] = priority_class
    apply(control_plane, template, *pods)
    return names


def test_a_required_rack_gang_is_bound_inside_one_rack(
        control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, namespace: str, unique: str,
        operator: RunningOperator) -> None:  # noqa: F811
    # Rack "small" has 2 nodes, rack "large" 3: best fit puts a 2-node gang in the small rack, keeping the
    # large one whole; a 3-node gang then fits only the large rack.
    rack_of = racked_nodes(api, nodesim, unique, {"small": 2, "large": 3})
    topology_queues(control_plane, namespace, unique)
    core = client.CoreV1Api(api)
    for group, size, rack in (("pair", 2, "small"), ("trio", 3, "large")):
        members = rack_gang(control_plane, namespace, group, size)
        until(f"every member of {group} bound and running", lambda members=members: all(
            (p := core.read_namespaced_pod(m, namespace)).status.phase == "Running" and p.spec.node_name
            for m in members), timeout=90)
        bound = {core.read_namespaced_pod(m, namespace).spec.node_name for m in members}
        assert len(bound) == size and {rack_of.get(n) for n in bound} == {rack}, (group, bound)
        record = pod_group(api, namespace, group)
        assert record is not None
        assert {p["node"] for p in record["status"]["plan"]["pods"]} == bound


def test_a_required_rack_gang_preempts_inside_one_rack_and_is_bound_there(
        control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, namespace: str, unique: str,
        operator: RunningOperator) -> None:  # noqa: F811
    # Racks a and b of two nodes, each node held by one 8-GPU group: x (a-0) and y (b-0) admitted last, so the
    # most preferred victims; z (b-1) before them; keep (a-1) of a priority above the gang's. Without a
    # topology the search would evict x and y, one in each rack; the rack-required gang evicts y and z.
    # A rack label of this test alone: other tests' racks (free once their namespaces are gone) are no racks here.
    label = f"e2e.draq.io/rack-{unique}"
    rack_of = racked_nodes(api, nodesim, unique, {"a": 2, "b": 2}, label)
    node = {f"{rack}-{index}": f"topo-{unique}-{rack}-{index}" for rack in "ab" for index in range(2)}
    topology_queues(control_plane, namespace, unique, preempting=True, label=label)
    core = client.CoreV1Api(api)
    keep = priority_class(control_plane, f"keep-{unique}", 10)
    for group, where, cls in (("keep", "a-1", keep), ("z", "b-1", None), ("x", "a-0", None), ("y", "b-0", None)):
        [member] = gang(control_plane, namespace, group, [node[where]], gpus_each=8, priority_class=cls)
        until(f"{group} running", lambda m=member: (p := core.read_namespaced_pod(m, namespace))
              .status.phase == "Running" and bool(p.spec.node_name), timeout=60)
        until(f"{group} recorded Running", lambda g=group: ((pod_group(api, namespace, g) or {}).get("status") or {})
              .get("phase") == "Running", timeout=30)
    high = priority_class(control_plane, f"high-{unique}", 5)
    members = rack_gang(control_plane, namespace, "high", 2, priority_class=high)
    until("y and z preempted", lambda: all(
        admitted_reason(pod_group(api, namespace, g) or {}) == "Preempted" for g in ("y", "z")), timeout=60)
    until("high bound", lambda: all((p := core.read_namespaced_pod(m, namespace)).status.phase == "Running"
                                    and p.spec.node_name for m in members), timeout=120)
    bound = {core.read_namespaced_pod(m, namespace).spec.node_name for m in members}
    assert bound == {node["b-0"], node["b-1"]} and {rack_of[n] for n in bound} == {"b"}
    for group in ("x", "keep"):
        assert ((pod_group(api, namespace, group) or {}).get("status") or {}).get("phase") == "Running", group
    events = core.list_namespaced_event(namespace).items
    assert sorted(e.involved_object.name for e in events if e.reason == "Preempted") == ["y", "z"]
