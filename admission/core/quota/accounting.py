"""Queue accounting: usage, reservations and cohort borrowing, as an immutable state.

Usage of a ClusterQueue is what its admitted groups were charged: `reserved` while their pods are
not all bound, `used` afterwards; both count against quota. Within a cohort, each queue lends its
unused nominal quota up to its `lendingLimit` (all of it when absent) and borrows at most
`borrowingLimit` beyond its nominal (unlimited when absent), as Kueue defines them. A unit a queue
has no quota for is not limited in that queue (its usage is still tracked).

A queue's usage can be *unknown*: a record of an admission to it that cannot be read (a PodGroup whose
status does not parse), or a queue of its cohort whose definition cannot be read. Nothing fits such a
queue, nor any queue of its cohort (what the others may borrow depends on it), until it is known again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from types import MappingProxyType
from typing import Literal, TypeVar

from admission.core.errors import DraqError
from admission.core.quota.amounts import NONE, Amounts, format_amount
from admission.core.quota.queues import ClusterQueue, QueueQuota

K = TypeVar("K")
V = TypeVar("V")
Bucket = Literal["used", "reserved"]


class AccountingError(DraqError):
    """An operation that makes no sense on the current state (unknown queue or group, double admit)."""


@dataclass(frozen=True, slots=True)
class Admission:
    """A group's recorded admission: where it is charged and how much."""

    group: str
    cluster_queue: str
    charge: Amounts
    local_queue: str = ""
    bound: bool = False


@dataclass(frozen=True, slots=True)
class QuotaFit:
    """Whether a charge fits a queue. `reason` names unit, usage, nominal and need when it does not."""

    ok: bool
    reason: str = ""
    units: tuple[str, ...] = ()
    borrowed: Amounts = NONE


@dataclass(frozen=True, slots=True)
class UnitStatus:
    unit: str
    nominal: Fraction | None
    used: Fraction
    reserved: Fraction
    borrowed: Fraction


