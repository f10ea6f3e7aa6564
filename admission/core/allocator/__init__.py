"""DRA structured-parameters allocation as the kube-scheduler does it (resource.k8s.io/v1).

Public API: `Snapshot` (objects indexed once), `Allocator(snapshot, gates).allocate(node, claims)`
returning an `Outcome`, `explain(...)` for a "why not", and `place_gang(...)` for groups of pods.
"""

from admission.core.allocator.api import DEFAULT_BUDGET, Allocator, Outcome, Snapshot, Status
from admission.core.allocator.errors import (
    INVALID_POOLS,
    AllocationError,
    MissingDeviceClass,
    NodeAllocationError,
)
from admission.core.allocator.explain import Explanation, RequestExplanation, explain, explain_best
from admission.core.allocator.gang import (
    GangMember,
    GangPlacement,
    KnownUnfit,
    gang_shape,
    members_for,
    place_gang,
    pod_claims,
)
from admission.core.allocator.inventory import NodeView, PoolView, SnapshotInventory
from admission.core.allocator.results import allocation_to_manifest
from admission.core.allocator.room import DomainFigure, domain_figures
from admission.core.allocator.topology import (
    Domain,
    DomainPlacement,
    devices_needed,
    domains_used,
    levels_out_of_order,
    place_beside,
    place_in_topology,
    topology_domains,
)
from admission.core.allocator.usage import Usage

__all__ = [
    "DEFAULT_BUDGET",
    "INVALID_POOLS",
    "AllocationError",
    "Allocator",
    "Domain",
    "DomainFigure",
    "DomainPlacement",
    "Explanation",
    "GangMember",
    "GangPlacement",
    "KnownUnfit",
    "MissingDeviceClass",
    "NodeAllocationError",
    "NodeView",
    "Outcome",
    "PoolView",
    "RequestExplanation",
    "Snapshot",
    "SnapshotInventory",
    "Status",
    "Usage",
    "allocation_to_manifest",
    "devices_needed",
    "domain_figures",
    "domains_used",
    "explain",
    "explain_best",
    "gang_shape",
    "levels_out_of_order",
    "members_for",
    "place_beside",
    "place_gang",
    "place_in_topology",
    "pod_claims",
    "topology_domains",
]
