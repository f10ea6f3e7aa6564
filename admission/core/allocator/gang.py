"""Gang placement: all pods of a group on nodes, one after another, as the scheduler would place them.

A pod goes only on a node that passes the scheduler's node filters for it (`admission.core.nodefit`:
cordon, taints, node selector and affinity, cpu/memory/extended resources and pod count next to the
pods already there and the group's pods placed before it, topology spread and required pod affinity
and anti-affinity, counting the bound pods, the pods planned for admitted groups and the group's pods
placed before it; a member's pod affinity must also hold in every binding order, `binding_order`).
Each pod's claims are allocated together
on its node; a claim shared by several pods is allocated once, by the first pod, and later pods must
land where that allocation is usable. Devices and node resources taken by earlier pods are in use
for later ones. The node search is bounded: nodes are tried in a fixed, sensible order, and a member
that fits nowhere makes the previous member move on, at most `max_backtracks` times in total.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from admission.core.allocator.api import Allocator, Outcome, Status
from admission.core.allocator.binding_order import affinity_order_problem
from admission.core.allocator.explain import Explanation, explain_best
from admission.core.allocator.usage import Usage
from admission.core.errors import InvalidInput
from admission.core.models import AllocationResult, ClaimSpec, Pod, ResourceClaim, ResourceClaimTemplate
from admission.core.models.meta import ObjectMeta
from admission.core.nodefit import (
    EXISTING_ANTI_AFFINITY,
    NODE_NAME_MISMATCH,
    UNSCHEDULABLE,
    NodeFacts,
    NodeFitIndex,
    NodeUsage,
    PodFit,
    resource_reasons,
)
from admission.core.nodefit.extended import (
    EXTENDED_CLAIM_ENTRY,
    NotWholeDevices,
    extended_claim_name,
    extended_requests,
)

DEFAULT_MAX_BACKTRACKS = 16
DEVICES_UNFIT = "cannot allocate all claims"  # the scheduler's DRA filter, in its words


@dataclass(frozen=True, slots=True)
class GangMember:
    """One pod of a group and its claims in `spec.resourceClaims` order (templates already resolved)."""

    key: str
    claims: tuple[ResourceClaim, ...]
    # Nodes this pod may use at most (e.g. its spec.nodeName); None = all nodes.
    nodes: tuple[str, ...] | None = None
    # The pod's side of the scheduler's node filters; None: not checked (cordoned nodes are still skipped).
    fit: PodFit | None = None


@dataclass(frozen=True, slots=True)
class GangPlacement:
    feasible: bool
    placements: Mapping[str, str] = field(default_factory=dict)  # pod key -> node name
    allocations: Mapping[str, AllocationResult] = field(default_factory=dict)  # claim key -> result
    reason: str | None = None
    failed_member: str | None = None
    explanation: Explanation | None = None
    error: bool = False  # the reason is an allocation error (e.g. a CEL error), not a lack of devices
    # The failed member passed the node filters nowhere: no node had room (or the right labels,
    # tolerations) for it, so devices were never the question.
    unschedulable: bool = False
    missing_class: str = ""  # the error is a DeviceClass a request names that does not exist
    # A node's search gave up (draq's budget, or the scheduler's estimated timeout): whether the gang fits
    # is not known, so it is no proof that it never fits. The allocator's message.
    gave_up: str = ""


@dataclass(slots=True)
class _State:
    usage: Usage
    allocations: dict[str, AllocationResult]
    placements: dict[str, str]
    nodes: NodeUsage
    # (claims and requests shape, node) known not to fit. Usage only grows along a branch, so what did
    # not fit stays unfit for every later pod of the same shape: gangs of identical pods skip full nodes.
    unfit: set[tuple[str, str]] = field(default_factory=set)
    # Nodes whose devices are all in use in `usage` (None: not worked out yet).
    full: frozenset[str] | None = None
    # (shape, candidates' key) -> how many of those candidates, from the first, are in `unfit` for the shape:
    # a member of that shape starts after them instead of walking past each (full nodes first, say).
    starts: dict[tuple[str, object], int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Search:
    """What stays fixed while one gang is placed."""

    allocator: Allocator
    index: NodeFitIndex
    dra_extended: bool  # DRAExtendedResource: extended resources a node does not list may come from DRA
    # (pod, resources) -> the claim for those DRA-backed extended resources, or why there can be none
    extended: dict[tuple[str, tuple[str, ...]], ResourceClaim | str] = field(default_factory=dict)
    # The nodes whose fullness is worked out (`_State.full`); None: every node, for a `KnownUnfit` shared
    # with other gangs, which may use other nodes.
    full_among: frozenset[str] | None = None
    # The message of each node search that gave up (shared by the copies `dataclasses.replace` makes).
    gave_up: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Candidates:
    """A member's nodes in the order tried, and why every other node is out whatever is placed."""

    nodes: list[str]
    rejected: Mapping[str, str]  # node -> reason
    key: object  # what decides the candidates in one snapshot
    # Nodes that pass the static filters but where bound pods' required anti-affinity keeps the member out
    # (InterPodAffinity, which the scheduler runs after NodeResourcesFit: a node failing both is counted
    # for its resources).
    anti_affinity: tuple[str, ...] = ()


