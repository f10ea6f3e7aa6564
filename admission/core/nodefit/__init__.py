"""The kube-scheduler's node filters that decide whether a pod fits a node, besides its DRA claims.

NodeUnschedulable, TaintToleration, NodeAffinity (node selector and required node affinity),
NodeResourcesFit (cpu, memory, ephemeral-storage, extended resources, pod count) with the
scheduler's own request arithmetic (sidecars, init containers, pod-level resources, overhead), and
InterPodAffinity (`interpod`: required pod affinity and anti-affinity, the pod's own and the existing
pods') and PodTopologySpread (`spread`: constraints with whenUnsatisfiable DoNotSchedule).
Pure: `PodFit.of(pod)` and `NodeFitIndex(nodes, pods, classes)` are computed once; `static_reason`
and `resource_reasons` answer per node, in the scheduler's words.
"""

from admission.core.nodefit.affinity import matches_node_affinity, matches_node_selector
from admission.core.nodefit.fit import (
    AFFINITY_MISMATCH,
    NODE_NAME_MISMATCH,
    TOO_MANY_PODS,
    UNSCHEDULABLE,
    NodeFacts,
    NodeFitIndex,
    NodeUsage,
    PodFit,
    insufficient,
    pod_amounts,
    resource_reasons,
    static_reason,
    untolerated,
)
from admission.core.nodefit.interpod import (
    AFFINITY_UNMET,
    ANTI_AFFINITY_UNMET,
    EXISTING_ANTI_AFFINITY,
    ExistingAntiAffinity,
)
from admission.core.nodefit.requests import (
    allocatable_amounts,
    container_requests,
    is_extended_resource,
    is_scalar_resource,
    pod_requests,
    scheduler_amounts,
)
from admission.core.nodefit.spread import SPREAD_LABEL_MISSING, SPREAD_UNMET
from admission.core.nodefit.taints import tolerates_unschedulable, untolerated_taint

__all__ = [
    "AFFINITY_MISMATCH",
    "AFFINITY_UNMET",
    "ANTI_AFFINITY_UNMET",
    "EXISTING_ANTI_AFFINITY",
    "NODE_NAME_MISMATCH",
    "SPREAD_LABEL_MISSING",
    "SPREAD_UNMET",
    "TOO_MANY_PODS",
    "UNSCHEDULABLE",
    "ExistingAntiAffinity",
    "NodeFacts",
    "NodeFitIndex",
    "NodeUsage",
    "PodFit",
    "allocatable_amounts",
    "container_requests",
    "insufficient",
    "is_extended_resource",
    "is_scalar_resource",
    "matches_node_affinity",
    "matches_node_selector",
    "pod_amounts",
    "pod_requests",
    "resource_reasons",
    "scheduler_amounts",
    "static_reason",
    "tolerates_unschedulable",
    "untolerated",
    "untolerated_taint",
]
