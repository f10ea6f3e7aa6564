"""Status bodies the operator writes: PodGroup admission record and conditions, queue usage. Pure."""

from __future__ import annotations

from typing import Any

from admission.core.gang.cycle import Admit, Wait
from admission.core.quota import NONE, Amounts, Phase, QueueState, RecordedPlan, charge_status, format_amount

ADMITTED_CONDITION = "Admitted"


def condition(kind: str, status: bool, reason: str, message: str, now: str) -> dict[str, str]:
    return {"type": kind, "status": "True" if status else "False", "reason": reason, "message": message,
            "lastTransitionTime": now}


def plan_status(plan: RecordedPlan) -> dict[str, Any]:
    return {"pods": [{"name": name, "node": node} for name, node in plan.nodes],
            "claims": [{"name": c.name, "devices": [{"request": r, "device": d} for r, d in c.devices]}
                       for c in plan.claims]}


def admitted_status(admit: Admit, members: int, now: str) -> dict[str, Any]:
    """The durable record of an admission, written before any gate is removed."""
    message = f"admitted to ClusterQueue {admit.cluster_queue}"
    return {"phase": Phase.ADMITTED.value, "message": message, "members": members,
            "admittedAt": now, "clusterQueue": admit.cluster_queue,
            "charge": charge_status(admit.charge, admit.borrowed), "plan": plan_status(admit.plan),
            "conditions": [condition(ADMITTED_CONDITION, True, "Admitted", message, now)]}


def pending_status(wait: Wait, members: int, now: str) -> dict[str, Any]:
    return {"phase": Phase.PENDING.value, "message": wait.message, "members": members,
            "conditions": [condition(ADMITTED_CONDITION, False, wait.reason.value, wait.message, now)]}


def cluster_queue_status(state: QueueState, queue: str, pending: int) -> dict[str, Any]:
    cq = state.queue(queue)
    quotas = []
    for unit in state.unit_statuses(queue):
        quota = cq.quota(unit.unit)
        fmt = quota.nominal.format if quota else None
        entry = {"unit": unit.unit, "used": format_amount(unit.used, fmt),
                 "reserved": format_amount(unit.reserved, fmt), "borrowed": format_amount(unit.borrowed, fmt)}
        if quota is not None:
            entry["nominal"] = str(quota.nominal)
        quotas.append(entry)
    return {"quotas": quotas, "summary": state.summary(queue), "pendingGroups": pending,
            "admittedGroups": len(state.groups_of(queue))}


def local_queue_status(state: QueueState, local_queue: str, pending: int) -> dict[str, Any]:
    admitted = [a for a in state.admissions.values() if a.local_queue == local_queue]
    used = sum((a.charge for a in admitted if a.bound), NONE)
    reserved = sum((a.charge for a in admitted if not a.bound), NONE)
    units = sorted(set(used.units) | set(reserved.units))
    quotas = [{"unit": u, "used": format_amount(used.get(u)), "reserved": format_amount(reserved.get(u))}
              for u in units]
    return {"quotas": quotas, "summary": _summary(used + reserved), "pendingGroups": pending,
            "admittedGroups": len(admitted)}


def _summary(total: Amounts) -> str:
    return ", ".join(f"{unit} {format_amount(amount)}" for unit, amount in total) or "nothing admitted"
