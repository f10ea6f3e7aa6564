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
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from admission.core.allocator import Allocator, GangMember, GangPlacement, Usage, place_gang
from admission.core.cycle.preemption.holdings import Holding, without_devices, without_pods
from admission.core.models import EXACT_COUNT
from admission.core.nodefit import NodeUsage
from admission.core.quota import Admission, ChargeResult, Placement, QueueState, Unchargeable
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
    domain: str = ""  # the topology domain all victims are in (`rack r3`), for a group that requires one


@dataclass(frozen=True, slots=True)
class NoVictims:
    group: str
    cluster_queue: str
    reason: str
    placed_tries: int = 0


Charger = Callable[[Placement], ChargeResult]  # the group's charge for a placement (raises Unchargeable)
PodRequests = tuple[tuple[str, Mapping[str, int]], ...]  # (node, what the pod takes there) per member of a victim


@dataclass(slots=True)
class SearchMemo:
    """What the searches for one group share (one per domain for a group that requires one): each device's
    node, and per candidate its devices per node and its members' requests; worked out when first asked."""

    device_node: dict[str, str] | None = None
    devices_by_node: dict[str, dict[str, int]] = field(default_factory=dict)
    requests: dict[str, PodRequests] = field(default_factory=dict)
    # Node-local devices free per node, for a device usage (kept beside it so that its id stays its own).
    free: dict[int, tuple[Usage, dict[str, int]]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DeviceScope:
    """The devices on the nodes the members may use, and their pools ("driver/pool"): all a placement there
    reads of the device usage (`Usage.within`)."""

    devices: frozenset[str]
    pools: frozenset[str]


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
    scope: DeviceScope | None = None  # set where the members are kept to some nodes (one domain)
    memo: SearchMemo = field(default_factory=SearchMemo, compare=False, repr=False)


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
    # Shares as floats: the order is the same, and comparing thousands of equal fractions is slow.
    shares = {q: (-flag, -float(share)) for q in {h.cluster_queue for h in allowed}
              for flag, share in (dominant_share(state, q),)}

    def preference(h: Holding) -> tuple[object, ...]:
        admitted = h.admitted_at.timestamp() if h.admitted_at is not None else 0.0
        return h.priority, shares[h.cluster_queue], -admitted, h.devices, h.group

    return tuple(sorted(allowed, key=preference))


# ----- search ----------------------------------------------------------------------------------------
class _Trials:
    """Evaluates victim sets; counts gang placements."""

    def __init__(self, preemptor: Preemptor, data: SearchInput, allowed: Iterable[Holding]) -> None:
        self.preemptor = preemptor
        self.data = data
        self.memo = data.memo
        self.placed = 0
        self.accounting = _accounting(data.state, allowed)
        self._charges: dict[int, tuple[GangPlacement, ChargeResult | None]] = {}
        self._charged: dict[tuple[tuple[str, str], ...], tuple[GangPlacement, ChargeResult | None]] = {}
        self._placing_usage: Usage | None = None
        self._released: tuple[frozenset[str], QueueState] | None = None

    @property
    def placing_usage(self) -> Usage:
        """The device usage the group is placed next to: cut down to the devices of the scope, where there is
        one (each member placed copies it; victims' devices outside it were not in it either)."""
        if self._placing_usage is None:
            scope, usage = self.data.scope, self.data.usage
            self._placing_usage = usage if scope is None else usage.within(scope.devices, scope.pools)
        return self._placing_usage

    @property
    def device_node(self) -> Mapping[str, str]:
        """Each device's node (node-local devices only)."""
        memo = self.memo
        if memo.device_node is None:
            allocator = self.data.allocator
            memo.device_node = {d.id: node for node in allocator.snapshot.nodes for d in allocator.view(node).devices}
        return memo.device_node

    def place(self, victims: Sequence[Holding], roomy: bool = False) -> GangPlacement:
        """The group placed with `victims` evicted. `roomy`: first try only the nodes that would have
        room for a member's devices (members without devices go anywhere); then all nodes."""
        data = self.data
        usage = without_devices(self.placing_usage, victims, data.allocator.gates)
        nodes = without_pods(data.nodes, victims, self.requests)
        if roomy:
            room = self.free_devices(victims)
            roomy_nodes: dict[tuple[tuple[str, ...] | None, int], tuple[str, ...]] = {}  # members alike ask alike
            members = []
            for member in data.members:
                least = _least_devices(member)
                if least:
                    key = (member.nodes, least)
                    if key not in roomy_nodes:
                        roomy_nodes[key] = tuple(sorted(n for n in (member.nodes or room) if room.get(n, 0) >= least))
                    member = replace(member, nodes=roomy_nodes[key])
                members.append(member)
            self.placed += 1
            placed = place_gang(data.allocator, members, usage=usage, nodes=nodes)
            if placed.feasible:
                return placed
        self.placed += 1
        return place_gang(data.allocator, data.members, usage=usage, nodes=nodes)

    def free_devices(self, victims: Iterable[Holding]) -> dict[str, int]:
        """Node-local devices free on each node with `victims` evicted."""
        usage = self.data.usage
        known = self.memo.free.get(id(usage))
        if known is None or known[0] is not usage:
            now: dict[str, int] = {}
            for device_id, node in self.device_node.items():
                if not usage.is_allocated(device_id):
                    now[node] = now.get(node, 0) + 1
            known = self.memo.free[id(usage)] = (usage, now)
        free = dict(known[1])
        memo = self.memo.devices_by_node
        for victim in victims:
            for node, count in (memo.get(victim.group) or self.devices_by_node(victim)).items():
                free[node] = free.get(node, 0) + count
        return free

    def devices_by_node(self, victim: Holding) -> Mapping[str, int]:
        found = self.memo.devices_by_node.get(victim.group)
        if found is None:
            found = {}
            device_node = self.device_node
            for allocation in victim.allocations:
                for result in allocation.results:
                    node = device_node.get(result.device_id)
                    if node is not None:
                        found[node] = found.get(node, 0) + 1
            self.memo.devices_by_node[victim.group] = found
        return found

    def requests(self, victim: Holding) -> PodRequests:
        found = self.memo.requests.get(victim.group)
        if found is None:
            found = self.memo.requests[victim.group] = victim.requests()
        return found

    def charge(self, placed: GangPlacement) -> ChargeResult | None:
        """The group's charge for a placement (None: it cannot be charged); worked out once per placement, and
        once for equal placements (the last check in full often places the group as the search did)."""
        known = self._charges.get(id(placed))
        if known is not None and known[0] is placed:
            return known[1]
        nodes = tuple(sorted(placed.placements.items()))
        alike = self._charged.get(nodes)
        if alike is not None and alike[0].allocations == placed.allocations:
            charged = alike[1]
        else:
            try:
                placement = Placement(dict(placed.placements), dict(placed.allocations))
                charged = self.data.charge(placement)
            except Unchargeable:
                charged = None
            self._charged[nodes] = (placed, charged)
        self._charges[id(placed)] = (placed, charged)
        return charged

    def released(self, victims: Iterable[Holding]) -> QueueState:
        """The accounting with the victims' charges released (the last answer kept, see `keep_released`)."""
        names = frozenset(v.group for v in victims)
        if self._released is None or self._released[0] != names:
            self._released = (names, self.accounting.evict_all(names))
        return self._released[1]

    def keep_released(self, victims: Iterable[Holding], state: QueueState) -> None:
        """`state` is `released(victims)`, worked out by the caller one victim at a time: the victims found are
        released again when they are shrunk, and those kept when they are checked in full."""
        self._released = (frozenset(v.group for v in victims), state)

    def quota_fits(self, victims: Sequence[Holding], charged: ChargeResult, released: QueueState | None = None) -> str:
        """"" when the charge fits with the victims' charges released and the borrowing policy holds.
        `released`: `self.released(victims)`, when the caller keeps it."""
        state = released if released is not None else self.released(victims)
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

    def fits(self, victims: Sequence[Holding], released: QueueState | None = None) -> tuple[str, GangPlacement | None]:
        placed = self.place(victims)
        if not placed.feasible:
            return placed.reason or "it cannot be placed", None
        charged = self.charge(placed)
        if charged is None:
            return "its charge cannot be computed", None
        why = self.quota_fits(victims, charged, released)
        return why, (placed if not why else None)


def find_victims(preemptor: Preemptor, allowed: Sequence[Holding], data: SearchInput) -> Victims | NoVictims:
    """A small set of `allowed` (in preference order, see `candidates`) whose eviction admits the group."""
    found = draft_victims(preemptor, allowed, data)
    return found if isinstance(found, NoVictims) else found.settle()


@dataclass(frozen=True, slots=True)
class Draft:
    """Victims found before their last check in full: `kept`, what is left of `chosen` once the victims the
    group does not need were dropped, the group placed at `placed`. `settle` runs the check: `kept` if the
    group is still placed and fits with them alone, else `chosen` (a superset: never fewer victims, nor
    lower priorities, than `kept`)."""

    chosen: tuple[Holding, ...]
    kept: tuple[Holding, ...]
    placed: GangPlacement
    trials: _Trials

    def settle(self) -> Victims:
        victims, placed = _checked(list(self.chosen), list(self.kept), self.placed, self.trials)
        trials = self.trials
        return Victims(trials.preemptor.group, trials.preemptor.cluster_queue, tuple(v.group for v in victims),
                       dict(placed.placements), trials.placed)


def draft_victims(preemptor: Preemptor, allowed: Sequence[Holding], data: SearchInput) -> Draft | NoVictims:
    """`find_victims` up to its last check (see `Draft.settle`)."""
    trials = _Trials(preemptor, data, allowed)
    if not allowed:
        return NoVictims(preemptor.group, preemptor.cluster_queue,
                         "no admitted group may be preempted for it under its ClusterQueue's policies")
    found = _by_nodes(allowed, trials)
    if found is None:
        why, placed = trials.fits(allowed)
        if placed is None and _borrowing_allows_own_lower(preemptor, data.state):
            # Borrowing while preempting evicts only lower-priority groups of its own queue: try those alone.
            own = [h for h in allowed
                   if h.cluster_queue == preemptor.cluster_queue and h.priority < preemptor.priority]
            if own and len(own) < len(allowed):
                _, placed = trials.fits(own)
                if placed is not None:
                    allowed = own
        if placed is None:
            return NoVictims(preemptor.group, preemptor.cluster_queue,
                             f"even evicting all {len(allowed)} group(s) its policies allow would not admit it: "
                             f"{why}", trials.placed)
        found = list(allowed), placed
    chosen, placed = found
    kept, placed = _shrink(chosen, placed, trials)
    return Draft(tuple(chosen), tuple(kept), placed, trials)


def _accounting(state: QueueState, allowed: Iterable[Holding]) -> QueueState:
    """The accounting with the candidates' admissions only: the same usage, and so the same answers to the quota
    checks, which read the usage alone. Releasing or restoring a victim copies the admissions each time: a few
    hundred here, not every admitted group's."""
    admissions = state.admissions
    return replace(state, admissions=MappingProxyType({h.group: admissions[h.group] for h in allowed
                                                        if h.group in admissions}))


def _borrowing_allows_own_lower(preemptor: Preemptor, state: QueueState) -> bool:
    queue = state.queues.get(preemptor.cluster_queue)
    return queue is not None and queue.preemption.borrow_within_cohort is BorrowWithinCohort.LOWER_PRIORITY


def _by_nodes(allowed: Sequence[Holding], trials: _Trials) -> tuple[list[Holding], GangPlacement] | None:
    """Victims on the fewest, cheapest nodes that make the group placeable, plus victims elsewhere in
    preference order until its quota fits, and the group's placement then; None when no prefix does."""
    rank = {h.group: i for i, h in enumerate(allowed)}
    on_node: dict[str, list[Holding]] = {}
    for holding in allowed:
        for node in holding.nodes:
            on_node.setdefault(node, []).append(holding)
    # Each node's holdings are in preference order, so its least preferred is its last.
    ranked = sorted(on_node, key=lambda n: (rank[on_node[n][-1].group], len(on_node[n]),
                                            sum([h.devices for h in on_node[n]]), n))

    def prefix(k: int) -> list[Holding]:
        seen: dict[int, Holding] = {}
        for node in ranked[:k]:
            for holding in on_node[node]:
                seen[rank[holding.group]] = holding
        return [seen[i] for i in sorted(seen)]

    # Fewer nodes than this cannot give the members their devices: start there, then gallop and bisect.
    low = _fewest_nodes(ranked, on_node, allowed, trials)
    if low is None:
        return None
    high, best = low, trials.place(prefix(low), roomy=True)
    step = 1
    while not best.feasible:
        if high >= len(ranked):
            return None
        low = high + 1
        high = min(len(ranked), high + step)
        step *= 2
        best = trials.place(prefix(high), roomy=True)
    while low < high:
        middle = (low + high) // 2
        placed = trials.place(prefix(middle), roomy=True)
        if placed.feasible:
            high, best = middle, placed
        else:
            low = middle + 1
    chosen = prefix(high)
    charged = trials.charge(best)
    if charged is None:
        return None
    names = {h.group for h in chosen}
    released = trials.released(chosen)
    for holding in allowed:
        if not trials.quota_fits(chosen, charged, released):
            break
        if holding.group not in names:
            chosen.append(holding)
            names.add(holding.group)
            released = released.evict_all((holding.group,))
    if trials.quota_fits(chosen, charged, released):
        return None
    trials.keep_released(chosen, released)
    return sorted(chosen, key=lambda h: rank[h.group]), best


def _fewest_nodes(ranked: Sequence[str], on_node: Mapping[str, list[Holding]], allowed: Sequence[Holding],
                  trials: _Trials) -> int | None:
    """The smallest prefix of `ranked` that frees, with the devices free now, at least as many devices as
    the members' claims ask for at least, with room for each member's on one node; None if none does."""
    data = trials.data
    per_member = [_least_devices(m) for m in data.members]
    total = sum(_least_devices(m) for m in {c.key: m for m in data.members for c in m.claims}.values()) \
        if per_member else 0
    total = min(total, sum(per_member))
    if total == 0:
        return 0
    smallest = min((n for n in per_member if n), default=1)
    needing = sum(1 for n in per_member if n)
    room = trials.free_devices(())
    devices = sum(room.values())
    slots = sum(r // smallest for r in room.values())
    evicted: set[str] = set()
    if devices >= total and slots >= needing:
        return 0
    memo = trials.memo.devices_by_node
    for k, node in enumerate(ranked, start=1):
        for holding in on_node[node]:
            if holding.group in evicted:
                continue
            evicted.add(holding.group)
            for where, count in (memo.get(holding.group) or trials.devices_by_node(holding)).items():
                before = room.get(where, 0)
                room[where] = before + count
                devices += count
                slots += (before + count) // smallest - before // smallest
        if devices >= total and slots >= needing:
            return k
    return None


def _least_devices(member: GangMember) -> int:
    """The fewest devices the member's unallocated claims can take (admin access takes none)."""
    least = 0
    for claim in member.claims:
        if claim.allocation is not None:
            continue
        for request in claim.spec.requests:
            counts = [a.count if a.allocation_mode == EXACT_COUNT and not a.admin_access else 0
                      for a in request.alternatives]
            least += min(counts, default=0)
    return least


def _shrink(chosen: list[Holding], placed: GangPlacement, trials: _Trials) -> tuple[list[Holding], GangPlacement]:
    """Drop victims the group does not need, least preferred first (checked in full by `_checked`)."""
    charged = trials.charge(placed)
    assert charged is not None
    kept = list(chosen)
    room = _room(kept, placed, trials)
    released = trials.released(kept)  # kept up to date as victims are dropped: one charge back at a time
    admissions = trials.data.state.admissions
    used = set(placed.placements.values())
    for victim in reversed(chosen):
        on_used = {node: count for node, count in trials.devices_by_node(victim).items() if node in room}
        if victim.nodes & used or on_used:
            # Without it, each node of the placement it is on must still have the devices placed there.
            if any(room[node] < count for node, count in on_used.items()):
                continue
            rest = [h for h in kept if h.group != victim.group]
            without = _restored(released, admissions.get(victim.group))
            _, again = trials.fits(rest, without)
            if again is None:
                continue
            kept, placed, released = rest, again, without
            charged = trials.charge(placed) or charged
            room = _room(kept, placed, trials)
            used = set(placed.placements.values())
        else:
            rest = [h for h in kept if h.group != victim.group]
            without = _restored(released, admissions.get(victim.group))
            if not trials.quota_fits(rest, charged, without):
                kept, released = rest, without
    trials.keep_released(kept, released)
    return kept, placed


def _restored(state: QueueState, admission: Admission | None) -> QueueState:
    return state if admission is None else state.restore(admission)


def _checked(chosen: list[Holding], kept: list[Holding], placed: GangPlacement,
             trials: _Trials) -> tuple[list[Holding], GangPlacement]:
    """`kept` and the group's placement with them, checked once more in full; `chosen` if that fails."""
    if kept != chosen:
        _, final = trials.fits(kept)
        if final is None:
            return chosen, placed
        placed = final
    return kept, placed


def _room(victims: Sequence[Holding], placed: GangPlacement, trials: _Trials) -> dict[str, int]:
    """On each node the placement uses: devices free with `victims` evicted, less those it places there."""
    free = trials.free_devices(victims)
    room = {node: free.get(node, 0) for node in set(placed.placements.values())}
    device_node = trials.device_node
    for allocation in placed.allocations.values():
        for result in allocation.results:
            node = device_node.get(result.device_id)
            if node is not None and node in room:
                room[node] -= 1
    return room
