"""Validating webhook, PodGroup status written by draq: the fence that makes a deposed leader's writes fail.

draq stamps every PodGroup status it writes with the epoch of its term of leadership (the Lease's
uid, leaseTransitions and holder; `admission.core.leadership`). A write of draq's user whose epoch is
not the one the Lease stands for now comes from a leader that has been replaced (or that let its term
lapse): it is refused, so it cannot record an admission, a phase or a charge the current leader does
not know about. The Lease is read afresh for every such review, never from a cache that may be behind.
A status without an epoch (draq run without leader election) is not checked.
"""

from __future__ import annotations

from admission.core.errors import InvalidInput
from admission.core.leadership import EPOCH_FIELD, lease_epoch, read_epoch
from admission.core.models import ObjectRef
from admission.core.review.envelope import AdmissionRequest, Decision
from admission.core.review.lookups import GatingPolicy, Lookups
from admission.core.review.readers import mapping


def validate_pod_group_status(request: AdmissionRequest, lookups: Lookups, policy: GatingPolicy) -> Decision:
    if request.operation != "UPDATE" or request.username != policy.draq_user:
        return Decision.allow()
    try:
        written = read_epoch(mapping(mapping(request.object).get("status")).get(EPOCH_FIELD))
    except InvalidInput as err:
        return Decision.deny(f"{request.describe()}: {err.field}: {err.reason}", "Invalid", 422)
    if written is None:
        return Decision.allow()
    where = f"{policy.lease_namespace}/{policy.lease_name}"
    lease = lookups.lease(policy.lease_namespace, policy.lease_name)
    if lease is None:
        return Decision.deny(
            f"{request.describe()}: status written under the leadership of {written.describe()}, but draq's "
            f"Lease {where} could not be read, so it cannot be told whether that leader is still in its term; "
            "the write is refused and the leader will try again",
            "ServiceUnavailable", 503, missing=[ObjectRef("Lease", policy.lease_namespace, policy.lease_name)],
        )
    current = lease_epoch(lease)
    if current == written:
        return Decision.allow()
    now = f"held by {current.describe()}" if current is not None else "held by nobody"
    return Decision.deny(
        f"{request.describe()}: status written under the leadership of {written.describe()}, which has ended: "
        f"the Lease {where} is now {now}. A deposed leader's writes are refused; the current leader decides "
        "this group again",
        "Conflict", 409,
    )
