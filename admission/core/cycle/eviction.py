"""Groups admitted but not bound in time: evicted as a whole, their charge released, and requeued with
exponential backoff.

A group is overdue when it has been Admitted for longer than its ClusterQueue's `bindTimeoutSeconds`
(or the operator's default) and not every planned member is bound. The operator records the eviction
first (phase Evicted, `requeueAt`), then deletes the members (or suspends their Job), so a crash in
between leaves a record the next pass finishes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from admission.core.cycle.groups import GroupView
from admission.core.cycle.status import ADMITTED_CONDITION, GroupEvent, condition
from admission.core.cycle.timing import backoff_seconds, format_time, in_backoff, parse_time
from admission.core.models import ObjectRef
from admission.core.quota import ClusterQueue, Phase, suspended_status

DEFAULT_BIND_TIMEOUT = 300
NOT_BOUND = "NotBoundInTime"


@dataclass(frozen=True, slots=True)
class Evict:
    group: str
    cluster_queue: str
    message: str
    evictions: int  # including this one
    requeue_at: dt.datetime


def unbound_members(group: GroupView) -> tuple[str, ...]:
    """Planned members (or, without a plan, present members) that are not bound to a node, and the open
    slots of a declared shape (members not created yet, named `<role>#<index>`)."""
    if group.pod_group is None:
        return ()
    plan = group.pod_group.plan
    planned = [name for name, _ in plan.nodes] or ([] if plan.slots else [p.name for p in group.pods])
    bound = {p.name for p in group.pods if p.node_name}
    return tuple(sorted(name for name in planned if name not in bound)) + tuple(s.name for s in plan.open_slots)


def overdue(groups: Iterable[GroupView], queues: Mapping[str, ClusterQueue], now: dt.datetime,
            default_timeout: int = DEFAULT_BIND_TIMEOUT) -> tuple[Evict, ...]:
    """Admitted groups whose members are not all bound within their queue's bind timeout."""
    evicted = []
    for group in groups:
        pod_group = group.pod_group
        if pod_group is None or pod_group.phase is not Phase.ADMITTED:
            continue
        admitted = parse_time(pod_group.admitted_at)
        queue = queues.get(pod_group.cluster_queue)
        timeout = (queue.bind_timeout_seconds if queue is not None else None) or default_timeout
        missing = unbound_members(group)
        if admitted is None or not missing or (now - admitted).total_seconds() <= timeout:
            continue
        count = pod_group.evictions + 1
        retry = now + dt.timedelta(seconds=backoff_seconds(count))
        message = (f"not all members were bound within {timeout}s of admission ({', '.join(missing)} not bound); "
                   f"evicted (eviction {count}), charge released, retried after {format_time(retry)}")
        evicted.append(Evict(group.key, pod_group.cluster_queue, message, count, retry))
    return tuple(evicted)


def evicted_status(evict: Evict, members: int, now: dt.datetime, suspended: Iterable[ObjectRef] = ()
                   ) -> dict[str, Any]:
    """The durable record of an eviction, written before any member is deleted. The charge and plan are
    cleared, so the queue's usage no longer counts the group."""
    stamp = format_time(now)
    return {"phase": Phase.EVICTED.value, "message": evict.message, "members": members,
            "evictions": evict.evictions, "requeueAt": format_time(evict.requeue_at),
            "charge": None, "plan": None,
            "suspended": suspended_status(suspended), "suspendedJobs": None,
            "conditions": [condition(ADMITTED_CONDITION, False, NOT_BOUND, evict.message, stamp)]}


def due_for_requeue(groups: Iterable[GroupView], now: dt.datetime) -> tuple[GroupView, ...]:
    """Evicted groups past their backoff whose suspended owners are to be resumed."""
    return tuple(g for g in groups if g.pod_group is not None and g.pod_group.phase is Phase.EVICTED
                 and g.pod_group.suspended and in_backoff(g, now) is None)


@dataclass(frozen=True, slots=True)
class Requeue:
    """An evicted group whose backoff has passed: the owners to resume, then its record and Event."""

    group: str
    objects: tuple[ObjectRef, ...]
    status: dict[str, Any]
    event: GroupEvent


def requeue(group: GroupView) -> Requeue:
    """Resume the group's suspended owners (their new pods are gated and queued again) and forget them."""
    objects: Sequence[ObjectRef] = group.pod_group.suspended if group.pod_group is not None else ()
    return Requeue(group.key, tuple(objects), {"suspended": None, "suspendedJobs": None},
                   GroupEvent("Requeued", f"backoff over: resumed {', '.join(map(str, objects))}"))
