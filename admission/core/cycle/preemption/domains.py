"""Victims inside one domain, for a group that requires one (`required: rack`): evicting two gangs in one
rack, not four scattered over the cluster.

Pure. For each domain of the level that could hold the gang once its candidates there are gone (its free
devices plus theirs cover what the gang asks), the ordinary search (`find_victims`) runs on that domain
alone: the members restricted to the domain's nodes (and, for a device attribute, to its devices), the
candidates restricted to groups held wholly inside it. Of the domains where a set of victims admits the
group, the one whose victims are cheapest wins: the lowest highest priority among them, then the fewest
victims, then the fewest devices, then by value. The domains are searched in order of a lower bound of
that cost (the priority and the number of candidates their devices alone call for), and the search stops
at the first domain whose bound exceeds the best found; at most `MAX_DOMAINS` domains are searched per
preemptor. The search's last check in full runs only for the domain whose victims are the cheapest found
(`_Found`); the domains' searches share what they work out of the candidates (`SearchMemo`), and place the
gang next to the device usage of the domain's devices only (`DeviceScope`).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import replace

from admission.core.allocator import Domain, Usage, devices_needed, topology_domains
from admission.core.cycle.preemption.holdings import Holding
from admission.core.cycle.preemption.search import (
    DeviceScope,
    Draft,
    NoVictims,
    Preemptor,
    SearchInput,
    Victims,
    draft_victims,
)
from admission.core.models import TopologyLevel

MAX_DOMAINS = 16  # domains searched for one preemptor


def find_victims_in_domain(preemptor: Preemptor, allowed: Sequence[Holding], data: SearchInput,
                           level: TopologyLevel) -> Victims | NoVictims:
    """A small set of `allowed`, all inside one domain of `level`, whose eviction admits the group there."""
    domains = topology_domains(data.allocator, level)
    if not domains:
        return NoVictims(preemptor.group, preemptor.cluster_queue, f"no {level.name} exists")
    # A device several claims may share makes counting devices meaningless (as in placement).
    need = 0 if any(d.shareable for d in domains) else devices_needed(data.members)
    inside = _inside(allowed, domains, level)
    taken = _taken(data.usage)
    free = {d.value: _free(d, taken) for d in domains}
    reach = {d.value: free[d.value] + sum(h.devices for h in inside[d.value]) for d in domains}
    bound = {d.value: _least_cost(inside[d.value], need - free[d.value]) for d in domains}
    worth = sorted((d for d in domains if inside[d.value] and reach[d.value] >= need),
                   key=lambda d: (bound[d.value], -reach[d.value], d.value))[:MAX_DOMAINS]
    if not worth:
        return NoVictims(preemptor.group, preemptor.cluster_queue,
                         f"no {level.name} would have the {need} devices the gang needs after evicting the groups "
                         f"its policies allow there")
    found = _Found(level)
    tries = 0  # placements of the searches that found nothing
    first_reason = ""
    for domain in worth:
        if found and bound[domain.value] > found.least()[:2] and bound[domain.value] > found.best()[0][:2]:
            break  # no domain left can need cheaper victims (the domains are in order of this bound)
        answer = draft_victims(preemptor, inside[domain.value], _within(data, domain, level))
        if isinstance(answer, NoVictims):
            tries += answer.placed_tries
            first_reason = first_reason or f"{level.name} {domain.value}: {answer.reason}"
        else:
            found.add(domain, answer)
    if not found:
        return NoVictims(preemptor.group, preemptor.cluster_queue,
                         f"in no {level.name} would evicting the groups its policies allow there admit it "
                         f"({len(worth)} searched; {first_reason})", tries)
    best = found.best()[1]
    return replace(best, placed_tries=tries + found.placed_tries)


Cost = tuple[int, int, int, str]  # highest priority, victims, devices, domain (`rack r3`): lowest wins


class _Found:
    """The domains where victims were found, cheapest first. A domain's victims are settled (checked in full,
    `Draft.settle`) only when they are the cheapest found: settling never makes victims cheaper, so the
    cheapest once settled are the cheapest of all, as if every domain's victims had been settled."""

    def __init__(self, level: TopologyLevel) -> None:
        self.level = level
        self._heap: list[tuple[Cost, int, Draft | Victims]] = []
        self._drafts: list[Draft] = []

    def __bool__(self) -> bool:
        return bool(self._heap)

    @property
    def placed_tries(self) -> int:
        return sum(d.trials.placed for d in self._drafts)

    def add(self, domain: Domain, draft: Draft) -> None:
        self._drafts.append(draft)
        heapq.heappush(self._heap, (_cost(draft.kept, f"{self.level.name} {domain.value}"), len(self._drafts),
                                    draft))

    def least(self) -> Cost:
        """A lower bound of the cost of `best` (the cheapest victims found, settled or not)."""
        return self._heap[0][0]

    def best(self) -> tuple[Cost, Victims]:
        """The cheapest victims, settled."""
        while True:
            cost, order, entry = self._heap[0]
            if isinstance(entry, Victims):
                return cost, entry
            heapq.heappop(self._heap)
            where = cost[3]
            settled = replace(entry.settle(), domain=where)
            of_key = {h.group: h for h in entry.chosen}
            heapq.heappush(self._heap, (_cost([of_key[v] for v in settled.victims], where), order, settled))


