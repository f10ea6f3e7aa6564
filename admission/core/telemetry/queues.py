"""Queue figures for metrics: quota, usage and borrowing per ClusterQueue and unit; groups by phase and
by why they wait; how long a group waited for its release."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from admission.core.cycle import GroupDecision, GroupView, Wait, WaitReason
from admission.core.cycle.timing import parse_time
from admission.core.quota import LocalQueue, Phase, QueueState

GROUP_PHASES = (Phase.PENDING, Phase.ADMITTED, Phase.RUNNING, Phase.EVICTED)
"""The phases counted per ClusterQueue (finished groups are history, not load)."""


@dataclass(frozen=True, slots=True)
class QueueFigure:
    """One unit of one ClusterQueue, in the unit's base amount (devices, bytes, counters, weights)."""

    cluster_queue: str
    unit: str
    used: float  # charged to groups whose members are all bound
    reserved: float  # charged to admitted groups not bound yet
    borrowed: float  # usage beyond nominal, lent by the cohort
    nominal: float | None = None  # None: the queue has no quota for the unit (not limited)
    borrowing_limit: float | None = None  # None: no limit (or no quota)
    lending_limit: float | None = None


@dataclass(frozen=True, slots=True)
class QueueInfo:
    cluster_queue: str
    cohort: str
    strategy: str


@dataclass(frozen=True, slots=True)
class GroupFigures:
    """Counts of groups by (ClusterQueue, phase) and of pending groups by (ClusterQueue, WaitReason);
    every known queue has every phase and reason (zeros included), so series do not come and go."""

    phases: Mapping[tuple[str, str], int]
    waiting: Mapping[tuple[str, str], int]


@dataclass(frozen=True, slots=True)
class LocalQueueFigure:
    """What the groups of one LocalQueue hold in one unit of its ClusterQueue (its namespace's share)."""

    namespace: str
    local_queue: str
    cluster_queue: str
    unit: str
    usage: float  # charged to its admitted and running groups (reserved included)
    reserved: float  # charged to its admitted groups not bound yet


def local_queue_figures(state: QueueState, local_queues: Mapping[str, LocalQueue]) -> tuple[LocalQueueFigure, ...]:
    """Every LocalQueue in every unit of its ClusterQueue (zeros included, so series do not come and go),
    and LocalQueues deleted while their groups still hold quota. One series per LocalQueue and unit: as
    bounded as the queue objects, whatever the number of groups or pods."""
    usage: dict[tuple[str, str, str], Fraction] = {}
    reserved: dict[tuple[str, str, str], Fraction] = {}
    for admission in state.admissions.values():
        for unit, amount in admission.charge:
            series = (admission.local_queue, admission.cluster_queue, unit)
            usage[series] = usage.get(series, Fraction(0)) + amount
            if not admission.bound:
                reserved[series] = reserved.get(series, Fraction(0)) + amount
    for local_key, local in local_queues.items():
        if local.cluster_queue in state.queues:
            for status in state.unit_statuses(local.cluster_queue):
                usage.setdefault((local_key, local.cluster_queue, status.unit), Fraction(0))
    figures = []
    for series, amount in sorted(usage.items()):
        local_key, cluster_queue, unit = series
        namespace, _, name = local_key.partition("/")
        if name:
            figures.append(LocalQueueFigure(namespace, name, cluster_queue, unit, _float(amount),
                                            _float(reserved.get(series, Fraction(0)))))
    return tuple(figures)


def queue_infos(state: QueueState) -> tuple[QueueInfo, ...]:
    return tuple(QueueInfo(q.name, q.cohort or "", q.strategy.value) for _, q in sorted(state.queues.items()))


def queue_figures(state: QueueState) -> tuple[QueueFigure, ...]:
    """Every unit of every ClusterQueue: those it quotes, and those it is charged in without a quota."""
    figures = []
    for name in sorted(state.queues):
        queue = state.queue(name)
        for status in state.unit_statuses(name):
            quota = queue.quota(status.unit)
            figures.append(QueueFigure(
                name, status.unit, _float(status.used), _float(status.reserved), _float(status.borrowed),
                _float(quota.nominal.value) if quota else None,
                _float(quota.borrowing_limit.value) if quota and quota.borrowing_limit is not None else None,
                _float(quota.lending_limit.value) if quota and quota.lending_limit is not None else None))
    return tuple(figures)


def group_figures(groups: Iterable[GroupView], decisions: Iterable[GroupDecision],
                  local_queues: Mapping[str, LocalQueue], cluster_queues: Iterable[str]) -> GroupFigures:
    """Groups by phase after a cycle's decisions (a group admitted in it counts as Admitted), and the
    waiting ones by reason. A group whose queue is unknown counts under ClusterQueue ""."""
    decided = {d.group: d for d in decisions}
    known = sorted(set(cluster_queues))
    # Counted by the enum members and named by their values once at the end: a flood's thousands of groups
    # each cost a few lookups, not an enum `.value` each.
    phases: dict[tuple[str, Phase], int] = {(q, p): 0 for q in known for p in GROUP_PHASES}
    waiting: dict[tuple[str, WaitReason], int] = {(q, r): 0 for q in known for r in WaitReason}
    for group in groups:
        decision = decided.get(group.key)
        if isinstance(decision, Wait):
            reason = (decision.cluster_queue or _cluster_queue(group, local_queues), decision.reason)
            waiting[reason] = waiting.get(reason, 0) + 1
        phase = _phase(group, decision)
        if phase is not None:
            key = (_cluster_queue(group, local_queues), phase)
            phases[key] = phases.get(key, 0) + 1
    return GroupFigures({(q, p.value): n for (q, p), n in phases.items()},
                        {(q, r.value): n for (q, r), n in waiting.items()})


def release_latency(group: GroupView, released: dt.datetime) -> float | None:
    """Seconds from the group's creation (its PodGroup's, else its earliest member's) to its release."""
    created = parse_time(group.created)
    if created is None:
        return None
    return max(0.0, (released - created).total_seconds())


def _phase(group: GroupView, decision: GroupDecision | None) -> Phase | None:
    if decision is not None:
        return Phase.PENDING if isinstance(decision, Wait) else Phase.ADMITTED
    phase = group.pod_group.phase if group.pod_group is not None else Phase.PENDING
    if phase is Phase.FINISHED or (phase is Phase.PENDING and not group.pending):
        return None
    return phase


def _cluster_queue(group: GroupView, local_queues: Mapping[str, LocalQueue]) -> str:
    if group.pod_group is not None and group.pod_group.cluster_queue and group.holds_quota:
        return group.pod_group.cluster_queue
    local = local_queues.get(group.local_key)
    return local.cluster_queue if local is not None else ""


def _float(value: Fraction) -> float:
    return float(value)
