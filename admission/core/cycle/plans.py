"""A gang placement as the PodGroup records it, and back from a recorded plan to the devices it promises.
(Charging reads the placement as it is: `quota.Placement(placements, allocations)`.)"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from admission.core.cycle.groups import TERMINAL_PHASES
from admission.core.models import AllocationResult, DeviceAllocation, Pod, ResourceClaim
from admission.core.quota import Plan, PlannedClaim, Slot


def claim_name(pod: Pod, entry_name: str, real_name: str | None) -> str:
    """The name a pod's claim has in plans and PodGroup status: its own, or `Pod.pending_claim_name`."""
    return real_name or pod.pending_claim_name(entry_name)


def recorded_plan(pods: Sequence[Pod], placements: Mapping[str, str],
                  allocations: Mapping[str, AllocationResult]) -> Plan:
    nodes = tuple((pod.name, placements[pod.key]) for pod in pods if pod.key in placements)
    claims: dict[str, PlannedClaim] = {}
    for pod in pods:
        for entry in pod.resource_claims:
            name = claim_name(pod, entry.name, pod.claim_name_for(entry))
            allocation = allocations.get(f"{pod.namespace}/{name}")
            if name in claims or allocation is None:
                continue
            claims[name] = PlannedClaim(name, tuple((r.request, r.device_id) for r in allocation.results))
    return Plan(nodes, tuple(claims.values()))


def planned_allocation(claim: PlannedClaim) -> AllocationResult:
    """The devices a recorded claim plan holds, as an allocation (without consumed capacity)."""
    results = []
    for request, device_id in claim.devices:
        driver, _, rest = device_id.partition("/")
        pool, _, device = rest.rpartition("/")
        results.append(DeviceAllocation(request=request, driver=driver, pool=pool, device=device))
    return AllocationResult(results=tuple(results))


def promised_allocations(plan: Plan, pods: Iterable[Pod], claims: Mapping[str, ResourceClaim], namespace: str,
                         running: bool = False) -> tuple[AllocationResult, ...]:
    """Devices a recorded plan still holds back: its claims that the scheduler has not allocated yet.

    For a `running` group only a claim that exists unallocated while its member lives is held back (the
    allocation is on its way); a claim gone with its member, or released by a finished one, holds nothing.
    """
    return tuple(planned_allocation(p.planned) for p in unallocated_claims(plan, pods, claims, namespace, running))


@dataclasses.dataclass(frozen=True, slots=True)
class PendingClaim:
    """A planned claim not allocated yet: the claim as it is now (None until it exists) and the node of
    the planned member that uses it ("" when none is known)."""

    planned: PlannedClaim
    claim: ResourceClaim | None
    node: str
    namespace: str = ""


def unallocated_claims(plan: Plan, pods: Iterable[Pod], claims: Mapping[str, ResourceClaim], namespace: str,
                       running: bool = False) -> tuple[PendingClaim, ...]:
    """The claims of a recorded plan that are not seen allocated yet (see `promised_allocations`)."""
    by_name = {p.name: p for p in pods}
    nodes = dict(plan.nodes)
    users: dict[str, str] | None = None
    pending = []
    for planned in plan.claims:
        real = _real_claim_name(planned.name, by_name)
        claim = claims.get(f"{namespace}/{real}") if real else None
        if claim is not None and claim.allocation is not None:
            continue
        if running and (claim is None or not _member_lives(planned.name, by_name)):
            continue
        member, slash, _ = planned.name.partition("/")
        if not slash:  # recorded under the claim's own name: the node of a planned member using it
            users = users if users is not None else _claim_users(by_name.values(), nodes)
            member = users.get(planned.name, "")
        pending.append(PendingClaim(planned, claim, nodes.get(member, ""), namespace))
    return tuple(pending)


def _claim_users(pods: Iterable[Pod], nodes: Mapping[str, str]) -> dict[str, str]:
    """Claim name -> the name of a planned member that uses it."""
    users: dict[str, str] = {}
    for pod in pods:
        if pod.name in nodes:
            for entry in pod.resource_claims:
                name = pod.claim_name_for(entry)
                if name:
                    users.setdefault(name, pod.name)
    return users


def _member_lives(recorded: str, pods: Mapping[str, Pod]) -> bool:
    if "/" not in recorded:  # a claim shared by name: held while the group runs
        return True
    pod = pods.get(recorded.partition("/")[0])
    return pod is not None and pod.phase not in TERMINAL_PHASES


def _real_claim_name(recorded: str, pods: Mapping[str, Pod]) -> str | None:
    if "/" not in recorded:
        return recorded
    pod_name, _, entry = recorded.partition("/")
    pod = pods.get(pod_name)
    if pod is None:
        return None
    return next((s.resource_claim_name for s in pod.resource_claim_statuses if s.name == entry), None)


def shaped_plan(pods: Sequence[Pod], slots: Sequence[tuple[Slot, Pod]], placements: Mapping[str, str],
                allocations: Mapping[str, AllocationResult]) -> Plan:
    """The plan of a gang admitted from its declared shape: the existing members' nodes, every claim (a
    placeholder's under its slot's name), and each slot with the node it was given."""
    plan = recorded_plan(pods, placements, allocations)
    if not slots:
        return plan
    open_names = {pod.name for slot, pod in slots if slot.open}
    nodes = tuple((name, node) for name, node in plan.nodes if name not in open_names)
    placed = tuple(dataclasses.replace(slot, node=placements[pod.key]) for slot, pod in slots)
    return Plan(nodes, plan.claims, placed)


def filled(plan: Plan, taken: Sequence[tuple[Pod, Slot]]) -> Plan:
    """`plan` with members in the slots they took: each listed on its slot's node, named in its slot, and
    given its slot's planned claims under its own claim names."""
    if not taken:
        return plan
    by_slot = {slot.name: pod for pod, slot in taken}
    slots = tuple(dataclasses.replace(s, pod=by_slot[s.name].name) if s.name in by_slot else s for s in plan.slots)
    claims = tuple(_renamed(claim, by_slot) for claim in plan.claims)
    nodes = plan.nodes + tuple((pod.name, slot.node) for pod, slot in taken)
    return Plan(nodes, claims, slots)


def given_up(plan: Plan, pairs: Sequence[tuple[Pod, Slot]]) -> Plan:
    """`plan` with open slots given up to members that match no role: each slot names its member, who is not
    placed on it, and the slot's planned claims are dropped, so its devices are no longer promised."""
    if not pairs:
        return plan
    by_slot = {slot.name: pod for pod, slot in pairs}
    slots = tuple(dataclasses.replace(s, pod=by_slot[s.name].name) if s.name in by_slot else s for s in plan.slots)
    claims = tuple(c for c in plan.claims if c.name.partition("/")[0] not in by_slot)
    return Plan(plan.nodes, claims, slots)


def _renamed(claim: PlannedClaim, by_slot: Mapping[str, Pod]) -> PlannedClaim:
    owner, sep, entry = claim.name.partition("/")
    pod = by_slot.get(owner) if sep else None
    return claim if pod is None else dataclasses.replace(claim, name=pod.pending_claim_name(entry))
