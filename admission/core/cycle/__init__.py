"""The admission cycle of groups (gang admission) and what follows an admission.

`collect_groups` turns managed pods and PodGroups into `GroupView`s; `run_cycle(CycleInput)` decides,
for every pending group, `Admit` (charge, borrowed part, plan) or `Wait` (reason and message);
`rebuild_state`, `promised_devices`, `next_phase`, `unreleased_members` and `charge_corrections` carry
admissions across cycles and restarts; `status` renders what the operator writes.
"""

from admission.core.cycle.decide import (
    Admit,
    CycleInput,
    CycleResult,
    GroupDecision,
    Wait,
    WaitReason,
    charging_inventory,
    run_cycle,
)
from admission.core.cycle.eviction import (
    DEFAULT_BIND_TIMEOUT,
    Evict,
    Requeue,
    due_for_requeue,
    evicted_status,
    overdue,
    requeue,
)
from admission.core.cycle.groups import TERMINAL_PHASES, GroupView, collect_groups, is_managed
from admission.core.cycle.late import Extend, LateWait, late_members
from admission.core.cycle.plans import planned_allocation, promised_allocations, recorded_plan
from admission.core.cycle.progress import (
    ChargeCorrection,
    charge_corrections,
    next_phase,
    promised_devices,
    rebuild_state,
    unreleased_members,
)
from admission.core.cycle.status import (
    GroupEvent,
    PendingCounts,
    PhaseChange,
    admitted_event,
    admitted_status,
    charge_corrected_event,
    late_wait_event,
    pending_counts,
    pending_status,
    phase_change,
    plan_status,
)

__all__ = [
    "DEFAULT_BIND_TIMEOUT",
    "TERMINAL_PHASES",
    "Admit",
    "ChargeCorrection",
    "CycleInput",
    "CycleResult",
    "Evict",
    "Extend",
    "GroupDecision",
    "GroupEvent",
    "GroupView",
    "LateWait",
    "PendingCounts",
    "PhaseChange",
    "Requeue",
    "Wait",
    "WaitReason",
    "admitted_event",
    "admitted_status",
    "charge_corrected_event",
    "charge_corrections",
    "charging_inventory",
    "collect_groups",
    "due_for_requeue",
    "evicted_status",
    "is_managed",
    "late_members",
    "late_wait_event",
    "next_phase",
    "overdue",
    "pending_counts",
    "pending_status",
    "phase_change",
    "plan_status",
    "planned_allocation",
    "promised_allocations",
    "promised_devices",
    "rebuild_state",
    "recorded_plan",
    "requeue",
    "run_cycle",
    "unreleased_members",
]
