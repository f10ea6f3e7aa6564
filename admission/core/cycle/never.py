"""Groups that waiting cannot help: a declared shape that fits neither the cluster with nothing else on it
nor the most its ClusterQueue could ever hold (its quota and what it may borrow, with its cohort idle).

Such a group waits as `NeverAdmissible`, not for devices or quota, and does not hold back its queue.
Only declared shapes are judged so: their members are all known, so the answer cannot change until the
owner's spec, the cluster or the queue does.
"""

from __future__ import annotations

from collections.abc import Sequence

from admission.core.allocator import Allocator, Usage, members_for, place_gang
from admission.core.cycle.types import CycleInput, Wait, WaitReason
from admission.core.errors import DraqError
from admission.core.models import Pod
from admission.core.nodefit import NodeUsage
from admission.core.quota import GroupObjects, Inventory, Placement, QueueState, Unchargeable, charge_group

# The waits an idle cluster or an idle queue could end.
ROOM_REASONS = frozenset({WaitReason.DEVICES, WaitReason.NODES, WaitReason.QUOTA})


def never_fits(group: str, pods: Sequence[Pod], queue: str, allocator: Allocator, inventory: Inventory,
               cycle: CycleInput) -> Wait | None:
    """A `NeverAdmissible` wait when the gang `pods` fits no empty cluster or no idle ClusterQueue `queue`."""
    snapshot = cycle.snapshot
    try:
        members = members_for(pods, snapshot.claims, snapshot.templates)
    except DraqError:
        return None
    placed = place_gang(allocator, members, usage=Usage(), nodes=NodeUsage())
    if placed.error:
        return None
    if not placed.feasible:
        return Wait(group, WaitReason.NEVER_FITS, f"its declared shape ({len(pods)} members) fits on no set of "
                    f"nodes even with nothing else running: {placed.reason}; shrink the workload or add "
                    "nodes or devices", queue)
    placement = Placement(dict(placed.placements), dict(placed.allocations))
    try:
        charge = charge_group(GroupObjects(tuple(pods), snapshot.claims, snapshot.templates), cycle.units,
                              inventory, cycle.matches, placement).total
    except Unchargeable:
        return None
    idle = QueueState.empty(cycle.state.queues.values()).fits(queue, charge)
    if idle.ok:
        return None
    return Wait(group, WaitReason.NEVER_FITS, f"its declared shape needs {charge.describe()}, more than ClusterQueue "
                f"{queue} can ever hold with its cohort idle ({idle.reason}); shrink the workload or raise the "
                "queue's quota", queue)