def place_gang(allocator: Allocator, members: Sequence[GangMember], *,
               promised: Iterable[AllocationResult] = (), usage: Usage | None = None,
               nodes: NodeUsage | None = None, max_backtracks: int = DEFAULT_MAX_BACKTRACKS,
               known: KnownUnfit | None = None) -> GangPlacement:
    """Place every member or say why not. `promised`: devices of admitted-but-unbound groups;
    `nodes`: what pods already take on each node (default: the pods bound in the snapshot).
    `known`: what earlier calls with this very usage, promised devices and node usage found (a cycle
    shares it between groups until an admission changes the usage); read and added to."""
    if known is None:
        return _place_gang(allocator, members, promised, usage, nodes, max_backtracks, KnownUnfit(), shared=False)
    return _place_gang(allocator, members, promised, usage, nodes, max_backtracks, known, shared=True)


@dataclass(slots=True)
class KnownUnfit:
    """For one state of device and node usage: (shape, node) pairs that do not fit, and the nodes whose
    devices are all in use (None: not worked out yet)."""

    pairs: set[tuple[str, str]] = field(default_factory=set)
    full: frozenset[str] | None = None
    # How many candidates, from the first, are in `pairs` (`_State.starts`); kept with `pairs`.
    starts: dict[tuple[str, object], int] = field(default_factory=dict)
    # Groups of one shape that failed (no allocation error): the answer, and the failed member's claims.
    failures: dict[object, tuple[GangPlacement, int, tuple[str, ...]]] = field(default_factory=dict)

    def after_admission(self, full: frozenset[str] | None) -> KnownUnfit:
        """What stays known once an admission added to the device and node usage: what did not fit still does
        not (more in use fits no more), but failures are explained anew. `full`: the nodes now full."""
        return KnownUnfit(self.pairs, full, self.starts)


def _place_gang(allocator: Allocator, members: Sequence[GangMember], promised: Iterable[AllocationResult],
                usage: Usage | None, nodes: NodeUsage | None, max_backtracks: int, known: KnownUnfit, *,
                shared: bool) -> GangPlacement:
    root = _State(Usage(), {}, {}, NodeUsage(), known.pairs, known.full, known.starts)
    shape = gang_shape(allocator, members, nodes)
    seen = known.failures.get(shape) if shape is not None else None
    if seen is not None:
        return _renamed(seen, members)
    try:
        plan = _search_gang(allocator, members, promised, usage, nodes, max_backtracks, root, shared)
    finally:
        known.full = root.full
    if shape is not None and not plan.feasible and not plan.error and plan.failed_member is not None:
        at = next(i for i, m in enumerate(members) if m.key == plan.failed_member)
        explanation = plan.explanation
        if explanation is None or (not explanation.notes and all(r.error is None for r in explanation.requests)):
            known.failures[shape] = (plan, at, tuple(c.key for c in members[at].claims))
    return plan


def gang_shape(allocator: Allocator, members: Sequence[GangMember], nodes: NodeUsage | None = None) -> object | None:
    """What decides where a gang can be placed on `nodes` (default: the snapshot's), names left out: equal for
    gangs that are placed alike. None where more decides it (inter-pod terms, or a member asking for an extended
    resource that DRA devices serve)."""
    index = allocator.snapshot.node_fit
    if allocator.gates.extended_resource and _asks_dra_served(members, index):
        return None
    if _interpod_involved(members, nodes if nodes is not None else index.usage):
        return None
    return _group_shape(allocator, members, index)


