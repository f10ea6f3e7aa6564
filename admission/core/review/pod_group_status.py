"""Validating webhook, PodGroup status written by draq: the fence that makes a deposed leader's writes fail.

draq stamps every PodGroup status it writes with the epoch of its term of leadership (`status.epoch`);
a write of draq's user under an epoch that has ended is refused (`epoch_check`), so it cannot record an
admission, a phase or a charge the current leader does not know about. A status without an epoch
(draq run without leader election) is not checked.
"""

from __future__ import annotations

from admission.core.errors import InvalidInput
from admission.core.leadership import EPOCH_FIELD, read_epoch
from admission.core.review.envelope import AdmissionRequest, Decision
from admission.core.review.epoch_check import under_current_epoch
from admission.core.review.lookups import GatingPolicy, Lookups
from admission.core.review.readers import mapping


def validate_pod_group_status(request: AdmissionRequest, lookups: Lookups, policy: GatingPolicy) -> Decision:
    if request.operation != "UPDATE":
        return Decision.allow()
    if request.username != policy.draq_user:
        return Decision.deny(
            f"{request.describe()}, field status: only draq ({policy.draq_user}) writes PodGroup status: its phase, "
            "charge and plan are draq's admission record. Change the group's pods or spec instead", "Forbidden", 403)
    try:
        written = read_epoch(mapping(mapping(request.object).get("status")).get(EPOCH_FIELD))
    except InvalidInput as err:
        return Decision.deny(f"{request.describe()}: {err.field}: {err.reason}", "Invalid", 422)
    return under_current_epoch(request, written, "status", lookups, policy)
