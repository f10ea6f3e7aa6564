"""Workload kinds: how a pod finds its group through its owners, what a group declares, how it is evicted."""

from admission.core.workloads.declared import declared_shape
from admission.core.workloads.kinds import (
    BY_KIND,
    DEFAULT_FRAMEWORKS,
    FRAMEWORKS,
    KINDS,
    REQUIRES,
    Grouping,
    WorkloadKind,
    enabled_kinds,
    with_required,
)
from admission.core.workloads.membership import (
    LWS_GROUP_INDEX_LABEL,
    LWS_NAME_LABEL,
    Membership,
    Owners,
    controller_of,
    membership,
    walk_key,
)
from admission.core.workloads.shapes import RoleSpec, job_size

__all__ = [
    "BY_KIND", "DEFAULT_FRAMEWORKS", "FRAMEWORKS", "KINDS", "LWS_GROUP_INDEX_LABEL", "LWS_NAME_LABEL", "REQUIRES",
    "Grouping", "Membership", "Owners", "RoleSpec",
    "WorkloadKind", "controller_of", "declared_shape", "enabled_kinds", "job_size", "membership", "walk_key",
    "with_required",
]
