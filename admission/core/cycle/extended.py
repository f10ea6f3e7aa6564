"""The claims the scheduler made for pods' extended resources, by pod, found once per mapping of claims.

One pass's cycle, preemption plan and charge reconciliation all read the same snapshot's claims (a snapshot
never changes; the next one is a new mapping): with thousands of claims, finding them three times a pass
was a visible share of a flooded pass.
"""

from __future__ import annotations

from collections.abc import Mapping

from admission.core.models import ResourceClaim
from admission.core.quota import extended_claims

_last: tuple[Mapping[str, ResourceClaim], Mapping[tuple[str, str], ResourceClaim]] | None = None


def extended_claims_of(claims: Mapping[str, ResourceClaim]) -> Mapping[tuple[str, str], ResourceClaim]:
    """`extended_claims(claims.values())`, the last result again while `claims` is the same mapping object."""
    global _last
    last = _last
    if last is not None and last[0] is claims:
        return last[1]
    found = extended_claims(claims.values())
    _last = (claims, found)  # one assignment: a worker thread and the loop never see half of it
    return found