@dataclass(frozen=True, slots=True)
class QueueState:
    queues: Mapping[str, ClusterQueue]
    admissions: Mapping[str, Admission]
    used: Mapping[str, Amounts]
    reserved: Mapping[str, Amounts]
    # Queue -> why its usage is unknown (see the module's docstring).
    unknown: Mapping[str, str] = field(default_factory=lambda: _frozen({}))

    @staticmethod
    def empty(queues: Iterable[ClusterQueue] = ()) -> QueueState:
        return QueueState(_frozen({q.name: q for q in queues}), _frozen({}), _frozen({}), _frozen({}))

    # ----- reading ----------------------------------------------------------------------------------
    def queue(self, name: str) -> ClusterQueue:
        if name not in self.queues:
            raise AccountingError(f"ClusterQueue {name} does not exist")
        return self.queues[name]

    def usage(self, queue: str) -> Amounts:
        return self.used.get(queue, NONE) + self.reserved.get(queue, NONE)

    def cohort_members(self, queue: str) -> tuple[ClusterQueue, ...]:
        cohort = self.queue(queue).cohort
        if cohort is None:
            return (self.queues[queue],)
        return tuple(q for _, q in sorted(self.queues.items()) if q.cohort == cohort)

    def borrowed(self, queue: str) -> Amounts:
        usage = self.usage(queue)
        return Amounts.of({q.unit: max(Fraction(0), usage.get(q.unit) - q.nominal.value)
                           for q in self.queue(queue).quotas})

    def available(self, queue: str, unit: str) -> Fraction | None:
        """How much more of `unit` the queue may take now; None when it has no quota for it."""
        quota = self.queue(queue).quota(unit)
        if quota is None:
            return None
        usage = self.usage(queue).get(unit)
        pool_capacity, pool_used = self._pool(queue, unit)
        guaranteed = quota.nominal.value - _lendable(quota)
        available = max(Fraction(0), guaranteed - usage) + pool_capacity - pool_used
        if quota.borrowing_limit is not None:
            available = min(available, quota.nominal.value + quota.borrowing_limit.value - usage)
        return available

    def usage_unknown(self, queue: str) -> str:
        """Why the usage of the queue, or of a queue of its cohort, is unknown ("" when it is known)."""
        cohort = self.queues[queue].cohort if queue in self.queues else None
        shared = {name for name, q in self.queues.items() if cohort is not None and q.cohort == cohort}
        return "; ".join(why for name, why in sorted(self.unknown.items()) if name == queue or name in shared)

    def fits(self, queue: str, charge: Amounts) -> QuotaFit:
        """Does `charge` fit in the queue now, borrowing from its cohort where allowed? Never while the
        usage of the queue or its cohort is unknown."""
        cq = self.queue(queue)
        unknown = self.usage_unknown(queue)
        if unknown:
            return QuotaFit(False, f"ClusterQueue {queue}: usage unknown: {unknown}")
        problems, short = [], []
        for unit, needed in charge:
            available = self.available(queue, unit)
            if available is None or needed <= available:
                continue
            short.append(unit)
            problems.append(self._shortage(cq, unit, needed, available))
        if problems:
            return QuotaFit(False, f"ClusterQueue {queue}: " + "; ".join(problems), tuple(short))
        return QuotaFit(True, borrowed=self._borrowing(cq, charge))

    def unit_statuses(self, queue: str) -> tuple[UnitStatus, ...]:
        cq = self.queue(queue)
        used, reserved = self.used.get(queue, NONE), self.reserved.get(queue, NONE)
        listed = [q.unit for q in cq.quotas]
        units = listed + sorted(set((used + reserved).units) - set(listed))
        statuses = []
        for unit in units:
            quota = cq.quota(unit)
            nominal = quota.nominal.value if quota else None
            total = used.get(unit) + reserved.get(unit)
            borrowed = max(Fraction(0), total - nominal) if nominal is not None else Fraction(0)
            statuses.append(UnitStatus(unit, nominal, used.get(unit), reserved.get(unit), borrowed))
        return tuple(statuses)

    def summary(self, queue: str) -> str:
        """`gpus 12/16, gpu-memory 640Gi/1Ti` for the printer column; units without quota show usage."""
        cq = self.queue(queue)
        parts = []
        for status in self.unit_statuses(queue):
            quota = cq.quota(status.unit)
            fmt = quota.nominal.format if quota else None
            total = format_amount(status.used + status.reserved, fmt)
            parts.append(f"{status.unit} {total}/{quota.nominal}" if quota else f"{status.unit} {total}")
        return ", ".join(parts)

    def groups_of(self, queue: str) -> tuple[Admission, ...]:
        return tuple(a for _, a in sorted(self.admissions.items()) if a.cluster_queue == queue)

    def local_usage(self, local_queue: str) -> Amounts:
        return sum((a.charge for a in self.admissions.values() if a.local_queue == local_queue), NONE)

    # ----- changing ---------------------------------------------------------------------------------
    def with_queues(self, queues: Iterable[ClusterQueue]) -> QueueState:
        """New queue definitions; admissions (and their usage) are kept, also for removed queues."""
        return replace(self, queues=_frozen({q.name: q for q in queues}))

    def with_unknown_usage(self, queue: str, why: str) -> QueueState:
        """The usage of `queue` is unknown from now on (a record of it cannot be read): `why` says which."""
        unknown = dict(self.unknown)
        unknown[queue] = f"{unknown[queue]}; {why}" if queue in unknown else why
        return replace(self, unknown=_frozen(unknown))

    def admit(self, group: str, queue: str, charge: Amounts, local_queue: str = "") -> QueueState:
        """Reserve `charge` for `group`; refuses (AccountingError) when it does not fit."""
        decision = self.fits(queue, charge)
        if not decision.ok:
            raise AccountingError(f"cannot admit {group}: {decision.reason}")
        return self.restore(Admission(group, queue, charge, local_queue))

    def restore(self, admission: Admission) -> QueueState:
        """Record an admission made earlier (e.g. read back from PodGroup status) without checking room."""
        if admission.group in self.admissions:
            raise AccountingError(f"{admission.group} is already admitted to "
                                  f"{self.admissions[admission.group].cluster_queue}")
        bucket: Bucket = "used" if admission.bound else "reserved"
        return self._add(admission, bucket, admission.charge)._with_admission(admission.group, admission)

    def bind(self, group: str) -> QueueState:
        """All pods of the group are bound: its reservation becomes use."""
        admission = self._admission(group)
        if admission.bound:
            return self
        moved = self._add(admission, "reserved", -admission.charge)._add(admission, "used", admission.charge)
        return moved._with_admission(group, replace(admission, bound=True))

    def finish(self, group: str) -> QueueState:
        """The group is done: its charge is released."""
        admission = self._admission(group)
        bucket: Bucket = "used" if admission.bound else "reserved"
        return self._add(admission, bucket, -admission.charge)._with_admission(group, None)

    def evict(self, group: str) -> QueueState:
        """The group was evicted (e.g. not bound in time): its charge is released for requeueing."""
        return self.finish(group)

    def evict_all(self, groups: Iterable[str]) -> QueueState:
        """`evict` of each admitted group named (others are ignored), in one step."""
        admissions = _thawed(self.admissions)
        released: dict[tuple[Bucket, str], dict[str, Fraction]] = {}
        for group in groups:
            admission = admissions.pop(group, None)
            if admission is None:
                continue
            totals = released.setdefault(("used" if admission.bound else "reserved", admission.cluster_queue), {})
            for unit, amount in admission.charge:
                totals[unit] = totals.get(unit, Fraction(0)) + amount
        if not released:
            return self
        used, reserved = dict(self.used), dict(self.reserved)
        for (bucket, queue), totals in released.items():
            current = used if bucket == "used" else reserved
            current[queue] = current.get(queue, NONE) - Amounts.of(totals)
        return replace(self, admissions=_frozen(admissions), used=_frozen(used), reserved=_frozen(reserved))

    def recharge(self, group: str, charge: Amounts) -> QueueState:
        """Replace a group's recorded charge (e.g. with what reconciliation found really allocated)."""
        admission = self._admission(group)
        bucket: Bucket = "used" if admission.bound else "reserved"
        changed = self._add(admission, bucket, charge - admission.charge)
        return changed._with_admission(group, replace(admission, charge=charge))

    # ----- internals --------------------------------------------------------------------------------
    def _admission(self, group: str) -> Admission:
        if group not in self.admissions:
            raise AccountingError(f"{group} is not admitted")
        return self.admissions[group]

    def _add(self, admission: Admission, bucket: Bucket, delta: Amounts) -> QueueState:
        current = self.used if bucket == "used" else self.reserved
        totals = dict(current)
        totals[admission.cluster_queue] = current.get(admission.cluster_queue, NONE) + delta
        if bucket == "used":
            return replace(self, used=_frozen(totals))
        return replace(self, reserved=_frozen(totals))

    def _with_admission(self, group: str, admission: Admission | None) -> QueueState:
        admissions = _thawed(self.admissions)
        if admission is None:
            del admissions[group]
        else:
            admissions[group] = admission
        return replace(self, admissions=_frozen(admissions))

    def _pool(self, queue: str, unit: str) -> tuple[Fraction, Fraction]:
        """The cohort's lendable capacity of `unit` and how much of it is in use."""
        capacity = used = Fraction(0)
        for member in self.cohort_members(queue):
            quota = member.quota(unit)
            if quota is None:
                continue
            lendable = _lendable(quota)
            capacity += lendable
            used += max(Fraction(0), self.usage(member.name).get(unit) - (quota.nominal.value - lendable))
        return capacity, used

    def _shortage(self, cq: ClusterQueue, unit: str, needed: Fraction, available: Fraction) -> str:
        quota = cq.quota(unit)
        assert quota is not None
        fmt = quota.nominal.format
        text = (f"unit {unit}: {format_amount(self.usage(cq.name).get(unit), fmt)} in use of nominal "
                f"{quota.nominal}, needs {format_amount(needed, fmt)}, "
                f"only {format_amount(max(Fraction(0), available), fmt)} available")
        if cq.cohort is not None:
            limit = "no limit" if quota.borrowing_limit is None else f"limit {quota.borrowing_limit}"
            text += f" (borrowing from cohort {cq.cohort}, {limit})"
        return text

    def _borrowing(self, cq: ClusterQueue, charge: Amounts) -> Amounts:
        usage = self.usage(cq.name)
        borrowed = {}
        for unit, needed in charge:
            quota = cq.quota(unit)
            if quota is not None:
                before = max(Fraction(0), usage.get(unit) - quota.nominal.value)
                after = max(Fraction(0), usage.get(unit) + needed - quota.nominal.value)
                borrowed[unit] = after - before
        return Amounts.of(borrowed)


def _lendable(quota: QueueQuota) -> Fraction:
    return quota.lending_limit.value if quota.lending_limit is not None else quota.nominal.value


def _frozen(values: dict[K, V]) -> Mapping[K, V]:
    return MappingProxyType(values)


def _thawed(values: Mapping[K, V]) -> dict[K, V]:
    """A changeable copy of a state's mapping. `dict()` of a read-only view reads it key by key; the view's
    own `copy` copies the dict beneath at once (the admissions of thousands of groups, per eviction tried)."""
    if isinstance(values, MappingProxyType):
        return values.copy()
    return dict(values)
