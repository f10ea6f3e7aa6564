"""A pod's topology request (`draq.io/topology-required` / `-preferred`) checked at creation against the
Topology its ClusterQueue names: a malformed request, a ClusterQueue that names no Topology, or a level the
Topology lacks is refused with what to write instead. A Topology the webhook does not know (yet), or one that
does not parse, is let through with a warning: the operator makes the group wait with the reason.
Whether a domain of the level can hold the gang depends on the nodes and is left to the operator."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from admission.core.errors import DraqError
from admission.core.labels import API_VERSION
from admission.core.models import TopologyRequest, annotated_request, parse_topology
from admission.core.review.envelope import AdmissionRequest, Decision
from admission.core.review.lookups import Lookups
from admission.core.review.queue_choice import QueueChoice
from admission.core.review.readers import mapping


def topology_level_known(request: AdmissionRequest, queue: QueueChoice, lookups: Lookups) -> Decision:
    annotations = mapping(mapping(request.object).get("metadata")).get("annotations")
    asked = annotated_request({k: v for k, v in mapping(annotations).items() if isinstance(v, str)})
    if asked is None:
        return Decision.allow()
    if isinstance(asked, str):
        return Decision.deny(f"{request.describe()}: {asked}", "Invalid", 422)
    local = lookups.local_queue(request.namespace, queue.name)
    name = mapping(mapping(local).get("spec")).get("clusterQueue")
    cluster_queue = lookups.cluster_queue(name) if isinstance(name, str) else None
    if cluster_queue is None:
        return Decision.allow()  # a missing queue is answered by the queue check
    return _against_topology(request, asked, str(name), mapping(cluster_queue.get("spec")), lookups)


def _against_topology(request: AdmissionRequest, asked: TopologyRequest, cluster_queue: str,
                      spec: Mapping[str, Any], lookups: Lookups) -> Decision:
    asks = f"{request.describe()}: it asks for topology {asked.describe()}"
    name = spec.get("topologyName")
    if not isinstance(name, str) or not name:
        return Decision.deny(f"{asks}, but ClusterQueue {cluster_queue} names no Topology (spec.topologyName); "
                             "remove the topology annotation, or have the ClusterQueue's administrator set one",
                             "Invalid", 422)
    manifest = lookups.topology(name)
    if manifest is None:
        return Decision.allow(warnings=[f"Topology {name} (of ClusterQueue {cluster_queue}) does not exist: the "
                                        "pod's group waits until it does"])
    try:
        topology = parse_topology({"apiVersion": API_VERSION, "kind": "Topology", **manifest})
    except DraqError as err:
        return Decision.allow(warnings=[f"Topology {name} (of ClusterQueue {cluster_queue}) is invalid ({err}): "
                                        "the pod's group waits until it is fixed"])
    if topology.level(asked.level) is None:
        levels = ", ".join(level.name for level in topology.levels)
        return Decision.deny(f"{asks}, but Topology {name} (of ClusterQueue {cluster_queue}) has no level "
                             f"{asked.level!r}; its levels: {levels}. Name one of them in the annotation",
                             "Invalid", 422)
    return Decision.allow()
