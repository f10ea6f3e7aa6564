"""Gang placement: all pods of a group on nodes, one after another, as the scheduler would place them.

Each pod's claims are allocated together on its node; a claim shared by several pods is allocated
once, by the first pod, and later pods must land where that allocation is usable. Devices taken by
earlier pods are in use for later ones. The node search is bounded: nodes are tried in a fixed,
sensible order, and a member that fits nowhere makes the previous member move on, at most
`max_backtracks` times in total.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from admission.core.allocator.api import Allocator, Outcome, Status
from admission.core.allocator.explain import Explanation, explain_best
from admission.core.allocator.usage import Usage
from admission.core.errors import InvalidInput
from admission.core.models import AllocationResult, Node, Pod, ResourceClaim, ResourceClaimTemplate
from admission.core.models.meta import ObjectMeta

DEFAULT_MAX_BACKTRACKS = 16


@dataclass(frozen=True, slots=True)
class GangMember:
    """One pod of a group and its claims in `spec.resourceClaims` order (templates already resolved)."""

    key: str
    claims: tuple[ResourceClaim, ...]
    # Nodes this pod may use (its node selector / affinity, decided by the caller); None = all nodes.
    nodes: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class GangPlan:
    feasible: bool
    placements: Mapping[str, str] = field(default_factory=dict)  # pod key -> node name
    allocations: Mapping[str, AllocationResult] = field(default_factory=dict)  # claim key -> result
    reason: str | None = None
    failed_member: str | None = None
    explanation: Explanation | None = None
    error: bool = False  # the reason is an allocation error (e.g. a CEL error), not a lack of devices


@dataclass(slots=True)
class _State:
    usage: Usage
    allocations: dict[str, AllocationResult]
    placements: dict[str, str]
    # (claims shape, node) known not to fit. Usage only grows along a branch, so what did not fit
    # stays unfit for every later pod with the same claims: gangs of identical pods skip full nodes.
    unfit: set[tuple[str, str]] = field(default_factory=set)


def place_gang(allocator: Allocator, members: Sequence[GangMember], *,
               promised: Iterable[AllocationResult] = (), usage: Usage | None = None,
               max_backtracks: int = DEFAULT_MAX_BACKTRACKS) -> GangPlan:
    """Place every member or say why not. `promised`: devices of admitted-but-unbound groups."""
    base = (usage or allocator.usage).copy()
    for allocation in promised:
        base.add(allocation, allocator.gates)
    node_names = sorted(allocator.snapshot.nodes)
    states = [_State(base, {}, {})]
    cursors = [0]
    backtracks = 0
    candidates_of = [_candidates(allocator, m, node_names) for m in members]
    last_failure: Outcome | None = None
    # The failure that got furthest is the one worth reporting.
    deepest: tuple[int, _State, Outcome | None] | None = None
    while len(states) <= len(members):
        index = len(states) - 1
        member, state = members[index], states[-1]
        placed = _place_one(allocator, member, state, candidates_of[index], cursors[index])
        if isinstance(placed, tuple):
            next_state, cursor = placed
            cursors[index] = cursor + 1
            states.append(next_state)
            cursors.append(0)
            continue
        last_failure = placed or last_failure
        if last_failure is not None and last_failure.status is Status.ERROR:
            return GangPlan(False, reason=last_failure.message, failed_member=member.key, error=True)
        if deepest is None or index >= deepest[0]:
            deepest = (index, state, last_failure)
        if index == 0 or backtracks >= max_backtracks:
            at, at_state, outcome = deepest
            return _failure(allocator, members[at], at_state, candidates_of[at], outcome)
        backtracks += 1
        states.pop()
        cursors.pop()
    final = states[-1]
    return GangPlan(True, dict(final.placements), dict(final.allocations))


def _candidates(allocator: Allocator, member: GangMember, node_names: list[str]) -> list[str]:
    allowed = node_names if member.nodes is None else [n for n in node_names if n in set(member.nodes)]
    return [n for n in allowed if not allocator.snapshot.nodes[n].unschedulable]


def _place_one(allocator: Allocator, member: GangMember, state: _State, candidates: list[str],
               start: int) -> tuple[_State, int] | Outcome | None:
    """The first node from `start` on where the member fits, with the new state; else the last failure."""
    claims = [_with_known_allocation(c, state.allocations) for c in member.claims]
    shape = _shape(claims)
    last: Outcome | None = None
    for position in range(start, len(candidates)):
        if (shape, candidates[position]) in state.unfit:
            continue
        outcome = allocator.allocate(candidates[position], claims, state.usage)
        if outcome.status in (Status.UNFIT, Status.NODE_ERROR) and not outcome.gave_up:
            state.unfit.add((shape, candidates[position]))
        if outcome.allocatable:
            usage = state.usage.copy()
            allocations = dict(state.allocations)
            for key, allocation in outcome.allocations.items():
                usage.add(allocation, allocator.gates)
                allocations[key] = allocation
            placements = {**state.placements, member.key: candidates[position]}
            return _State(usage, allocations, placements, set(state.unfit)), position
        last = outcome
        if outcome.status is Status.ERROR:
            return outcome  # a hard error fails on every node alike
    return last


def _shape(claims: Sequence[ResourceClaim]) -> str:
    return repr([(c.spec, c.key if c.allocation is not None else None, c.allocation) for c in claims])


def _with_known_allocation(claim: ResourceClaim, allocations: Mapping[str, AllocationResult]) -> ResourceClaim:
    found = allocations.get(claim.key)
    return claim if found is None else dataclasses.replace(claim, allocation=found)


def _failure(allocator: Allocator, member: GangMember, state: _State, candidates: list[str],
             last: Outcome | None) -> GangPlan:
    claims = [_with_known_allocation(c, state.allocations) for c in member.claims]
    best = explain_best(allocator, candidates, claims, state.usage)
    placed = len(state.placements)
    if not candidates:
        reason = f"pod {member.key}: no node to try"
    elif last is not None and last.missing_class:
        reason = f"pod {member.key}: device class {last.missing_class} does not exist"
    else:
        reason = (f"pod {member.key} fits on no node after placing {placed} other pod(s) of the group"
                  + (f"; best node {best.node}" if best else ""))
    return GangPlan(False, dict(state.placements), dict(state.allocations), reason, member.key, best)


def pod_claims(snapshot_claims: Mapping[str, ResourceClaim], templates: Mapping[str, ResourceClaimTemplate],
               pod: Pod) -> tuple[ResourceClaim, ...]:
    """The claims a pod uses, in `spec.resourceClaims` order; template claims not yet created are
    made in memory, named `Pod.pending_claim_name`."""
    claims: list[ResourceClaim] = []
    for index, entry in enumerate(pod.resource_claims):
        name = pod.claim_name_for(entry)
        if name is not None:
            found = snapshot_claims.get(f"{pod.namespace}/{name}")
            if found is None:
                raise InvalidInput(f"Pod {pod.key}", f"spec.resourceClaims[{index}]",
                                   f"ResourceClaim {pod.namespace}/{name} does not exist")
            claims.append(found)
            continue
        template = templates.get(f"{pod.namespace}/{entry.resource_claim_template_name}")
        if template is None:
            raise InvalidInput(f"Pod {pod.key}", f"spec.resourceClaims[{index}].resourceClaimTemplateName",
                               f"ResourceClaimTemplate {pod.namespace}/{entry.resource_claim_template_name} "
                               "does not exist")
        meta = ObjectMeta(name=pod.pending_claim_name(entry.name), namespace=pod.namespace,
                          labels=template.claim_meta.labels, annotations=template.claim_meta.annotations)
        claims.append(ResourceClaim(meta=meta, spec=template.spec))
    return tuple(claims)


def members_for(pods: Sequence[Pod], snapshot_claims: Mapping[str, ResourceClaim],
                templates: Mapping[str, ResourceClaimTemplate], nodes: Mapping[str, Node]) -> list[GangMember]:
    """Gang members for pods, honouring `spec.nodeName` and `spec.nodeSelector`."""
    members = []
    for pod in pods:
        allowed: tuple[str, ...] | None = None
        if pod.node_name:
            allowed = (pod.node_name,)
        elif pod.node_selector:
            allowed = tuple(n for n, node in nodes.items()
                            if all(node.labels.get(k) == v for k, v in pod.node_selector.items()))
        members.append(GangMember(pod.key, pod_claims(snapshot_claims, templates, pod), allowed))
    return members