def _asks_dra_served(members: Sequence[GangMember], index: NodeFitIndex) -> bool:
    """Whether a member requests a resource some DeviceClass serves (DRAExtendedResource): only then do the
    nodes' allocatable and the claim made for the pod enter its placement."""
    served = index.dra_classes
    return bool(served) and any(m.fit is not None and any(name in served for name in m.fit.requests)
                                for m in members)


def _group_shape(allocator: Allocator, members: Sequence[GangMember], index: NodeFitIndex) -> object:
    """What decides where a group can be placed, names left out: per member, its claims and requests, the
    nodes it may use, what the node filters read of it and the nodes bound pods' anti-affinity keeps it off."""
    return tuple((_shape(allocator, m.claims, m.fit), m.nodes, m.fit.placement_key if m.fit is not None else None,
                  index.anti_affinity_rejected(m.fit) if m.fit is not None else None)
                 for m in members)


def _interpod_involved(members: Sequence[GangMember], nodes: NodeUsage) -> bool:
    """Whether other pods' labels or the members' own decide where members go beyond what `_group_shape`
    holds: a member has inter-pod terms or spread constraints, or a planned pod has anti-affinity terms."""
    return any(m.fit is not None and m.fit.constrained for m in members) or \
        nodes.placed_anti_affinity


def _renamed(seen: tuple[GangPlacement, int, tuple[str, ...]], members: Sequence[GangMember]) -> GangPlacement:
    """The failure of an earlier group of the same shape, in this group's names: the same member (by
    position) fails after as many others were placed, with the same best node and device counts."""
    plan, at, old_claims = seen
    member = members[at]
    new_claims = {old: new.key for old, new in zip(old_claims, member.claims, strict=True)}
    old_prefix = f"pod {plan.failed_member}"
    reason = plan.reason
    if reason is not None and reason.startswith(old_prefix):
        reason = f"pod {member.key}" + reason[len(old_prefix):]
    explanation = plan.explanation
    if explanation is not None:
        explanation = dataclasses.replace(explanation, requests=tuple(
            dataclasses.replace(r, claim=new_claims.get(r.claim, r.claim)) for r in explanation.requests))
    return GangPlacement(False, reason=reason, failed_member=member.key, explanation=explanation,
                    unschedulable=plan.unschedulable)


def _search_gang(allocator: Allocator, members: Sequence[GangMember], promised: Iterable[AllocationResult],
                 usage: Usage | None, nodes: NodeUsage | None, max_backtracks: int, root: _State,
                 shared: bool) -> GangPlacement:
    base = usage or allocator.usage
    promised = tuple(promised)
    if promised:  # otherwise the search only reads `base`: each placement extends a copy
        base = base.copy()
        for allocation in promised:
            base.add(allocation, allocator.gates)
    fit_index = allocator.snapshot.node_fit
    # Without a member asking for a DRA-served resource the gate changes nothing here, and the search keeps
    # its shortcuts (full nodes passed over before any device is looked at).
    search = _Search(allocator, fit_index, allocator.gates.extended_resource and _asks_dra_served(members, fit_index))
    node_names = allocator.node_names
    root.usage, root.nodes = base, nodes if nodes is not None else fit_index.usage
    states = [root]
    cursors = [0]
    backtracks = 0
    candidates_of = [_candidates(search, m, node_names, allocator.gang_candidates) for m in members]
    if not shared:  # only this gang reads which nodes are full: those it may use are enough
        search = dataclasses.replace(search, full_among=frozenset(n for c in candidates_of for n in c.nodes))
    last_failure: Outcome | None = None
    # The failure that got furthest is the one worth reporting.
    deepest: tuple[int, _State, Outcome | None] | None = None
    while len(states) <= len(members):
        index = len(states) - 1
        member, state = members[index], states[-1]
        placed = _place_one(search, member, state, candidates_of[index], cursors[index],
                            last_member=index == len(members) - 1)
        if isinstance(placed, tuple):
            next_state, cursor = placed
            cursors[index] = cursor + 1
            states.append(next_state)
            cursors.append(0)
            continue
        last_failure = placed or last_failure
        if last_failure is not None and last_failure.status is Status.ERROR:
            return GangPlacement(False, reason=last_failure.message, failed_member=member.key, error=True,
                                 missing_class=last_failure.missing_class or "")
        if deepest is None or index >= deepest[0]:
            deepest = (index, state, last_failure)
        if index == 0 or backtracks >= max_backtracks:
            at, at_state, outcome = deepest
            failure = _failure(search, members[at], at_state, candidates_of[at], outcome)
            if search.gave_up:
                return dataclasses.replace(failure, gave_up=search.gave_up[0])
            return failure
        backtracks += 1
        states.pop()
        cursors.pop()
    final = states[-1]
    affinity_problem = affinity_order_problem(search.index, members, final.placements, root.nodes)
    if affinity_problem is not None:
        return GangPlacement(False, dict(final.placements), dict(final.allocations), affinity_problem,
                             unschedulable=True)
    order_problem = _order_dependence(search, members, final, base)
    if order_problem is not None:
        return GangPlacement(False, dict(final.placements), dict(final.allocations), order_problem)
    return GangPlacement(True, dict(final.placements), dict(final.allocations))


