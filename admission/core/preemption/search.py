"""Victim selection: which admitted groups to evict so that a pending group both fits its quota and can
be placed on the nodes.

Pure. Candidates are whole admitted groups that the preemptor's ClusterQueue policies allow (see
`may_preempt`), in order of preference: lower priority first, then (for reclaim) the queue with the
highest fair share, then the most recently admitted, then the fewest devices. A set of victims is
tried by taking their devices, node resources and charge out of the cycle's snapshot and running the
same gang placement and charging the admission cycle runs.

The search is node-aware. Nodes holding candidates are ranked by the least preferred victim that
freeing them takes (then by how many victims and devices); the smallest prefix of that ranking whose
victims make the group placeable is found by bisection. Victims elsewhere are added, in preference
order, only if the quota still does not fit. The set is then shrunk: a victim is dropped when the
group still fits without it (victims on nodes the placement does not use are dropped by the quota
check alone; the others only when their node would still have enough free devices, then checked by
placing the group again). The result is checked once more in full; if nothing fits with every allowed
candidate evicted, nothing is evicted and the reason says why.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from admission.core.allocator import Allocator, GangMember, GangPlan, Usage, place_gang
from admission.core.nodefit import NodeUsage
from admission.core.preemption.holdings import Holding, without_devices, without_pods
from admission.core.quota import ChargeResult, Plan, QueueState, Unchargeable
from admission.core.quota.fairshare import dominant_share
from admission.core.quota.policies import BorrowWithinCohort, Reclaim, WithinQueue


@dataclass(frozen=True, slots=True)
class Preemptor:
    group: str
    cluster_queue: str
    priority: int


@dataclass(frozen=True, slots=True)
class Victims:
    """Evict `victims` (group keys, most preferred first); the group would then go to `placements`."""

    group: str
    cluster_queue: str
    victims: tuple[str, ...]
    placements: Mapping[str, str]
    placed_tries: int = 0  # gang placements run by the search


@dataclass(frozen=True, slots=True)
class NoVictims:
    group: str
    cluster_queue: str
    reason: str
    placed_tries: int = 0


Charger = Callable[[Plan], ChargeResult]  # the group's charge for a placement (raises Unchargeable)


@dataclass(frozen=True, slots=True)
class SearchInput:
    """What the cycle knew when the group waited: devices and node resources in use (with its own
    admissions), the accounting, and how to place and charge the group."""

    allocator: Allocator
    members: Sequence[GangMember]
    charge: Charger
    usage: Usage
    nodes: NodeUsage
    state: QueueState
    now: dt.datetime | None = None


# ----- policies --------------------------------------------------------------------------------------
def borrows(state: QueueState, queue: str) -> bool:
    return any(amount > 0 for _, amount in state.borrowed(queue))


def may_preempt(preemptor: Preemptor, victim: Holding, state: QueueState, now: dt.datetime | None) -> str:
    """"" when the preemptor's ClusterQueue policies allow evicting `victim`; otherwise why not."""
    if victim.group == preemptor.group:
        return "itself"
    queue = state.queues.get(preemptor.cluster_queue)
    victim_queue = state.queues.get(victim.cluster_queue)
    if queue is None or victim_queue is None:
        return "unknown ClusterQueue"
    minimum = victim_queue.preemption.minimum_run_seconds
    if minimum:
        if now is None or victim.admitted_at is None:
            return "admission time unknown"
        if (now - victim.admitted_at).total_seconds() < minimum:
            return f"admitted less than {minimum}s ago"
    policy = queue.preemption
    if victim.cluster_queue == preemptor.cluster_queue:
        if policy.within_cluster_queue is WithinQueue.NEVER:
            return "withinClusterQueue is Never"
        return "" if victim.priority < preemptor.priority else "not of lower priority"
    if queue.cohort is None or victim_queue.cohort != queue.cohort:
        return "in another cohort"
    if policy.reclaim_within_cohort is Reclaim.NEVER:
        return "reclaimWithinCohort is Never"
    if not borrows(state, victim.cluster_queue):
        return f"ClusterQueue {victim.cluster_queue} does not borrow"
    if policy.reclaim_within_cohort is Reclaim.LOWER_PRIORITY and victim.priority >= preemptor.priority:
        return "not of lower priority"
    return ""


