"""Status bodies the operator writes: PodGroup admission record and conditions, queue usage. Pure."""

from __future__ import annotations

from typing import Any

from admission.core.gang.cycle import Admit, Wait
from admission.core.quota import Phase, RecordedPlan, charge_status

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