def _device_shape(claims: Sequence[ResourceClaim]) -> str:
    """What a member asks of a node's devices: its claims' specs, shared claims by key, and what is
    already allocated. A claim made from a template for the member's pod (not created yet, or owned
    by the pod) is its own: members of one template ask the same."""
    return repr([(c.spec, None if "/" in c.name or _owned_by_pod(c) else c.key, c.allocation) for c in claims])


def _owned_by_pod(claim: ResourceClaim) -> bool:
    controller = claim.meta.controller
    return controller is not None and controller[0] == "Pod"


def _order_dependence(search: _Search, members: Sequence[GangMember], final: _State, base: Usage) -> str | None:
    """Why the plan may not be what the scheduler does, or None.

    The scheduler places members one at a time, first fit, and never revisits earlier pods' devices. In
    which order it takes members sharing a node is not draq's to choose (its queue orders by priority,
    then by when it first saw each pod; released one by one, they may also come in release order). Where
    members on one node ask for different devices, every order they can come in is allocated on that node
    next to what else the plan holds; members asking for the same devices give the same result in any
    order and are not checked."""
    allocator = search.allocator
    by_node: dict[str, list[GangMember]] = {}
    extended_of: dict[str, ResourceClaim | None] = {}
    for member in members:
        node = final.placements[member.key]
        extended_of[member.key] = _node_check(search, member, node, NodeUsage())[1] if search.dra_extended else None
        if member.claims or extended_of[member.key] is not None:
            by_node.setdefault(node, []).append(member)
    for node, placed in by_node.items():
        shapes = [_device_shape([*m.claims, *(c for c in [extended_of[m.key]] if c is not None)]) for m in placed]
        if len(set(shapes)) < 2:
            continue
        own = {c.key for m in placed for c in m.claims if c.allocation is None}
        first_holder = _claim_allocators(members, final)
        local = {key for key in own if first_holder.get(key) == node}
        local.update(f"{m.key}/{EXTENDED_CLAIM_ENTRY}" for m in placed)
        fixed = {key: a for key, a in final.allocations.items() if key not in local}
        orders = _distinct_orders(shapes, MAX_ORDERS_CHECKED + 1)
        if len(orders) > MAX_ORDERS_CHECKED:
            return (f"pods {', '.join(m.key for m in placed)} would share node {node} with different device "
                    f"requests, in more orders than draq checks ({MAX_ORDERS_CHECKED}); the scheduler places "
                    "them one by one in its own order and does not revisit earlier pods' devices")
        for order in orders:
            usage = base.copy()
            for allocation in fixed.values():
                usage.add(allocation, allocator.gates)
            allocations = dict(fixed)
            for at in order:
                member = placed[at]
                claims = [_with_known_allocation(c, allocations) for c in member.claims]
                extended = extended_of[member.key]
                outcome = allocator.allocate(node, claims if extended is None else [*claims, extended], usage)
                if not outcome.allocatable:
                    taken = " then ".join(placed[i].key for i in order)
                    return (f"pod {member.key} may not fit on node {node} if the scheduler takes the pods planned "
                            f"there in the order {taken}: they ask for different devices, and the scheduler "
                            "places pods one by one, first fit, without revisiting earlier pods' devices")
                for key, allocation in outcome.allocations.items():
                    usage.add(allocation, allocator.gates)
                    allocations[key] = allocation
    return None


