"""`draq queues`: usage against quota per ClusterQueue and unit, with the cohort's borrowing.

Usage is rebuilt from the PodGroup records, as the operator's accounting rebuilds it after a restart
(reserved while Admitted, used once Running); what only the operator knows (groups pending, the Active
condition) comes from the ClusterQueue status it writes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from admission.core.errors import DraqError
from admission.core.gaps.render import table
from admission.core.quota import (
    Admission,
    ClusterQueue,
    Phase,
    PodGroup,
    QueueState,
    format_amount,
    parse_cluster_queue,
    parse_pod_group,
)
from admission.core.quota.unreadable import Unreadable, unreadable, with_unreadable


@dataclass(frozen=True, slots=True)
class UnitUsage:
    unit: str
    nominal: str | None  # None: the queue has no quota for the unit (it is charged all the same)
    used: str
    reserved: str
    borrowed: str
    available: str | None  # what the queue may still take, borrowing included; None: no quota or unknown
    borrowing_limit: str | None
    lending_limit: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"unit": self.unit, "nominal": self.nominal, "used": self.used, "reserved": self.reserved,
                "borrowed": self.borrowed, "available": self.available, "borrowingLimit": self.borrowing_limit,
                "lendingLimit": self.lending_limit}


@dataclass(frozen=True, slots=True)
class QueueUsage:
    name: str
    cohort: str | None
    active: str  # the status' Active condition: "True", "False", or "" when not written yet
    active_reason: str
    pending_groups: int | None  # as the operator last wrote it; None: not written yet
    admitted_groups: int
    units: tuple[UnitUsage, ...] = ()
    usage_unknown: str = ""  # why its usage (or its cohort's) cannot be known
    problem: str = ""  # the ClusterQueue does not parse

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "cohort": self.cohort, "active": self.active, "activeReason": self.active_reason,
                "pendingGroups": self.pending_groups, "admittedGroups": self.admitted_groups,
                "units": [u.to_dict() for u in self.units], "usageUnknown": self.usage_unknown,
                "problem": self.problem}


@dataclass(frozen=True, slots=True)
class QueueReport:
    queues: tuple[QueueUsage, ...]
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"clusterQueues": [q.to_dict() for q in self.queues], "notes": list(self.notes)}


def queue_report(cluster_queues: Iterable[Mapping[str, Any]], pod_groups: Iterable[Mapping[str, Any]],
                 only: Collection[str] = ()) -> QueueReport:
    """The report of every ClusterQueue (or of those named in `only`, which must exist)."""
    manifests = {_name(m): m for m in cluster_queues}
    missing = sorted(set(only) - set(manifests))
    if missing:
        raise DraqError("no ClusterQueue " + ", ".join(missing) + (f" (there are: {', '.join(sorted(manifests))})"
                                                                  if manifests else " (there are none)"))
    parsed, bad = _parse_queues(manifests.values())
    groups, bad_groups = _parse_groups(pod_groups)
    state = with_unreadable(_rebuild(parsed, groups), [*bad.values(), *bad_groups])
    names = sorted(only) if only else sorted(manifests)
    lines = tuple(_queue_usage(state, manifests[n], bad.get(n)) for n in names)
    notes = tuple(f"{item.label} does not parse: {item.reason}" for item in bad_groups)
    return QueueReport(lines, notes)


def _name(manifest: Mapping[str, Any]) -> str:
    meta = manifest.get("metadata")
    return str(meta.get("name") or "") if isinstance(meta, Mapping) else ""


def _parse_queues(manifests: Iterable[Mapping[str, Any]]) -> tuple[list[ClusterQueue], dict[str, Unreadable]]:
    parsed, bad = [], {}
    for manifest in manifests:
        try:
            parsed.append(parse_cluster_queue(manifest))
        except DraqError as err:
            bad[_name(manifest)] = unreadable("ClusterQueue", manifest, err)
    return parsed, bad


def _parse_groups(manifests: Iterable[Mapping[str, Any]]) -> tuple[list[PodGroup], list[Unreadable]]:
    parsed, bad = [], []
    for manifest in manifests:
        try:
            parsed.append(parse_pod_group(manifest))
        except DraqError as err:
            bad.append(unreadable("PodGroup", manifest, err))
    return parsed, bad


def _rebuild(queues: list[ClusterQueue], groups: list[PodGroup]) -> QueueState:
    state = QueueState.empty(queues)
    for group in groups:
        if group.holds_quota and group.cluster_queue in state.queues:
            state = state.restore(Admission(group.key, group.cluster_queue, group.charge,
                                            f"{group.namespace}/{group.queue}", bound=group.phase is Phase.RUNNING))
    return state


def _queue_usage(state: QueueState, manifest: Mapping[str, Any], bad: Unreadable | None) -> QueueUsage:
    status = _map(manifest.get("status"))
    active = next((_map(c) for c in status.get("conditions") or [] if _map(c).get("type") == "Active"), {})
    pending = status.get("pendingGroups")
    usage = QueueUsage(_name(manifest), None, str(active.get("status") or ""), str(active.get("reason") or ""),
                       pending if isinstance(pending, int) else None, 0)
    if bad is not None:
        return replace(usage, cohort=bad.cohort or None, problem=bad.reason)
    queue = state.queue(usage.name)
    return replace(usage, cohort=queue.cohort, admitted_groups=len(state.groups_of(queue.name)),
                   units=_units(state, queue), usage_unknown=state.usage_unknown(queue.name))


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _units(state: QueueState, queue: ClusterQueue) -> tuple[UnitUsage, ...]:
    unknown = bool(state.usage_unknown(queue.name))
    lines = []
    for status in state.unit_statuses(queue.name):
        quota = queue.quota(status.unit)
        fmt = quota.nominal.format if quota else None
        available = None if unknown else state.available(queue.name, status.unit)
        lines.append(UnitUsage(
            unit=status.unit, nominal=str(quota.nominal) if quota else None, used=format_amount(status.used, fmt),
            reserved=format_amount(status.reserved, fmt), borrowed=format_amount(status.borrowed, fmt),
            available=format_amount(available, fmt) if available is not None else None,
            borrowing_limit=str(quota.borrowing_limit) if quota and quota.borrowing_limit is not None else None,
            lending_limit=str(quota.lending_limit) if quota and quota.lending_limit is not None else None))
    return tuple(lines)


HEADER = ("CLUSTERQUEUE", "COHORT", "ACTIVE", "PENDING", "ADMITTED", "UNIT", "NOMINAL", "USED", "RESERVED",
          "BORROWED", "AVAILABLE", "BORROWING-LIMIT", "LENDING-LIMIT")


def render_queues(report: QueueReport) -> str:
    """One row per ClusterQueue and unit (the queue's columns on its first row only), then the problems."""
    if not report.queues:
        return "no ClusterQueues"
    rows: list[list[str]] = []
    problems: list[str] = []
    for queue in report.queues:
        rows += _rows(queue)
        if queue.problem:
            problems.append(f"{queue.name}: does not parse: {queue.problem}")
        elif queue.usage_unknown:
            problems.append(f"{queue.name}: usage unknown: {queue.usage_unknown}")
        if queue.active == "False":
            problems.append(f"{queue.name}: not active ({queue.active_reason})")
    return "\n".join([*table(HEADER, rows), *([""] if problems or report.notes else []), *problems, *report.notes])


def _rows(queue: QueueUsage) -> list[list[str]]:
    active = queue.active + (f" ({queue.active_reason})" if queue.active == "False" else "") or "-"
    first = [queue.name, queue.cohort or "-", active,
             "-" if queue.pending_groups is None else str(queue.pending_groups), str(queue.admitted_groups)]
    if not queue.units:
        return [[*first, "-", "-", "-", "-", "-", "-", "-", "-"]]
    rows = []
    for i, unit in enumerate(queue.units):
        rows.append([*(first if i == 0 else [""] * len(first)), unit.unit, unit.nominal or "-", unit.used,
                     unit.reserved, unit.borrowed,
                     unit.available if unit.available is not None else ("unknown" if queue.usage_unknown else "-"),
                     unit.borrowing_limit or _unlimited(queue), unit.lending_limit or _unlimited(queue)])
    return rows


def _unlimited(queue: QueueUsage) -> str:
    """No limit set: in a cohort it borrows (or lends) without limit; outside one it cannot at all."""
    return "-" if queue.cohort is None else "unlimited"