def candidates(preemptor: Preemptor, held: Iterable[Holding], state: QueueState,
               now: dt.datetime | None) -> tuple[Holding, ...]:
    """The groups the policies allow evicting, most preferred first."""
    allowed = [h for h in held if not may_preempt(preemptor, h, state, now)]
    shares = {q: dominant_share(state, q) for q in {h.cluster_queue for h in allowed}}

    def preference(h: Holding) -> tuple[object, ...]:
        flag, share = shares[h.cluster_queue]
        admitted = h.admitted_at.timestamp() if h.admitted_at is not None else 0.0
        return h.priority, -flag, -share, -admitted, h.devices, h.group

    return tuple(sorted(allowed, key=preference))


# ----- search ----------------------------------------------------------------------------------------
class _Trials:
    """Evaluates victim sets; counts gang placements."""

    def __init__(self, preemptor: Preemptor, data: SearchInput) -> None:
        self.preemptor = preemptor
        self.data = data
        self.placed = 0

    def place(self, victims: Sequence[Holding]) -> GangPlan:
        self.placed += 1
        data = self.data
        usage = without_devices(data.usage, victims, data.allocator.gates)
        return place_gang(data.allocator, data.members, usage=usage, nodes=without_pods(data.nodes, victims))

    def charge(self, placed: GangPlan) -> ChargeResult | None:
        try:
            return self.data.charge(Plan(dict(placed.placements), dict(placed.allocations)))
        except Unchargeable:
            return None

    def quota_fits(self, victims: Sequence[Holding], charged: ChargeResult) -> str:
        """"" when the charge fits with the victims' charges released and the borrowing policy holds."""
        state = self.data.state
        for victim in victims:
            if victim.group in state.admissions:
                state = state.evict(victim.group)
        queue = self.preemptor.cluster_queue
        fit = state.fits(queue, charged.total)
        if not fit.ok:
            return fit.reason
        if any(amount > 0 for _, amount in fit.borrowed):
            policy = state.queue(queue).preemption.borrow_within_cohort
            if policy is BorrowWithinCohort.NEVER and victims:
                return f"it would borrow from the cohort and ClusterQueue {queue} has borrowWithinCohort Never"
            if any(v.cluster_queue != queue or v.priority >= self.preemptor.priority for v in victims):
                return "it would borrow from the cohort: then only lower-priority groups of its own queue are evicted"
        return ""

    def fits(self, victims: Sequence[Holding]) -> tuple[str, GangPlan | None]:
        placed = self.place(victims)
        if not placed.feasible:
            return placed.reason or "it cannot be placed", None
        charged = self.charge(placed)
        if charged is None:
            return "its charge cannot be computed", None
        why = self.quota_fits(victims, charged)
        return why, (placed if not why else None)


def find_victims(preemptor: Preemptor, allowed: Sequence[Holding], data: SearchInput) -> Victims | NoVictims:
    """A small set of `allowed` (in preference order, see `candidates`) whose eviction admits the group."""
    trials = _Trials(preemptor, data)
    if not allowed:
        return NoVictims(preemptor.group, preemptor.cluster_queue,
                         "no admitted group may be preempted for it under its ClusterQueue's policies")
    why, placed = trials.fits(allowed)
    if placed is None and _borrowing_allows_own_lower(preemptor, data.state):
        # Borrowing while preempting evicts only lower-priority groups of its own queue: try those alone.
        own = [h for h in allowed if h.cluster_queue == preemptor.cluster_queue and h.priority < preemptor.priority]
        if own and len(own) < len(allowed):
            _, placed = trials.fits(own)
            if placed is not None:
                allowed = own
    if placed is None:
        return NoVictims(preemptor.group, preemptor.cluster_queue,
                         f"even evicting all {len(allowed)} group(s) its policies allow would not admit it: {why}",
                         trials.placed)
    chosen = list(allowed)
    by_nodes = _by_nodes(allowed, trials)
    if by_nodes is not None:
        _, placed_now = trials.fits(by_nodes)
        if placed_now is not None:
            chosen, placed = by_nodes, placed_now
    chosen, placed = _shrink(chosen, placed, trials)
    return Victims(preemptor.group, preemptor.cluster_queue, tuple(v.group for v in chosen),
                   dict(placed.placements), trials.placed)