MAX_ORDERS_CHECKED = 128


def _claim_allocators(members: Sequence[GangMember], final: _State) -> dict[str, str]:
    """Claim key -> the node of the first member (in placement order) that uses it."""
    found: dict[str, str] = {}
    for member in members:
        for claim in member.claims:
            found.setdefault(claim.key, final.placements[member.key])
    return found


def _distinct_orders(shapes: Sequence[str], limit: int) -> list[tuple[int, ...]]:
    """Orders of the positions that differ in their sequence of shapes (pods of one shape are
    interchangeable), at most `limit` of them."""
    orders: list[tuple[int, ...]] = []
    remaining: dict[str, list[int]] = {}
    for at, shape in enumerate(shapes):
        remaining.setdefault(shape, []).append(at)

    def extend(prefix: list[int]) -> None:
        if len(orders) >= limit:
            return
        if len(prefix) == len(shapes):
            orders.append(tuple(prefix))
            return
        for positions in remaining.values():
            if positions:
                at = positions.pop(0)
                extend([*prefix, at])
                positions.insert(0, at)

    extend([])
    return orders


def _candidates(search: _Search, member: GangMember, node_names: list[str],
                static: dict[object, _Candidates]) -> _Candidates:
    """The nodes the member may use by its node name, cordons, taints, selector and affinity, in name order
    (answered once per kind of pod and allocator: `static` is the allocator's `gang_candidates`)."""
    kept_out = search.index.anti_affinity_rejected(member.fit) if member.fit is not None else frozenset()
    key = (member.nodes, member.fit.placement_key if member.fit is not None else None, kept_out)
    found = static.get(key)
    if found is not None:
        return found
    if member.fit is not None:
        passing, filtered = search.index.static_filter(member.fit)
    else:
        passing = tuple(n for n in node_names if not search.index.nodes[n].unschedulable)
        filtered = {n: UNSCHEDULABLE for n in node_names if search.index.nodes[n].unschedulable}
    if member.nodes is None:
        rejected: Mapping[str, str] = filtered
    else:
        allowed = set(member.nodes)
        rejected = {n: NODE_NAME_MISMATCH for n in node_names if n not in allowed}
        rejected.update((n, reason) for n, reason in filtered.items() if n in allowed)
        passing = tuple(n for n in passing if n in allowed)
    found = _Candidates([n for n in passing if n not in kept_out], rejected, key,
                        tuple(n for n in passing if n in kept_out))
    static[key] = found
    return found


def _node_check(search: _Search, member: GangMember, node: str,
                usage: NodeUsage) -> tuple[tuple[str, ...], ResourceClaim | None]:
    """Why the member does not fit the node next to what is on it now (resources; empty: it fits), and the
    claim for the extended resources this node would serve from DRA devices (DRAExtendedResource)."""
    fit = member.fit
    if fit is None:
        return (), None
    facts = search.index.nodes[node]
    delegated = search.index.dra_served(fit, facts) if search.dra_extended else ()
    used = usage.on(node)
    if not delegated:
        return _resource_reasons(search.allocator.node_reasons, fit, facts, node, used), None
    reasons = tuple(resource_reasons(fit, facts, used, delegated))
    extended = _extended_claim(search, fit, delegated)
    if isinstance(extended, str):
        return (*reasons, extended), None
    return reasons, extended


def _resource_reasons(memo: dict[tuple[str, object], tuple[object, tuple[str, ...]]], fit: PodFit,
                      facts: NodeFacts, node: str, used: Mapping[str, int]) -> tuple[str, ...]:
    """`resource_reasons` without DRA-served resources, kept per node and requests while the node's use is
    the same mapping (`NodeUsage` hands on an unchanged node's mapping as it is): the groups that fail in
    one cycle are tallied again only on the nodes that changed."""
    key = (node, fit.ordered)
    known = memo.get(key)
    if known is not None and known[0] is used:
        return known[1]
    reasons = tuple(resource_reasons(fit, facts, used))
    memo[key] = (used, reasons)
    return reasons