def _least_cost(inside: Sequence[Holding], deficit: int) -> tuple[int, int]:
    """A lower bound of `_cost`'s first two figures for victims freeing `deficit` devices among `inside`: the
    priority reached taking candidates by priority until they hold enough, and the fewest candidates that
    hold enough."""
    if deficit <= 0 or not inside:
        return (min((h.priority for h in inside), default=0), 1)
    held, priority = 0, 0
    for holding in sorted(inside, key=lambda h: h.priority):
        held, priority = held + holding.devices, holding.priority
        if held >= deficit:
            break
    held, count = 0, 0
    for holding in sorted(inside, key=lambda h: -h.devices):
        held, count = held + holding.devices, count + 1
        if held >= deficit:
            break
    return priority, count


def _cost(victims: Iterable[Holding], where: str) -> Cost:
    chosen = list(victims)
    return (max((h.priority for h in chosen), default=0), len(chosen), sum(h.devices for h in chosen), where)


def _inside(allowed: Sequence[Holding], domains: Sequence[Domain],
            level: TopologyLevel) -> dict[str, list[Holding]]:
    """Per domain (by value), the holdings of `allowed` wholly inside it: every pod on the domain's nodes and,
    for a device attribute, none of its devices of another domain of the level."""
    of_node: dict[str, set[str]] = {}
    for domain in domains:
        for node in domain.nodes:
            of_node.setdefault(node, set()).add(domain.value)
    by_value = {d.value: d for d in domains}
    found: dict[str, list[Holding]] = {d.value: [] for d in domains}
    for holding in allowed:
        common: set[str] | None = None
        for node in holding.nodes:
            common = of_node.get(node, set()) if common is None else common & of_node.get(node, set())
            if not common:
                break
        for value in sorted(common or ()):
            withheld = by_value[value].withheld
            if level.device_attribute is None or not any(
                    r.device_id in withheld for a in holding.allocations for r in a.results):
                found[value].append(holding)
    return found


def _free(domain: Domain, taken: AbstractSet[str]) -> int:
    return len(domain.devices) - len(domain.devices & taken)


def _taken(usage: Usage) -> AbstractSet[str]:
    """The devices in use, held whole or shared (`Usage.is_allocated`)."""
    return usage.exclusive if not usage.shared else usage.exclusive.union(usage.shared)


def _within(data: SearchInput, domain: Domain, level: TopologyLevel) -> SearchInput:
    """The search's input with the members kept to the domain's nodes and, for a device attribute, the
    devices of other domains on those nodes withheld."""
    allowed = set(domain.nodes)
    members = [replace(m, nodes=tuple(domain.nodes) if m.nodes is None else tuple(n for n in m.nodes if n in allowed))
               for m in data.members]
    seen = [d for n in domain.nodes for d in data.allocator.view(n).devices]
    pools = {(d.driver, d.pool) for d in seen}  # a node's devices share a few pools: each named once
    scope = DeviceScope(frozenset(d.id for d in seen), frozenset(f"{driver}/{pool}" for driver, pool in pools))
    if level.device_attribute is None or not domain.withheld:
        return replace(data, members=members, scope=scope)
    usage = data.usage.copy()
    usage.exclusive.update(domain.withheld)
    usage.version += 1
    return replace(data, members=members, usage=usage, scope=scope)
