"""The validating webhook: dispatch on the kind of object under review."""

from __future__ import annotations

from admission.core.labels import API_GROUP
from admission.core.review.claims import CLAIM_KINDS, validate_claim
from admission.core.review.draq_objects import DRAQ_CHECKS
from admission.core.review.envelope import AdmissionRequest, Decision
from admission.core.review.epoch_check import validate_stamped_write
from admission.core.review.lookups import GatingPolicy, Lookups
from admission.core.review.pod_group_status import validate_pod_group_status
from admission.core.review.pod_validation import validate_pod
from admission.core.review.workload_total import validate_workload_create
from admission.core.workloads import KINDS

SUSPENDABLE = frozenset((k.api_version.rpartition("/")[0], k.kind) for k in KINDS if k.suspendable)
"""The workload kinds draq suspends (a Job, JobSet, RayCluster, PyTorchJob, ...), by API group and kind."""
WORKLOADS = frozenset((k.api_group, k.kind) for k in KINDS)
"""Every workload kind draq groups, by API group and kind."""


def validate(request: AdmissionRequest, lookups: Lookups, policy: GatingPolicy) -> Decision:
    if request.kind.group == API_GROUP and request.kind.kind == "PodGroup" and request.sub_resource == "status":
        return validate_pod_group_status(request, lookups, policy)
    kind = request.kind
    if request.sub_resource:
        return Decision.allow()
    if kind.group == "" and kind.kind == "Pod" and request.operation in ("CREATE", "UPDATE", "DELETE"):
        return validate_pod(request, lookups, policy)
    if request.operation == "UPDATE" and (kind.group, kind.kind) in SUSPENDABLE:
        return validate_stamped_write(request, lookups, policy)  # suspensions and resumptions
    if request.operation == "CREATE" and (kind.group, kind.kind) in WORKLOADS:
        return validate_workload_create(request, lookups)
    if request.operation not in ("CREATE", "UPDATE"):
        return Decision.allow()
    if kind.group == API_GROUP:
        check = DRAQ_CHECKS.get(kind.kind)
        return check(request, lookups) if check else Decision.allow()
    if kind.group == "resource.k8s.io" and kind.kind in CLAIM_KINDS:
        return validate_claim(request, lookups)
    return Decision.allow()
