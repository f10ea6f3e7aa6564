"""The admission cycle of groups (gang admission) and what follows an admission.

`collect_groups` turns managed pods and PodGroups into `GroupView`s; `cycle_input` builds the decision's
input from parsed objects; `decide(CycleInput)` is the whole decision, the operator's and the simulator's:
late members of admitted groups (`Extend` or `LateWait`), then for every pending group `Admit` (charge,
borrowed part, plan) or `Wait` (reason and message), then whom to preempt (`CycleResult.preemptions`).
`rebuild_state`, `promised_devices`, `next_phase`, `unreleased_members` and `charge_corrections` carry
admissions across cycles and restarts; `status` renders what the operator writes.

Inside: `types` (the cycle's types), `admit` (the admission pass, `run_cycle`), `late` (late members),
`preemption` (victims for the groups left waiting), `decide` (the three together), `parking` (groups
not evaluated again until something that could change their answer happens).
"""

from admission.core.cycle.admit import run_cycle
from admission.core.cycle.decide import cycle_input, decide, unit_failures_of
from admission.core.cycle.eviction import (
    DEFAULT_BIND_TIMEOUT,
    Evict,
    Requeue,
    due_for_requeue,
    evicted_status,
    overdue,
    requeue,
)
from admission.core.cycle.groups import (
    TERMINAL_PHASES,
    GroupView,
    collect_groups,
    is_managed,
    unreadable_owner,
    with_owners,
)
from admission.core.cycle.inventory import charging_inventory
from admission.core.cycle.late import LATE_CONDITION, late_members
from admission.core.cycle.nodes import promised_pods
from admission.core.cycle.parking import (
    DEFAULT_SAFETY_SECONDS,
    Changes,
    Parking,
    claim_frees_room,
    node_frees_room,
    pod_frees_room,
)
from admission.core.cycle.pinning import NODE_NAME_FIELD, pin_requirement, pinned_affinity
from admission.core.cycle.plans import planned_allocation, promised_allocations, recorded_plan
from admission.core.cycle.pod_conditions import (
    POD_CONDITION,
    admitted_condition,
    condition_patch,
    current_condition,
    waiting_condition,
)
from admission.core.cycle.pod_group_claims import parse_pod_group_claims, with_pod_group_claims
from admission.core.cycle.preemption import PREEMPTED, preempted_message, preempted_status, victims_of
from admission.core.cycle.progress import (
    ChargeCorrection,
    charge_corrections,
    next_phase,
    promised_devices,
    rebuild_state,
    unreleased_members,
)
from admission.core.cycle.status import (
    ADMITTED_CONDITION,
    GroupEvent,
    PendingCounts,
    PhaseChange,
    admitted_event,
    admitted_status,
    charge_corrected_event,
    extended_status,
    late_admitted_event,
    late_wait_event,
    pending_counts,
    pending_status,
    phase_change,
    plan_status,
    resized_event,
    slots_given_up_event,
    unknown_owner_event,
)
from admission.core.cycle.steps import ALLOCATOR, CHARGING, STEPS, StepTimer
from admission.core.cycle.timing import backoff_seconds, format_time, parse_time
from admission.core.cycle.types import (
    Admit,
    CycleInput,
    CycleResult,
    CycleStats,
    Extend,
    GroupDecision,
    LateWait,
    Preempt,
    Preemptions,
    Wait,
    WaitReason,
)

__all__ = [
    "ADMITTED_CONDITION",
    "ALLOCATOR",
    "CHARGING",
    "DEFAULT_BIND_TIMEOUT",
    "DEFAULT_SAFETY_SECONDS",
    "LATE_CONDITION",
    "NODE_NAME_FIELD",
    "POD_CONDITION",
    "PREEMPTED",
    "STEPS",
    "TERMINAL_PHASES",
    "Admit",
    "Changes",
    "ChargeCorrection",
    "CycleInput",
    "CycleResult",
    "CycleStats",
    "Evict",
    "Extend",
    "GroupDecision",
    "GroupEvent",
    "GroupView",
    "LateWait",
    "Parking",
    "PendingCounts",
    "PhaseChange",
    "Preempt",
    "Preemptions",
    "Requeue",
    "StepTimer",
    "Wait",
    "WaitReason",
    "admitted_condition",
    "admitted_event",
    "admitted_status",
    "backoff_seconds",
    "charge_corrected_event",
    "charge_corrections",
    "charging_inventory",
    "claim_frees_room",
    "collect_groups",
    "condition_patch",
    "current_condition",
    "cycle_input",
    "decide",
    "due_for_requeue",
    "evicted_status",
    "extended_status",
    "format_time",
    "is_managed",
    "late_admitted_event",
    "late_members",
    "late_wait_event",
    "next_phase",
    "node_frees_room",
    "overdue",
    "parse_pod_group_claims",
    "parse_time",
    "pending_counts",
    "pending_status",
    "phase_change",
    "pin_requirement",
    "pinned_affinity",
    "plan_status",
    "planned_allocation",
    "pod_frees_room",
    "preempted_message",
    "preempted_status",
    "promised_allocations",
    "promised_devices",
    "promised_pods",
    "rebuild_state",
    "recorded_plan",
    "requeue",
    "resized_event",
    "run_cycle",
    "slots_given_up_event",
    "unit_failures_of",
    "unknown_owner_event",
    "unreadable_owner",
    "unreleased_members",
    "victims_of",
    "waiting_condition",
    "with_owners",
    "with_pod_group_claims",
]
