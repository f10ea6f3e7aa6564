"""A gang with `required: rack` on the real control plane: draq plans it inside one rack (the fullest that
holds it) and the real scheduler binds every member there.

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
from e2e.test_operator import GPU_CLASS, RunningOperator, apply, crds, operator, pod_group  # noqa: F401
from e2e.waiting import until

RACK_LABEL = "e2e.draq.io/rack"


def racked_nodes(api: Any, nodesim: NodeSimulator, unique: str, racks: dict[str, int]) -> dict[str, str]:
    """`racks[name]` H100 nodes in each rack; node -> its rack."""
    core = client.CoreV1Api(api)
    found = {}
    for rack, count in racks.items():
        for index in range(count):
            name = f"topo-{unique}-{rack}-{index}"
            nodesim.add_node(name, "h100")
            core.patch_node(name, {"metadata": {"labels": {RACK_LABEL: f"{unique}-{rack}"}}})
            found[name] = rack
    return found


def topology_queues(control_plane: ControlPlane, namespace: str, unique: str) -> None:
    unit, cq, topology = f"gpus-{unique}", f"cq-{unique}", f"racks-{unique}"
    control_plane.kubectl("wait", "--for=condition=Established", "crd/topologies.draq.io", "--timeout=60s")
    apply(control_plane,
          {"apiVersion": "draq.io/v1alpha1", "kind": "Topology", "metadata": {"name": topology},
           "spec": {"levels": [{"name": "rack", "nodeLabel": RACK_LABEL}]}},
          {"apiVersion": "draq.io/v1alpha1", "kind": "QuotaUnit", "metadata": {"name": unit},
           "spec": {"devices": {"deviceClassNames": [GPU_CLASS]}}},
          {"apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": cq},
           "spec": {"namespaceSelector": {}, "topologyName": topology, "quotas": [{"unit": unit, "nominal": 64}]}},
          {"apiVersion": "draq.io/v1alpha1", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": namespace},
           "spec": {"clusterQueue": cq}})


def rack_gang(control_plane: ControlPlane, namespace: str, group: str, size: int) -> list[str]:
    """`size` gated pods asking for one rack, each with its own claim of 8 GPUs (a whole node); no node pinned."""
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
