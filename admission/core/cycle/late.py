"""Members that arrive after their group was admitted (a Job's replacement pod, a slow controller).

Such a member is not in the group's recorded plan. When the group was admitted from its declared shape
and the member matches the template of a role with an open slot (`cycle.shape.matches`), it takes that
slot: it is pinned to the slot's node and given the slot's devices, already held and charged. Any other
member is placed with the allocator on the cycle's snapshot, next to everything already admitted (open
slots included; inside the group's domain when it requires one, `cycle.topology`), and charged; if it
fits both its devices and the group's ClusterQueue, the group's record grows (charge and plan) and the
member is released pinned like the others. Otherwise it stays gated and the group says why.
"""

from __future__ import annotations

from admission.core.allocator import Allocator, Usage, members_for
from admission.core.cycle.groups import GroupView
from admission.core.cycle.plans import filled, recorded_plan
from admission.core.cycle.shape import take_slots
from admission.core.cycle.topology import place_late
from admission.core.cycle.types import CycleInput, Extend, LateWait
from admission.core.errors import DraqError
from admission.core.models import Pod
from admission.core.nodefit import NodeUsage
from admission.core.quota import (
    NONE,
    GroupObjects,
    Inventory,
    Placement,
    Plan,
    QueueState,
    Unchargeable,
    charge_group,
)

LATE_CONDITION = "MembersAdmitted"


def late_members(group: GroupView) -> tuple[Pod, ...]:
    """Gated members of an admitted or running group that its recorded plan does not name."""
    pod_group = group.pod_group
    if pod_group is None or not pod_group.holds_quota or not (pod_group.plan.nodes or pod_group.plan.slots):
        return ()
    planned = {name for name, _ in pod_group.plan.nodes}
    return tuple(p for p in group.gated if p.name not in planned)


def extend(group: GroupView, late: tuple[Pod, ...], state: QueueState, allocator: Allocator, usage: Usage,
           nodes: NodeUsage, inventory: Inventory, cycle: CycleInput) -> Extend | LateWait:
    """Late members into the open slots they match, the others placed and charged afresh; or why they wait.
    When only those that took a slot can go, they go now and the others are tried again next cycle."""
    pod_group = group.pod_group
    assert pod_group is not None
    taken, rest = take_slots(pod_group.plan.open_slots, group.declared, late)
    plan = filled(pod_group.plan, taken)
    joined = Extend(group.key, pod_group.cluster_queue, pod_group.charge, NONE, plan,
                    Placement({pod.key: slot.node for pod, slot in taken}), tuple(pod.key for pod, _ in taken))
    if not rest:
        return joined
    fresh = _placed_afresh(group, rest, plan, state, allocator, usage, nodes, inventory, cycle)
    if isinstance(fresh, LateWait):
        return joined if taken else fresh
    return Extend(group.key, fresh.cluster_queue, fresh.charge, fresh.added, fresh.plan,
                  Placement({**joined.placement.nodes, **fresh.placement.nodes}, fresh.placement.allocations),
                  joined.joined)


def _placed_afresh(group: GroupView, late: tuple[Pod, ...], plan: Plan, state: QueueState, allocator: Allocator,
                   usage: Usage, nodes: NodeUsage, inventory: Inventory, cycle: CycleInput) -> Extend | LateWait:
    """Place and charge late members that take no slot, next to everything admitted, or say why they wait."""
    pod_group = group.pod_group
    assert pod_group is not None
    snapshot = cycle.snapshot
    names = ", ".join(p.name for p in late)
    try:
        members = members_for(late, snapshot.claims, snapshot.templates)
    except DraqError as err:
        return LateWait(group.key, f"late member(s) {names}: {err}")
    placed = place_late(group, pod_group.cluster_queue, plan, allocator, members, usage, nodes, cycle)
    if not placed.feasible:
        return LateWait(group.key, f"late member(s) {names} fit on no node now{_no_slot(group)}: {placed.reason}")
    placement = Placement(dict(placed.placements), dict(placed.allocations))
    try:
        added = charge_group(GroupObjects(late, snapshot.claims, snapshot.templates), cycle.units, inventory,
                             cycle.matches, placement).total
    except Unchargeable as err:
        return LateWait(group.key, f"late member(s) {names} cannot be charged: {err}")
    fits = state.fits(pod_group.cluster_queue, added)
    if not fits.ok:
        return LateWait(group.key, f"late member(s) {names} do not fit the quota: {fits.reason}")
    more = recorded_plan(late, placed.placements, placed.allocations)
    combined = Plan(plan.nodes + more.nodes, plan.claims + more.claims, plan.slots)
    return Extend(group.key, pod_group.cluster_queue, pod_group.charge + added, added, combined, placement)


def _no_slot(group: GroupView) -> str:
    """Why a member of a declared shape did not take a slot, when it had open ones to take."""
    if group.pod_group is None or not group.pod_group.plan.open_slots:
        return ""
    if group.declared is None:
        return " (its group's declared shape is no longer known, so no reserved slot can be matched)"
    return (" (it matches no open slot's role template: containers' requests and limits, claims and node "
            "constraints must equal the template's)")
