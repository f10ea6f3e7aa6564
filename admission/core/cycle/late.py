"""Members that arrive after their group was admitted (a Job's replacement pod, a slow controller).

Such a member is not in the group's recorded plan. It is placed with the allocator on the cycle's
snapshot, next to everything already admitted, and charged; if it fits both its devices and the
group's ClusterQueue, the group's record grows (charge and plan) and the member is released pinned
like the others. Otherwise it stays gated and the group says why.
"""

from __future__ import annotations

from admission.core.allocator import Allocator, Usage, members_for, place_gang
from admission.core.cycle.groups import GroupView
from admission.core.cycle.plans import recorded_plan
from admission.core.cycle.types import CycleInput, Extend, LateWait
from admission.core.errors import DraqError
from admission.core.models import Pod
from admission.core.nodefit import NodeUsage
from admission.core.quota import (
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
    if pod_group is None or not pod_group.holds_quota or not pod_group.plan.nodes:
        return ()
    planned = {name for name, _ in pod_group.plan.nodes}
    return tuple(p for p in group.gated if p.name not in planned)


def extend(group: GroupView, late: tuple[Pod, ...], state: QueueState, allocator: Allocator, usage: Usage,
           nodes: NodeUsage, inventory: Inventory, cycle: CycleInput) -> Extend | LateWait:
    """Place and charge the late members of an admitted group, or say why they wait."""
    pod_group = group.pod_group
    assert pod_group is not None
    snapshot = cycle.snapshot
    names = ", ".join(p.name for p in late)
    try:
        members = members_for(late, snapshot.claims, snapshot.templates)
    except DraqError as err:
        return LateWait(group.key, f"late member(s) {names}: {err}")
    placed = place_gang(allocator, members, usage=usage, nodes=nodes)
    if not placed.feasible:
        return LateWait(group.key, f"late member(s) {names} fit on no node now: {placed.reason}")
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
    combined = Plan(pod_group.plan.nodes + more.nodes, pod_group.plan.claims + more.claims)
    return Extend(group.key, pod_group.cluster_queue, pod_group.charge + added, added, combined, placement)
