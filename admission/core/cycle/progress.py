"""What happens to a group after admission: its phase from its pods, the accounting rebuilt from PodGroups,
and the devices admitted-but-unbound groups still hold back."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from admission.core.cycle.extended import extended_claims_of
from admission.core.cycle.groups import TERMINAL_PHASES, GroupView
from admission.core.cycle.plans import PendingClaim, planned_allocation, unallocated_claims
from admission.core.models import AllocationResult, ResourceClaim, ResourceClaimTemplate
from admission.core.quota import (
    Admission,
    Amounts,
    ChargeResult,
    ClusterQueue,
    CompiledUnit,
    GroupObjects,
    Inventory,
    Phase,
    QueueState,
    Reconciliation,
    SelectionFilter,
    Unchargeable,
    charge_group,
    charge_status,
    reconcile,
    reconciliation_status,
)
from admission.core.quota.unreadable import Unreadable, with_unreadable


def next_phase(group: GroupView) -> Phase | None:
    """The phase an admitted group moves to now, or None when it stays.

    Admitted -> Running once every planned member is bound to a node; Admitted or Running ->
    Finished once every member has succeeded or failed (or all are gone). A group with open slots (declared
    members not created yet) stays Admitted: their room stays held until they come or the bind timeout ends it.
    """
    pod_group = group.pod_group
    if pod_group is None or not pod_group.holds_quota:
        return None
    if pod_group.plan.open_slots:
        return None
    if not group.pods or all(p.phase in TERMINAL_PHASES for p in group.pods):
        return Phase.FINISHED
    if pod_group.phase is Phase.ADMITTED:
        planned = {name for name, _ in pod_group.plan.nodes} or {p.name for p in group.pods}
        members = [p for p in group.pods if p.name in planned]
        if len(members) >= len(planned) and all(p.node_name for p in members):
            return Phase.RUNNING
    return None


def rebuild_state(queues: Iterable[ClusterQueue], groups: Iterable[GroupView],
                  unreadable: Iterable[Unreadable] = ()) -> QueueState:
    """The queue accounting as recorded in PodGroup status (reserved while Admitted, used once Running).

    Where an object that does not parse may hold quota (`unreadable`), the usage is marked unknown.
    """
    state = QueueState.empty(queues)
    for group in groups:
        if not group.holds_quota and (group.pod_group is not None or group.last_sealed is None):
            continue  # the view's precomputed answer: thousands of waiting groups cost one field read each
        pod_group = group.counted_record
        if pod_group is None or not pod_group.holds_quota:
            continue
        state = state.restore(Admission(group.key, pod_group.cluster_queue, pod_group.charge,
                                        f"{group.namespace}/{pod_group.queue}",
                                        bound=pod_group.phase is Phase.RUNNING))
    return with_unreadable(state, unreadable)


def promised_devices(groups: Iterable[GroupView], claims: Mapping[str, ResourceClaim]) -> tuple[AllocationResult, ...]:
    """Devices planned for admitted or running groups whose claims are not seen allocated yet.

    Running groups count too: the pod watch may report a member bound before the claim watch reports
    the allocation the scheduler wrote first, and in between the planned devices must not look free.
    """
    return tuple(planned_allocation(p.planned) for p in pending_claims(groups, claims))


def pending_claims(groups: Iterable[GroupView], claims: Mapping[str, ResourceClaim]) -> tuple[PendingClaim, ...]:
    """The planned claims of admitted or running groups not seen allocated yet (see `promised_devices`)."""
    pending: list[PendingClaim] = []
    for group in groups:
        pod_group = group.pod_group
        if group.holds_quota and pod_group is not None:
            pending.extend(unallocated_claims(pod_group.plan, group.pods, claims, group.namespace,
                                              pod_group.phase is Phase.RUNNING))
    return tuple(pending)


def unreleased_members(group: GroupView) -> tuple[str, ...]:
    """Names of planned members of an admitted group that still carry the gate (a release to finish)."""
    pod_group = group.pod_group
    if pod_group is None or not pod_group.holds_quota:
        return ()
    planned = {name for name, _ in pod_group.plan.nodes}
    unplanned = not planned and not pod_group.plan.slots  # a record from before plans: all members go
    return tuple(p.name for p in group.gated if unplanned or p.name in planned)


@dataclass(frozen=True, slots=True)
class ChargeCorrection:
    """A running group's recorded charge replaced by what its live members' claims really hold."""

    group: str
    charge: Amounts
    reconciliation: Reconciliation

    def status(self, borrowed: Amounts) -> dict[str, Any]:
        kept = Amounts.of((unit, min(amount, self.charge.get(unit))) for unit, amount in borrowed)
        return {"charge": charge_status(self.charge, kept),
                "reconciliation": reconciliation_status(self.reconciliation),
                "message": f"all members are bound; charge follows the real allocation ({self.describe()})"}

    def describe(self) -> str:
        return "; ".join(d.describe() for d in self.reconciliation.differences)


def charge_corrections(groups: Iterable[GroupView], claims: Mapping[str, ResourceClaim],
                       templates: Mapping[str, ResourceClaimTemplate], units: Sequence[CompiledUnit],
                       inventory: Inventory, matches: SelectionFilter) -> tuple[ChargeCorrection, ...]:
    """Running groups whose recorded charge differs from what their claims hold now.

    Only members that are still running count (a finished member's claims are released), and only
    once every one of their claims is allocated: while an allocation is still arriving the recorded
    charge stands, so usage never dips below what the group will hold. Units not in `units` (deleted, or
    invalid now) keep their recorded amounts: they cannot be computed, and are not dropped. The claims made for
    extended resources are found once for all the groups, not once per member.
    """
    corrections = []
    extended: Mapping[tuple[str, str], ResourceClaim] | None = None
    for group in groups:
        pod_group = group.pod_group
        if pod_group is None or pod_group.phase is not Phase.RUNNING:
            continue
        live = tuple(p for p in group.pods if p.phase not in TERMINAL_PHASES)
        if not live:
            continue  # the group is finishing: its charge is released as a whole
        if extended is None:
            extended = extended_claims_of(claims)
        try:
            allocated = charge_group(GroupObjects(live, claims, templates, extended), units, inventory, matches,
                                     allocated_only=True)
        except Unchargeable:
            continue
        allocated = _keeping_unusable(allocated, pod_group.charge, units)
        if allocated.unallocated or allocated.total == pod_group.charge:
            continue
        corrections.append(ChargeCorrection(group.key, allocated.total, reconcile(pod_group.charge, allocated)))
    return tuple(corrections)


def _keeping_unusable(allocated: ChargeResult, recorded: Amounts, units: Sequence[CompiledUnit]) -> ChargeResult:
    """`allocated` plus the recorded amounts of the units not in `units`, which cannot be computed now."""
    usable = {unit.name for unit in units}
    kept = Amounts.of((unit, amount) for unit, amount in recorded if unit not in usable)
    return ChargeResult(allocated.total + kept, allocated.lines, allocated.unallocated)
