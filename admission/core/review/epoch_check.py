"""Validating webhook, the fence: a write of draq's own user is allowed only under the current epoch.

draq stamps what its leader writes with the epoch of its term of leadership (the Lease's uid,
leaseTransitions and holder; `admission.core.leadership`): PodGroup status in `status.epoch`, pods
and Jobs in the annotation `draq.io/epoch`. A write whose epoch is not the one the Lease stands for
now comes from a leader that has been replaced (or that let its term lapse), and is refused. The
Lease is read afresh for every such review, never from a cache that may be behind.
"""

from __future__ import annotations

from admission.core.errors import InvalidInput
from admission.core.leadership import Epoch, annotated_epoch, lease_epoch
from admission.core.models import ObjectRef
from admission.core.review.envelope import AdmissionRequest, Decision
from admission.core.review.lookups import GatingPolicy, Lookups


def under_current_epoch(request: AdmissionRequest, written: Epoch | None, what: str, lookups: Lookups,
                        policy: GatingPolicy) -> Decision:
    """Allow `what` (e.g. "status") written under `written` only while that epoch is the Lease's;
    nothing stamped (draq run without leader election) is not checked."""
    if written is None:
        return Decision.allow()
    where = f"{policy.lease_namespace}/{policy.lease_name}"
    lease = lookups.lease(policy.lease_namespace, policy.lease_name)
    if lease is None:
        return Decision.deny(
            f"{request.describe()}: {what} written under the leadership of {written.describe()}, but draq's "
            f"Lease {where} could not be read, so it cannot be told whether that leader is still in its term; "
            "the write is refused and the leader will try again",
            "ServiceUnavailable", 503, missing=[ObjectRef("Lease", policy.lease_namespace, policy.lease_name)],
        )
    current = lease_epoch(lease)
    if current == written:
        return Decision.allow()
    now = f"held by {current.describe()}" if current is not None else "held by nobody"
    return Decision.deny(
        f"{request.describe()}: {what} written under the leadership of {written.describe()}, which has ended: "
        f"the Lease {where} is now {now}. A deposed leader's writes are refused; the current leader decides "
        "this group again",
        "Conflict", 409,
    )


def validate_stamped_write(request: AdmissionRequest, lookups: Lookups, policy: GatingPolicy) -> Decision:
    """A pod or Job UPDATE, or a pod DELETE, by draq's own user: the epoch stamped on the object (the
    new object of an UPDATE, the object being deleted for a DELETE: draq stamps it first) must be the
    current one. Writes by anyone else are not the fence's business."""
    if request.username != policy.draq_user:
        return Decision.allow()
    stamped = request.old_object if request.operation == "DELETE" else request.object
    try:
        written = annotated_epoch(stamped or {})
    except InvalidInput as err:
        return Decision.deny(f"{request.describe()}: {err.field}: {err.reason}", "Invalid", 422)
    what = "deletion" if request.operation == "DELETE" else "update"
    return under_current_epoch(request, written, what, lookups, policy)