def _extended_claim(search: _Search, fit: PodFit, resources: tuple[str, ...]) -> ResourceClaim | str:
    """The claim the scheduler makes for the pod's extended resources that DRA devices serve on a node
    (named `<pod>/#extended-resources` until it exists), or why it cannot be made."""
    key = (fit.key, resources)
    found = search.extended.get(key)
    if found is None:
        namespace, _, name = fit.key.partition("/")
        try:
            requests = extended_requests(fit.containers, search.index.dra_classes.get, only=resources,
                                         first_index=fit.init_containers)
        except NotWholeDevices as err:
            found = str(err)
        else:
            unmapped = sorted(set(resources) - {resource for resource, _ in requests})
            if unmapped:  # asked for by init containers only
                found = (f"{', '.join(unmapped)} of init containers would come from DRA devices, which "
                         "draq does not map")
            else:
                found = ResourceClaim(meta=ObjectMeta(name=extended_claim_name(name), namespace=namespace),
                                      spec=ClaimSpec(tuple(request for _, request in requests)))
        search.extended[key] = found
    return found


def _place_one(search: _Search, member: GangMember, state: _State, candidates: _Candidates,
               start: int, *, last_member: bool) -> tuple[_State, int] | Outcome | None:
    """The first node from `start` on where the member fits, with the new state; else the last failure.
    After the last member only the placements and allocations are read: its state's usage is not extended."""
    allocator = search.allocator
    claims = [_with_known_allocation(c, state.allocations) for c in member.claims]
    shape = _shape(allocator, claims, member.fit)
    last: Outcome | None = None
    # Nodes with every device in use are passed over where the allocator would answer "does not fit"
    # there before looking at any device (it says when: `fails_on_full_nodes`).
    full: frozenset[str] = frozenset()
    asked = search.dra_extended  # whether `full` is settled (asked once the claims were checked)
    # What it rejects is not added to `unfit`: more pods placed may meet a pod affinity term.
    interpod = search.index.interpod_check(member.fit, state.nodes) if member.fit is not None else None
    nodes, unfit = candidates.nodes, state.unfit
    # The candidates before `first` are all in `unfit` for the shape: nothing to do there.
    start_key = (shape, candidates.key)
    first = state.starts.get(start_key, 0)
    for position in range(max(start, first), len(nodes)):
        node = nodes[position]
        if (shape, node) not in unfit:
            if not asked and last is not None:
                asked = True
                if allocator.fails_on_full_nodes(claims):
                    if state.full is None:
                        state.full = frozenset(allocator.full_nodes(state.usage, search.full_among))
                    full = state.full
            if node in full:
                unfit.add((shape, node))
            else:
                placed = _try_node(search, member, state, claims, shape, node, interpod, last_member)
                if isinstance(placed, _State):
                    state.starts[start_key] = first
                    return placed, position
                if placed is not None:
                    last = placed
                    if placed.status is Status.ERROR:  # a hard error fails on every node alike
                        state.starts[start_key] = first
                        return placed
        if first == position and (shape, node) in unfit:
            first = position + 1
    state.starts[start_key] = first
    return last


def _try_node(search: _Search, member: GangMember, state: _State, claims: list[ResourceClaim], shape: str,
              node: str, interpod: Callable[[str], str | None] | None, last_member: bool) -> _State | Outcome | None:
    """The state with the member placed on the node; else the allocator's failure there, or None where the
    node filters keep the member out."""
    allocator = search.allocator
    reasons, extended = _node_check(search, member, node, state.nodes)
    if reasons:
        state.unfit.add((shape, node))
        return None
    if interpod is not None and interpod(node) is not None:
        return None
    outcome = allocator.allocate(node, claims if extended is None else [*claims, extended], state.usage)
    if outcome.status in (Status.UNFIT, Status.NODE_ERROR) and not outcome.gave_up:
        state.unfit.add((shape, node))
    if outcome.gave_up:
        search.gave_up.append(f"node {node}: {outcome.message}")
    if not outcome.allocatable:
        return outcome
    allocations = {**state.allocations, **outcome.allocations}
    placements = {**state.placements, member.key: node}
    if last_member:
        return _State(state.usage, allocations, placements, state.nodes, state.unfit, state.full, state.starts)
    usage = state.usage.copy()
    for allocation in outcome.allocations.values():
        usage.add(allocation, allocator.gates)
    nodes = state.nodes if member.fit is None else \
        state.nodes.plus(node, member.fit.requests, member.fit.placed_on(node))
    child_full, unfit = state.full, set(state.unfit)
    if allocator.full_nodes(usage, (node,)):
        if child_full is not None and node not in child_full:
            child_full = child_full | {node}
        if extended is None and allocator.fails_on_full_nodes(claims):
            # The member took the node's last devices: the next member of its shape would try it in vain.
            unfit.add((shape, node))
    return _State(usage, allocations, placements, nodes, unfit, child_full, dict(state.starts))


