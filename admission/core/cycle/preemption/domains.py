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
preemptor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from admission.core.allocator import Domain, devices_needed, topology_domains
from admission.core.cycle.preemption.holdings import Holding
from admission.core.cycle.preemption.search import NoVictims, Preemptor, SearchInput, Victims, find_victims
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
    inside = {d.value: [h for h in allowed if _inside(h, d, level)] for d in domains}
    free = {d.value: _free(d, data) for d in domains}
    reach = {d.value: free[d.value] + sum(h.devices for h in inside[d.value]) for d in domains}
    bound = {d.value: _least_cost(inside[d.value], need - free[d.value]) for d in domains}
    worth = sorted((d for d in domains if inside[d.value] and reach[d.value] >= need),
                   key=lambda d: (bound[d.value], -reach[d.value], d.value))[:MAX_DOMAINS]
    if not worth:
        return NoVictims(preemptor.group, preemptor.cluster_queue,
                         f"no {level.name} would have the {need} devices the gang needs after evicting the groups "
                         f"its policies allow there")
    found: list[Victims] = []
    tries = 0
    first_reason = ""
    for domain in worth:
        if found and bound[domain.value] > _cost(min(found, key=lambda v: _cost(v, allowed)), allowed)[:2]:
            break  # no domain left can need cheaper victims (the domains are in order of this bound)
        answer = find_victims(preemptor, inside[domain.value], _within(data, domain, level))
        tries += answer.placed_tries
        if isinstance(answer, Victims):
            found.append(replace(answer, domain=f"{level.name} {domain.value}"))
        elif not first_reason:
            first_reason = f"{level.name} {domain.value}: {answer.reason}"
    if not found:
        return NoVictims(preemptor.group, preemptor.cluster_queue,
                         f"in no {level.name} would evicting the groups its policies allow there admit it "
                         f"({len(worth)} searched; {first_reason})", tries)
    best = min(found, key=lambda v: _cost(v, allowed))
    return replace(best, placed_tries=tries)


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


def _cost(victims: Victims, allowed: Sequence[Holding]) -> tuple[int, int, int, str]:
    by_key = {h.group: h for h in allowed}
    chosen = [by_key[v] for v in victims.victims]
    return (max(h.priority for h in chosen), len(chosen), sum(h.devices for h in chosen), victims.domain)


def _inside(holding: Holding, domain: Domain, level: TopologyLevel) -> bool:
    """Whether every pod of the holding is on the domain's nodes and, for a device attribute, none of its
    devices belongs to another domain of the level."""
    if not holding.pods or not holding.nodes <= frozenset(domain.nodes):
        return False
    if level.device_attribute is None:
        return True
    return not any(r.device_id in domain.withheld for a in holding.allocations for r in a.results)


def _free(domain: Domain, data: SearchInput) -> int:
    return sum(1 for device in domain.devices if not data.usage.is_allocated(device))


def _within(data: SearchInput, domain: Domain, level: TopologyLevel) -> SearchInput:
    """The search's input with the members kept to the domain's nodes and, for a device attribute, the
    devices of other domains on those nodes withheld."""
    allowed = set(domain.nodes)
    members = [replace(m, nodes=tuple(domain.nodes) if m.nodes is None else tuple(n for n in m.nodes if n in allowed))
               for m in data.members]
    if level.device_attribute is None or not domain.withheld:
        return replace(data, members=members)
    usage = data.usage.copy()
    usage.exclusive.update(domain.withheld)
    usage.version += 1
    return replace(data, members=members, usage=usage)

