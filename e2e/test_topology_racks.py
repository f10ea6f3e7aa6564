"""The kit's NVL72-like racks on the real control plane: two racks of 18 simulated GB200-like nodes (4 GPUs each,
one NVLink clique per rack, published as node labels and as the GPUs' `cliqueID` attribute by the node
simulator). With one rack fragmented, draq plans a rack-required gang whole in the other and the real
scheduler binds every member there; a gang that requires the clique (the device-attribute level) is bound
inside one clique, on devices of that clique.

The racks are the only nodes with the kit's rack label in this module, so their Topology sees no other rack.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from admission.core.labels import GATE, GROUP_LABEL, GROUP_MIN_LABEL, QUEUE_LABEL
from admission.core.models import TOPOLOGY_REQUIRED_ANNOTATION
from admission.core.simulate import CLIQUE_ATTRIBUTE, CLIQUE_LABEL, RACK_LABEL
from admission.localcluster.controlplane import ControlPlane
from admission.localcluster.nodesim import NodeSimulator
from e2e.test_operator import (  # noqa: F401 (fixtures)
    GPU_CLASS,
    RunningOperator,
    apply,
    crds,
    gang,
    operator,
    pod_group,
)
from e2e.waiting import until


def racks_queue(control_plane: ControlPlane, namespace: str, unique: str) -> None:
    """A Topology of the kit's rack label and clique attribute, and a ClusterQueue naming it."""
    unit, cq, topology = f"gpus-{unique}", f"cq-{unique}", f"nvl72-{unique}"
    control_plane.kubectl("wait", "--for=condition=Established", "crd/topologies.draq.io", "--timeout=60s")
    apply(control_plane,
          {"apiVersion": "draq.io/v1alpha1", "kind": "Topology", "metadata": {"name": topology},
           "spec": {"levels": [{"name": "rack", "nodeLabel": RACK_LABEL},
                               {"name": "clique", "deviceAttribute": f"gpu.nvidia.com/{CLIQUE_ATTRIBUTE}"}]}},
          {"apiVersion": "draq.io/v1alpha1", "kind": "QuotaUnit", "metadata": {"name": unit},
           "spec": {"devices": {"deviceClassNames": [GPU_CLASS]}}},
          {"apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": cq},
           "spec": {"namespaceSelector": {}, "topologyName": topology, "quotas": [{"unit": unit, "nominal": 144}]}},
          {"apiVersion": "draq.io/v1alpha1", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": namespace},
           "spec": {"clusterQueue": cq}})


def level_gang(control_plane: ControlPlane, namespace: str, group: str, size: int, level: str) -> list[str]:
    """`size` gated pods of 4 GPUs each (a whole GB200-like node) that require one domain of `level`."""
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": f"{group}-gpus", "namespace": namespace},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": 4}}]}}}}
    names = [f"{group}-{i}" for i in range(size)]
    apply(control_plane, template, *({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {QUEUE_LABEL: "lq", GROUP_LABEL: group, GROUP_MIN_LABEL: str(size)},
                     "annotations": {TOPOLOGY_REQUIRED_ANNOTATION: level}},
        "spec": {"schedulingGates": [{"name": GATE}],
                 "containers": [{"name": "main", "image": "registry.example/cuda:12",
                                 "resources": {"claims": [{"name": "gpus"}]}}],
                 "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": f"{group}-gpus"}]}}
        for name in names))
    return names


def bound_nodes(core: client.CoreV1Api, namespace: str, members: list[str], what: str) -> set[str]:
    until(f"every member of {what} bound and running", lambda: all(
        (p := core.read_namespaced_pod(m, namespace)).status.phase == "Running" and p.spec.node_name
        for m in members), timeout=120)
    return {core.read_namespaced_pod(m, namespace).spec.node_name for m in members}


def allocated_cliques(api: Any, namespace: str, members: list[str], clique_of_device: dict[str, str]) -> set[str]:
    """The cliques of the devices allocated to the members' claims."""
    claims = client.CustomObjectsApi(api).list_namespaced_custom_object(
        "resource.k8s.io", "v1", namespace, "resourceclaims")["items"]
    owned = [c for c in claims if any(o["name"] in members for o in c["metadata"].get("ownerReferences", []))]
    assert len(owned) == len(members)
    return {clique_of_device[f"{r['pool']}/{r['device']}"]
            for c in owned for r in c["status"]["allocation"]["devices"]["results"]}


def device_cliques(api: Any, nodes: set[str]) -> dict[str, str]:
    """pool/device -> the cliqueID the node simulator published on it, for the devices of `nodes`."""
    slices = client.CustomObjectsApi(api).list_cluster_custom_object(
        "resource.k8s.io", "v1", "resourceslices")["items"]
    return {f"{s['spec']['pool']['name']}/{d['name']}": d["attributes"][CLIQUE_ATTRIBUTE]["string"]
            for s in slices if s["spec"].get("nodeName") in nodes for d in s["spec"].get("devices", [])
            if CLIQUE_ATTRIBUTE in d.get("attributes", {})}


def test_a_rack_gang_lands_whole_in_the_rack_that_is_not_fragmented(
        control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, namespace: str, unique: str,
        operator: RunningOperator) -> None:  # noqa: F811
    fragmented = nodesim.add_rack(f"nvl-{unique}-a", "nvl72")
    whole = nodesim.add_rack(f"nvl-{unique}-b", "nvl72")
    racks_queue(control_plane, namespace, unique)
    core = client.CoreV1Api(api)
    # A GPU held on 6 of rack a's 18 nodes: it keeps the most free devices short of whole (66 of 72, so best
    # fit tries it first) but only 12 whole nodes, fewer than the gang's 14 members.
    pinned = fragmented[1::3]
    holders = gang(control_plane, namespace, "holders", pinned, gpus_each=1)
    assert bound_nodes(core, namespace, holders, "holders") == set(pinned)

    members = level_gang(control_plane, namespace, "pretrain", 14, "rack")
    bound = bound_nodes(core, namespace, members, "pretrain")
    assert len(bound) == 14 and bound <= set(whole), bound
    record = pod_group(api, namespace, "pretrain")
    assert record is not None
    assert {p["node"] for p in record["status"]["plan"]["pods"]} == bound

    # Rack a now has the most whole nodes (12 against b's 4): a gang that requires one NVLink clique (the
    # devices' attribute, not a node label) is bound there, on devices of that one clique.
    cliques = device_cliques(api, set(fragmented) | set(whole))
    members = level_gang(control_plane, namespace, "finetune", 8, "clique")
    bound = bound_nodes(core, namespace, members, "finetune")
    assert len(bound) == 8 and bound <= set(fragmented) - set(pinned), bound
    [clique] = allocated_cliques(api, namespace, members, cliques)
    assert clique == core.read_node(fragmented[0]).metadata.labels[CLIQUE_LABEL]
