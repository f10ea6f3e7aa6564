"""The devices admitted groups still hold back, as the scheduler can still honour them.

draq pins a released member to its planned node, not to its planned devices: the scheduler may give the
member's claim other free devices of that node. Until that claim's own allocation is seen, its plan names
devices one of which may already be allocated to another claim pinned there. Counted by device id, the two
would collapse into one and the node would look one device emptier than it is, so the next plan could
put one member too many on it. A promise whose devices are taken is therefore placed again, on its node,
on what is free there now; the number of devices held per node stays right.
"""

from __future__ import annotations

from collections.abc import Iterable

from admission.core.allocator import Allocator, Snapshot, Usage, pod_claims
from admission.core.cycle.groups import GroupView
from admission.core.cycle.plans import PendingClaim, planned_allocation
from admission.core.cycle.progress import pending_claims
from admission.core.errors import InvalidInput
from admission.core.features import FeatureGates
from admission.core.models import AllocationResult, ResourceClaim


def settled_promises(snapshot: Snapshot, gates: FeatureGates,
                     groups: Iterable[GroupView]) -> tuple[AllocationResult, ...]:
    """The devices of admitted or running groups' claims not seen allocated yet, each promise whose planned
    devices are taken by then placed again on its node (kept as planned when it cannot be: no member's node
    is known for it, neither the claim nor its template is there, or nothing on the node fits it any more)."""
    pending = pending_claims(groups, snapshot.claims)
    if not pending:
        return ()
    usage = snapshot.in_use(gates).copy()
    allocator: Allocator | None = None
    settled = []
    for promise in pending:
        allocation = planned_allocation(promise.planned)
        if promise.node and _taken(allocation, usage):
            allocator = allocator or Allocator(snapshot, gates)
            allocation = _placed_again(allocator, promise, usage) or allocation
        usage.add(allocation, gates)
        settled.append(allocation)
    return tuple(settled)


def _taken(allocation: AllocationResult, usage: Usage) -> bool:
    return any(not r.admin_access and not r.share_id and usage.is_allocated(r.device_id) for r in allocation.results)


def _placed_again(allocator: Allocator, promise: PendingClaim, usage: Usage) -> AllocationResult | None:
    claim = promise.claim or _placeholder(allocator.snapshot, promise)
    if claim is None or promise.node not in allocator.snapshot.nodes:
        return None
    outcome = allocator.allocate(promise.node, [claim], usage)
    return outcome.allocations.get(claim.key) if outcome.allocatable else None


def _placeholder(snapshot: Snapshot, promise: PendingClaim) -> ResourceClaim | None:
    """The claim a member's template entry will make, as the plan was made with it, while the claim
    controller has not created it yet (in a burst it can lag by seconds)."""
    member, slash, entry = promise.planned.name.partition("/")
    pod = snapshot.pods.get(f"{promise.namespace}/{member}")
    if not slash or pod is None:
        return None
    try:
        claims = pod_claims(snapshot.claims, snapshot.templates, pod)
    except InvalidInput:
        return None
    name = pod.pending_claim_name(entry)
    return next((c for c in claims if c.name == name), None)
