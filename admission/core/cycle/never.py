"""Groups that waiting cannot help: members that fit neither the cluster with nothing else on it nor the
most their ClusterQueue could ever hold (its quota and what it may borrow, with its cohort idle).

Such a group waits as `NeverAdmissible`, not for devices or quota, and does not hold back its queue; the
message says what would have to change. A group is judged as it is: a declared shape with all its members
(placeholders for those not created yet), any other group with the pods it has (it is evaluated only
once it has its minimum). The answer cannot change until the group, its owner's spec, the cluster or the
queue does.
"""

from __future__ import annotations

from collections.abc import Sequence

from admission.core.allocator import (
    Allocator,
    GangMember,
    GangPlacement,
    KnownUnfit,
    Usage,
    gang_shape,
    members_for,
    place_gang,
)
from admission.core.cycle.shape import Gang
from admission.core.cycle.types import CycleInput, Wait, WaitReason
from admission.core.errors import DraqError
from admission.core.models import Pod
from admission.core.nodefit import NodeUsage
from admission.core.quota import (
    Amounts,
    GroupObjects,
    Inventory,
    Placement,
    QueueState,
    QuotaFit,
    Unchargeable,
    charge_group,
)

# The waits an idle cluster or an idle queue could end.
ROOM_REASONS = frozenset({WaitReason.DEVICES, WaitReason.NODES, WaitReason.QUOTA})


class Shapes:
    """What the gangs of one shape (`shape_key`) share in one cycle: their worst-case charge (no placement:
    what a gang that did not fit is charged), and their charge on the empty cluster when they fit there; and
    which of those charges each ClusterQueue can hold when idle. Each is worked out once per shape."""

    def __init__(self) -> None:
        self.keys: dict[str, object | None] = {}  # by group
        self.worst: dict[object, Amounts | None] = {}  # None: unchargeable
        self.charges: dict[object, Amounts] = {}
        self.fits: dict[tuple[str, Amounts], QuotaFit] = {}
        self._idle: QueueState | None = None

    def key(self, group: str, allocator: Allocator, members: Sequence[GangMember],
            pods: Sequence[Pod]) -> object | None:
        if group not in self.keys:
            self.keys[group] = shape_key(allocator, members, pods)
        return self.keys[group]

    def idle_fit(self, state: QueueState, queue: str, charge: Amounts) -> QuotaFit:
        found = self.fits.get((queue, charge))
        if found is None:
            self._idle = self._idle or QueueState.empty(state.queues.values())
            found = self.fits[(queue, charge)] = self._idle.fits(queue, charge)
        return found


def shape_key(allocator: Allocator, members: Sequence[GangMember], pods: Sequence[Pod]) -> object | None:
    """Equal for gangs that are placed alike on the empty cluster (`gang_shape`), share their claims alike
    and ask the same of the node (what the charge reads besides the devices and claims); None when the
    placement depends on more."""
    shape = gang_shape(allocator, members, NodeUsage())
    if shape is None:
        return None
    first: dict[str, int] = {}
    sharing = tuple(tuple(first.setdefault(c.key, len(first)) for c in m.claims) for m in members)
    asks = repr(tuple((p.containers, p.init_containers, p.overhead, p.resources) for p in pods))
    return (shape, sharing, asks)


def never_fits(group: str, gang: Gang, queue: str, allocator: Allocator, inventory: Inventory,
               cycle: CycleInput, empty_unfit: KnownUnfit | None = None,
               shapes: Shapes | None = None, members: Sequence[GangMember] | None = None) -> Wait | None:
    """A `NeverAdmissible` wait when the gang fits no empty cluster or no idle ClusterQueue `queue`. `empty_unfit`:
    what did not fit on the empty cluster, shared by the cycle's groups (one search per shape); `shapes`:
    what those that did fit are charged, shared likewise; `members`: the gang's, when the caller has them."""
    pods = gang.pods
    what, one = (f"its declared shape ({len(pods)} members)", True) if gang.slots else _members(pods)
    snapshot = cycle.snapshot
    if members is None:
        try:
            members = members_for(pods, snapshot.claims, snapshot.templates)
        except DraqError:
            return None
    shapes = shapes or Shapes()
    key = shapes.key(group, allocator, members, pods)
    charge = shapes.charges.get(key) if key is not None else None
    if charge is None:
        placed = place_gang(allocator, members, usage=Usage(), nodes=NodeUsage(), known=empty_unfit)
        if placed.error:
            return None
        if not placed.feasible and (not cycle.never_on_cluster or placed.gave_up):
            return None  # a search that gave up proves nothing
        if not placed.feasible:
            verb = "fits" if one else "fit"
            return Wait(group, WaitReason.NEVER_FITS, f"{what} {verb} on no set of nodes even with nothing else "
                        f"running: {devices_message(placed)}; shrink the workload or add nodes or devices that can "
                        "hold it", queue)
        placement = Placement(dict(placed.placements), dict(placed.allocations))
        try:
            charge = charge_group(GroupObjects(tuple(pods), snapshot.claims, snapshot.templates), cycle.units,
                                  inventory, cycle.matches, placement).total
        except Unchargeable:
            return None
        if key is not None:
            shapes.charges[key] = charge
    idle = shapes.idle_fit(cycle.state, queue, charge)
    if idle.ok:
        return None
    verb = "needs" if one else "need"
    return Wait(group, WaitReason.NEVER_FITS, f"{what} {verb} {charge.describe()}, more than ClusterQueue "
                f"{queue} can ever hold with its cohort idle ({idle.reason}); shrink the workload, or raise the "
                "queue's nominal quota or borrowing limit (or give it a cohort that can lend)", queue)


def _members(pods: Sequence[Pod]) -> tuple[str, bool]:
    """How a group without a declared shape is named in the message, and whether that is one thing."""
    return (f"its pod {pods[0].key}", True) if len(pods) == 1 else (f"its {len(pods)} members", False)


def devices_message(placed: GangPlacement) -> str:
    """Why a gang was not placed: the allocator's reason, and what each request it could not meet lacked."""
    message = placed.reason or "the group's pods fit on no set of nodes"
    if placed.gave_up:
        message += f"; whether it fits is not known, it waits and is tried again ({placed.gave_up})"
    if placed.explanation is not None:
        requests = [r for r in placed.explanation.requests if r.short_by] or list(placed.explanation.requests)
        if requests:
            message += "; " + "; ".join(r.describe() for r in requests)
    return message