def _shape(allocator: Allocator, claims: Sequence[ResourceClaim], fit: PodFit | None) -> str:
    """What a member asks of a node: its claims' specs, allocated claims by key and allocation, and its
    requests (NUL never occurs in a repr, so the parts cannot run into each other)."""
    parts = [allocator.described(fit.ordered) if fit is not None else ""]
    for claim in claims:
        allocation = claim.allocation
        parts.append(allocator.described(claim.spec))
        parts.append("" if allocation is None else f"{claim.key}\0{allocator.described(allocation)}")
    return "\0".join(parts)


def _with_known_allocation(claim: ResourceClaim, allocations: Mapping[str, AllocationResult]) -> ResourceClaim:
    found = allocations.get(claim.key)
    return claim if found is None else dataclasses.replace(claim, allocation=found)


def _failure(search: _Search, member: GangMember, state: _State, candidates: _Candidates,
             last: Outcome | None) -> GangPlacement:
    """Why the member fits nowhere in `state`: per node, the first node filter that fails, else its devices."""
    allocator = search.allocator
    claims = [_with_known_allocation(c, state.allocations) for c in member.claims]
    tally: Counter[str] = Counter(candidates.rejected.values())
    device_nodes = []
    extended: ResourceClaim | None = None
    interpod = search.index.interpod_rejected(member.fit, state.nodes, [*candidates.anti_affinity, *candidates.nodes]) \
        if member.fit is not None else {}
    for node in candidates.anti_affinity:
        reasons, _ = _node_check(search, member, node, state.nodes)
        tally.update(reasons or [interpod.get(node, EXISTING_ANTI_AFFINITY)])
    for node in candidates.nodes:
        reasons, node_extended = _node_check(search, member, node, state.nodes)
        if not reasons:
            kept_out = interpod.get(node)
            if kept_out is None:
                device_nodes.append(node)
                extended = extended or node_extended
                continue
            reasons = (kept_out,)
        tally.update(reasons)
    # A node whose devices are all in use comes no closer than any other node, so when some nodes have
    # a free device, the best node is one of them.
    with_free = [n for n in device_nodes if n not in state.full] if state.full is not None else device_nodes
    best = explain_best(allocator, with_free or device_nodes, claims if extended is None else [*claims, extended],
                        state.usage)
    placed = len(state.placements)
    unschedulable = not device_nodes and bool(tally)
    if not allocator.snapshot.nodes:
        reason = f"pod {member.key}: no node to try"
    elif device_nodes and last is not None and last.missing_class:
        reason = f"pod {member.key}: device class {last.missing_class} does not exist"
    else:
        reason = f"pod {member.key} fits on no node after placing {placed} other pod(s) of the group"
        if tally:
            if device_nodes:
                tally[DEVICES_UNFIT] += len(device_nodes)
            reason += f": {nodes_available(len(allocator.snapshot.nodes), tally)}"
        if best:
            reason += f"; best node {best.node}"
    return GangPlacement(False, dict(state.placements), dict(state.allocations), reason, member.key, best,
                    unschedulable=unschedulable)


def nodes_available(total: int, tally: Mapping[str, int]) -> str:
    """`0/4 nodes are available: 1 Insufficient cpu, 3 node(s) had untolerated taint {gpu: true}`: the
    scheduler's summary, a node counted once per reason it fails."""
    return f"0/{total} nodes are available: " + ", ".join(sorted(f"{n} {reason}" for reason, n in tally.items()))


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
                templates: Mapping[str, ResourceClaimTemplate]) -> list[GangMember]:
    """Gang members for pods, with what the node filters need of each (`PodFit`). A pod that names its
    node in `spec.nodeName` is not scheduled: it stays on that node, unfiltered (its requests are
    already counted there when the snapshot holds it)."""
    members = []
    for pod in pods:
        claims = pod_claims(snapshot_claims, templates, pod)
        if pod.node_name:
            members.append(GangMember(pod.key, claims, (pod.node_name,)))
        else:
            members.append(GangMember(pod.key, claims, fit=PodFit.of(pod)))
    return members
