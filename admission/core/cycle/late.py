"""Members that arrive after their group was admitted (a Job's replacement pod, a slow controller).

Such a member is not in the group's recorded plan. When the group was admitted from its declared shape
and the member matches the template of a role with an open slot (`cycle.shape.matches`), it takes that
slot: it is pinned to the slot's node and given the slot's devices, already held and charged. Any other
member is placed with the allocator on the cycle's snapshot, next to everything already admitted (open
slots included; inside the group's domain when it requires one, `cycle.topology`), and charged; if it
fits both its devices and the group's ClusterQueue, the group's record grows (charge and plan) and the
member is released pinned like the others. Otherwise it stays gated and the group says why.

A member that matches no role of the declared shape at all (an admission plugin changed its requests, say)
while the group has more members and open slots than declared slots stands for one of those open slots: it
waits one cycle while the last open slot is given up (its devices and node room released, its charge taken
off the group's), then is placed as itself like any other late member. So a slot that no member will ever
take is not held until the bind timeout evicts the whole group.
"""

from __future__ import annotations

from admission.core.allocator import Allocator, Usage, members_for
from admission.core.cycle.groups import TERMINAL_PHASES, GroupView
from admission.core.cycle.plans import filled, given_up, planned_allocation, recorded_plan
from admission.core.cycle.shape import matches, placeholder, take_slots
from admission.core.cycle.topology import place_late
from admission.core.cycle.types import CycleInput, Extend, LateWait
from admission.core.errors import DraqError
from admission.core.models import Pod
from admission.core.nodefit import NodeUsage
from admission.core.quota import (
    NONE,
    Amounts,
    GroupObjects,
    Inventory,
    Placement,
    Plan,
    QueueState,
    Slot,
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
    strays = _strays(group, plan, rest)
    if strays:
        return _give_up(group, joined, strays, cycle, inventory)
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


def _strays(group: GroupView, plan: Plan, rest: tuple[Pod, ...]) -> tuple[tuple[Pod, Slot], ...]:
    """Late members that match no role of the declared shape, each with the open slot it stands for (from the
    last, as at admission): only while the group's live members and open slots outnumber its slots."""
    if group.declared is None or not plan.open_slots:
        return ()
    live = sum(1 for p in group.pods if p.phase not in TERMINAL_PHASES)
    extra = live + len(plan.open_slots) - len(plan.slots)
    strays = [p for p in rest if not any(matches(p, role.template) for role in group.declared.roles)]
    return tuple(zip(strays[:max(extra, 0)], reversed(plan.open_slots), strict=False))


def _give_up(group: GroupView, joined: Extend, strays: tuple[tuple[Pod, Slot], ...], cycle: CycleInput,
             inventory: Inventory) -> Extend:
    """The record with the strays' slots given up and their charge taken off; members that took a slot go."""
    freed = NONE
    for _, slot in strays:
        freed = freed + _slot_charge(group, joined.plan, slot, cycle, inventory)
    return Extend(group.key, joined.cluster_queue, (joined.charge - freed).maximum(NONE), NONE,
                  given_up(joined.plan, strays), joined.placement, joined.joined,
                  tuple((pod.name, slot.name) for pod, slot in strays), freed)


def _slot_charge(group: GroupView, plan: Plan, slot: Slot, cycle: CycleInput, inventory: Inventory) -> Amounts:
    """What an open slot was charged: its role template on its node with its planned devices. Nothing when that
    cannot be told alone (the template shares a claim it names, or no longer charges): the charge then stays
    until the running group's charge correction."""
    role = next((r for r in group.declared.roles if r.name == slot.role), None) if group.declared else None
    if role is None or any(e.resource_claim_name for e in role.template.resource_claims):
        return NONE
    pod = placeholder(role, slot, group.namespace)
    allocations = {f"{group.namespace}/{claim.name}": planned_allocation(claim) for claim in plan.claims
                   if claim.name.partition("/")[0] == slot.name}
    snapshot = cycle.snapshot
    try:
        return charge_group(GroupObjects((pod,), snapshot.claims, snapshot.templates), cycle.units, inventory,
                            cycle.matches, Placement({pod.key: slot.node}, allocations)).total
    except Unchargeable:
        return NONE


def _no_slot(group: GroupView) -> str:
    """Why a member of a declared shape did not take a slot, when it had open ones to take."""
    if group.pod_group is None or not group.pod_group.plan.open_slots:
        return ""
    if group.declared is None:
        return " (its group's declared shape is no longer known, so no reserved slot can be matched)"
    return (" (it matches no open slot's role template: containers' requests and limits, claims and node "
            "constraints must equal the template's)")
