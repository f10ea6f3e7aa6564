"""Fair sharing within a cohort: each ClusterQueue's weighted dominant share of its quota units.

A queue's share of a unit is its usage of that unit over the cohort's nominal quota of it (the sum of
its members' nominal quotas); its dominant share is the largest over its units, divided by its
`fairSharing.weight`. A queue with weight 0 sorts after every weighted one. A queue without a cohort
is its own cohort. Admission serves, at equal priority, the queue with the lowest share first;
reclaim takes from the queue with the highest.
"""

from __future__ import annotations

from fractions import Fraction

from admission.core.quota.accounting import QueueState
from admission.core.quota.amounts import Amounts


def dominant_share(state: QueueState, queue: str, extra: Amounts | None = None) -> tuple[int, Fraction]:
    """A sortable share (lower is served first): `(1, share)` for weight 0, else `(0, share / weight)`.
    `extra`: usage to add, e.g. what was admitted earlier in the same cycle."""
    cq = state.queue(queue)
    usage = state.usage(queue) + (extra or Amounts.of({}))
    members = state.cohort_members(queue)
    share = Fraction(0)
    for unit, amount in usage:
        total = sum((q.nominal.value for m in members if (q := m.quota(unit)) is not None), Fraction(0))
        if total > 0:
            share = max(share, amount / total)
    if cq.fair_sharing_weight == 0:
        return 1, share
    return 0, share / cq.fair_sharing_weight
