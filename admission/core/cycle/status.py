"""What the operator writes, decided here: PodGroup status bodies and conditions, Event texts, and the
pending counts behind queue status. Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from admission.core.cycle.groups import GroupView
from admission.core.cycle.progress import ChargeCorrection
from admission.core.cycle.types import Admit, Extend, LateWait, Wait, WaitReason
from admission.core.models import ObjectRef
from admission.core.quota import Amounts, Phase, Plan, Slot, charge_status

ADMITTED_CONDITION = "Admitted"


def condition(kind: str, status: bool, reason: str, message: str, now: str) -> dict[str, str]:
    return {"type": kind, "status": "True" if status else "False", "reason": reason, "message": message,
            "lastTransitionTime": now}


def plan_status(plan: Plan) -> dict[str, Any]:
    """`status.plan`. `slots` is always written (empty without a declared shape): the status is merged, and
    a plan written without it would keep the slots of an earlier one."""
    return {"pods": [{"name": name, "node": node} for name, node in plan.nodes],
            "claims": [{"name": c.name, "devices": [{"request": r, "device": d} for r, d in c.devices]}
                       for c in plan.claims],
            "slots": [_slot_status(slot) for slot in plan.slots]}


def _slot_status(slot: Slot) -> dict[str, Any]:
    entry: dict[str, Any] = {"role": slot.role, "index": slot.index, "node": slot.node}
    if slot.pod:
        entry["pod"] = slot.pod
    return entry


def admitted_status(admit: Admit, members: int, now: str) -> dict[str, Any]:
    """The durable record of an admission, written before any gate is removed."""
    message = f"admitted to ClusterQueue {admit.cluster_queue}"
    return {"phase": Phase.ADMITTED.value, "message": message, "members": members,
            "admittedAt": now, "clusterQueue": admit.cluster_queue,
            "charge": charge_status(admit.charge, admit.borrowed), "plan": plan_status(admit.plan),
            "requeueAt": None, "suspended": None, "suspendedJobs": None,
            "conditions": [condition(ADMITTED_CONDITION, True, "Admitted", message, now)]}


def pending_status(wait: Wait, members: int, now: str) -> dict[str, Any]:
    """Why the group waits. The phase is left as it is when the PodGroup does not parse or its record is
    not draq's: its record may hold an admission, which a `Pending` would erase."""
    waiting = condition(ADMITTED_CONDITION, False, wait.reason.value, wait.message, now)
    status: dict[str, Any] = {"message": wait.message, "members": members, "conditions": [waiting]}
    if wait.reason not in (WaitReason.UNREADABLE, WaitReason.UNSEALED):
        status["phase"] = Phase.PENDING.value
    return status


@dataclass(frozen=True, slots=True)
class GroupEvent:
    """An Event the operator posts on a PodGroup: its reason, its text, and whether it is a Warning."""

    reason: str
    message: str
    warning: bool = False


def admitted_event(admit: Admit) -> str:
    """The Event text of an admission: where, what it was charged, where each member goes, and the room
    reserved for the declared members not created yet."""
    text = f"admitted to ClusterQueue {admit.cluster_queue}, charged {admit.charge.describe()}"
    placed = ", ".join(f"{name} on {node}" for name, node in admit.plan.nodes)
    reserved = ", ".join(f"{slot.name} on {slot.node}" for slot in admit.plan.open_slots)
    return text + (f"; placed {placed}" if placed else "") + (f"; reserved {reserved}" if reserved else "")


@dataclass(frozen=True, slots=True)
class PhaseChange:
    """What the operator writes when an admitted group moves on: a status body and an Event."""

    status: dict[str, Any]
    reason: str
    message: str


def phase_change(phase: Phase, members: int) -> PhaseChange:
    running = phase is Phase.RUNNING
    message = "all members are bound" if running else "all members have finished; the charge is released"
    return PhaseChange({"phase": phase.value, "members": members, "message": message}, phase.value, message)


@dataclass(frozen=True, slots=True)
class PendingCounts:
    """Groups waiting, per ClusterQueue and per LocalQueue (`namespace/name`)."""

    cluster_queues: Mapping[str, int]
    local_queues: Mapping[str, int]


def pending_counts(waiting: Iterable[Wait], groups: Mapping[str, GroupView]) -> PendingCounts:
    waits = waiting if isinstance(waiting, (tuple, list)) else tuple(waiting)
    # Counted by `Counter`'s own loop: a flood's thousands of waits cost little each.
    per_cq = Counter(wait.cluster_queue for wait in waits)
    found = (groups.get(wait.group) for wait in waits)
    per_lq = Counter(group.local_key for group in found if group is not None)
    return PendingCounts(dict(per_cq), dict(per_lq))


def extended_status(grown: Extend, members: int, borrowed: Amounts) -> dict[str, Any]:
    """The record of late members admitted into their group: the whole new charge and plan."""
    return {"charge": charge_status(grown.charge, borrowed), "plan": plan_status(grown.plan), "members": members}


def late_admitted_event(grown: Extend) -> str:
    placed = ", ".join(f"{pod.split('/')[-1]} on {node}" + (" (its reserved slot)" if pod in grown.joined else "")
                       for pod, node in grown.placement.nodes.items())
    return f"late member(s) admitted into the group, charged {grown.added.describe()} more; placed {placed}"


def slots_given_up_event(grown: Extend) -> GroupEvent:
    """Members that match no role of the group's declared shape, and the open slots given up for them: why they
    wait, as a Warning."""
    pairs = ", ".join(f"{pod} (slot {slot})" for pod, slot in grown.given_up)
    return GroupEvent("SlotsGivenUp", f"late member(s) {pairs} match no role template of the group's declared shape "
                      "(containers' requests and limits, claims and node constraints must equal a template's; an "
                      "admission plugin may have changed them): their slots are given up, releasing their devices "
                      f"and node room and {grown.freed.describe()} of the charge, and they are placed as themselves "
                      "from the next admission cycle", warning=True)


def late_wait_event(wait: LateWait) -> GroupEvent:
    """Late members that stay gated: why, as a Warning (posted once per distinct message)."""
    return GroupEvent("MembersWaiting", wait.message, warning=True)


def charge_corrected_event(correction: ChargeCorrection) -> GroupEvent:
    """A running group's charge replaced by what its claims really hold: what changed, as a Warning."""
    return GroupEvent("ChargeCorrected", f"charge now follows the real allocation: {correction.describe()}",
                      warning=True)


UNKNOWN_OWNER = "UnknownOwner"
RESIZED = "Resized"


def unknown_owner_event(pod: str, owner: str) -> GroupEvent:
    """Posted once on a pod whose controller is not a workload kind draq groups (or whose integration is off)."""
    return GroupEvent(UNKNOWN_OWNER, f"pod {pod}: owner {owner} is not a workload kind draq groups, or its "
                      "integration is off (integrations.frameworks): the pod is its own group", warning=True)


def resized_event(group: GroupView, owner: ObjectRef, before: int, after: int) -> GroupEvent:
    """Posted on a group's top-level owner when the members it declares change (it was scaled)."""
    held = ("; the group holds quota for what it was admitted with, and the new size applies when it is admitted "
            "again" if group.holds_quota else "; its minimum and charge follow")
    return GroupEvent(RESIZED, f"{owner} now declares {after} members (was {before}) for group {group.key}{held}")