def _borrowing_allows_own_lower(preemptor: Preemptor, state: QueueState) -> bool:
    queue = state.queues.get(preemptor.cluster_queue)
    return queue is not None and queue.preemption.borrow_within_cohort is BorrowWithinCohort.LOWER_PRIORITY


def _by_nodes(allowed: Sequence[Holding], trials: _Trials) -> list[Holding] | None:
    """Victims on the fewest, cheapest nodes that make the group placeable, plus victims elsewhere in
    preference order until its quota fits; None when no prefix does."""
    rank = {h.group: i for i, h in enumerate(allowed)}
    on_node: dict[str, list[Holding]] = {}
    for holding in allowed:
        for node in holding.nodes:
            on_node.setdefault(node, []).append(holding)
    ranked = sorted(on_node, key=lambda n: (max(rank[h.group] for h in on_node[n]), len(on_node[n]),
                                            sum(h.devices for h in on_node[n]), n))

    def prefix(k: int) -> list[Holding]:
        seen: dict[str, Holding] = {}
        for node in ranked[:k]:
            for holding in on_node[node]:
                seen.setdefault(holding.group, holding)
        return sorted(seen.values(), key=lambda h: rank[h.group])

    low, high = 0, len(ranked)
    best: GangPlan | None = None
    while low < high:
        middle = (low + high) // 2
        placed = trials.place(prefix(middle))
        if placed.feasible:
            high, best = middle, placed
        else:
            low = middle + 1
    if best is None:
        best = trials.place(prefix(high))
        if not best.feasible:
            return None
    chosen = prefix(high)
    charged = trials.charge(best)
    if charged is None:
        return None
    names = {h.group for h in chosen}
    for holding in allowed:
        if not trials.quota_fits(chosen, charged):
            break
        if holding.group not in names:
            chosen.append(holding)
            names.add(holding.group)
    return sorted(chosen, key=lambda h: rank[h.group]) if not trials.quota_fits(chosen, charged) else None


def _shrink(chosen: list[Holding], placed: GangPlan, trials: _Trials) -> tuple[list[Holding], GangPlan]:
    """Drop victims the group does not need, least preferred first; the result is checked in full."""
    used_nodes = set(placed.placements.values())
    charged = trials.charge(placed)
    assert charged is not None
    needed = _devices_needed(placed, trials.data.allocator, used_nodes)
    kept = list(chosen)
    for victim in reversed(chosen):
        rest = [h for h in kept if h.group != victim.group]
        if victim.nodes & used_nodes:
            if not _may_have_room(victim, rest, needed, trials):
                continue
            _, again = trials.fits(rest)
            if again is None:
                continue
            kept, placed = rest, again
            used_nodes = set(placed.placements.values())
            needed = _devices_needed(placed, trials.data.allocator, used_nodes)
            charged = trials.charge(placed) or charged
        elif not trials.quota_fits(rest, charged):
            kept = rest
    if kept != chosen:
        _, final = trials.fits(kept)
        if final is None:
            return chosen, placed
        placed = final
    return kept, placed


def _devices_needed(placed: GangPlan, allocator: Allocator, nodes: set[str]) -> dict[str, int]:
    """How many devices the placement takes on each of its nodes."""
    device_node = {d.id: node for node in nodes for d in allocator.view(node).devices}
    needed: dict[str, int] = {}
    for allocation in placed.allocations.values():
        for result in allocation.results:
            node = device_node.get(result.device_id)
            if node is not None:
                needed[node] = needed.get(node, 0) + 1
    return needed


def _may_have_room(victim: Holding, rest: Sequence[Holding], needed: Mapping[str, int], trials: _Trials) -> bool:
    """Whether each node of the placement the victim is on would keep enough free devices without
    evicting it (a cheap test before placing again)."""
    data = trials.data
    usage = without_devices(data.usage, rest, data.allocator.gates)
    for node, count in needed.items():
        if node not in victim.nodes:
            continue
        free = sum(1 for d in data.allocator.view(node).devices if not usage.is_allocated(d.id))
        if free < count:
            return False
    return True
