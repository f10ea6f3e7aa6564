"""A ClusterQueue's preemption policies and fair-sharing weight, parsed from `spec.preemption` and
`spec.fairSharing`.

- `withinClusterQueue`: whom a pending group may evict from its own queue (`Never`, `LowerPriority`).
- `reclaimWithinCohort`: whom it may evict from other queues of its cohort that borrow, to take back
  nominal quota its queue lent (`Never`, `Any`, `LowerPriority`).
- `borrowWithinCohort`: whether a group may preempt while its own admission would borrow (`Never`,
  `LowerPriority`: then only lower-priority groups are evicted).
- `minimumRunSeconds`: a group admitted less than this long ago is never evicted for another.
- `fairSharing.weight`: the queue's share of its cohort relative to the others (default 1; 0 means it
  is served last and reclaimed from first).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from typing import TypeVar

from admission.core.models._fields import Fields


class WithinQueue(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"


class Reclaim(StrEnum):
    NEVER = "Never"
    ANY = "Any"
    LOWER_PRIORITY = "LowerPriority"


class BorrowWithinCohort(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"


E = TypeVar("E", bound=StrEnum)
MAX_MINIMUM_RUN_SECONDS = 31 * 24 * 3600


@dataclass(frozen=True, slots=True)
class PreemptionPolicy:
    within_cluster_queue: WithinQueue = WithinQueue.NEVER
    reclaim_within_cohort: Reclaim = Reclaim.NEVER
    borrow_within_cohort: BorrowWithinCohort = BorrowWithinCohort.NEVER
    minimum_run_seconds: int = 0

    @property
    def enabled(self) -> bool:
        return self.within_cluster_queue is not WithinQueue.NEVER or self.reclaim_within_cohort is not Reclaim.NEVER


def parse_preemption(spec: Fields) -> PreemptionPolicy:
    if not spec.has("preemption"):
        return PreemptionPolicy()
    fields = spec.map("preemption")
    within = _choice(fields, "withinClusterQueue", WithinQueue)
    reclaim = _choice(fields, "reclaimWithinCohort", Reclaim)
    borrow = _choice(fields, "borrowWithinCohort", BorrowWithinCohort)
    minimum = fields.int("minimumRunSeconds")
    if not 0 <= minimum <= MAX_MINIMUM_RUN_SECONDS:
        raise fields.fail("minimumRunSeconds", f"{minimum} is out of range: 0 to {MAX_MINIMUM_RUN_SECONDS} "
                          "(31 days)")
    if reclaim is not Reclaim.NEVER and not spec.opt_str("cohort"):
        raise fields.fail("reclaimWithinCohort", f"{reclaim.value} needs spec.cohort: without a cohort "
                          "nothing is lent, so nothing can be reclaimed")
    return PreemptionPolicy(within, reclaim, borrow, minimum)


def parse_fair_sharing_weight(spec: Fields) -> Fraction:
    if not spec.has("fairSharing"):
        return Fraction(1)
    fields = spec.map("fairSharing")
    if not fields.has("weight"):
        return Fraction(1)
    weight = fields.quantity("weight").value
    if weight < 0:
        raise fields.fail("weight", f"must not be negative, got {fields.raw('weight')}")
    return weight


def _choice(fields: Fields, key: str, kind: type[E]) -> E:
    values = [member.value for member in kind]
    value = fields.str(key) or values[0]
    if value not in values:
        raise fields.fail(key, f"unknown policy {value!r}; expected {' or '.join(values)}")
    return kind(value)
