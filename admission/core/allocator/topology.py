"""Gang placement inside the domains of a topology level (one rack, one NVLink clique, one block).

A level's domains come from a node label (the nodes with each value) or from a device attribute (the
devices with each value, and the nodes that see them; a node may hold devices of several domains). A gang
placed in a domain is placed by `place_gang` with its members restricted to the domain's nodes and, for a
device attribute, with the devices of other domains on those nodes withheld (devices without the attribute,
such as NICs, stay usable).

`required`: the domains that may hold the gang are tried best-fit, the one with the fewest free devices
first (ties: fewer nodes, then by value), so large domains stay whole for large gangs; the first where the
whole gang fits wins, or the gang waits. `preferred`: one domain as for `required`; else the fewest
domains, trying for k = 2, 3, ... every set of k domains with enough free devices, the fewest free devices
first, while there are at most `EXACT_SETS` sets of that size (beyond it, only the k domains with the most
free devices); after `MAX_SET_TRIES` sets, or when no set holds it, the gang is placed on any nodes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from itertools import combinations, pairwise
from math import comb

from admission.core.allocator.api import Allocator, Snapshot
from admission.core.allocator.gang import GangMember, GangPlacement, KnownUnfit, place_gang
from admission.core.allocator.usage import Usage
from admission.core.models import EXACT_COUNT, DeviceRequest, Topology, TopologyLevel, TopologyMode
from admission.core.nodefit import NodeUsage

EXACT_SETS = 64  # sets of k domains tried one by one when there are at most this many
MAX_SET_TRIES = 64  # placements tried on sets of several domains before placing anywhere


@dataclass(frozen=True, slots=True)
class Domain:
    """One domain of a level: its value, its nodes (by name) and its devices (by id). `withheld`: devices on
    its nodes that belong to other domains of the level (a device-attribute level only); `usable`: per node
    (as `nodes`), the ids of its devices a member placed in the domain may take there."""

    value: str
    nodes: tuple[str, ...]
    devices: frozenset[str]
    withheld: frozenset[str] = frozenset()
    usable: tuple[frozenset[str], ...] = ()
    # A device of the domain may be allocated to several claims (allowMultipleAllocations): devices are then
    # not counted against what the gang asks.
    shareable: bool = False


@dataclass(frozen=True, slots=True)
class DomainPlacement:
    """The gang's placement (or why none) and the values of the domains its members use. `never`: no
    domain of the level could hold it even with nothing else running (or the level has no domain)."""

    placement: GangPlacement
    domains: tuple[str, ...] = ()
    never: bool = False


def topology_domains(allocator: Allocator, level: TopologyLevel) -> tuple[Domain, ...]:
    """The level's domains in the snapshot, by value; built once per snapshot inventory."""
    key = ("topology-domains", level.node_label, level.device_attribute, allocator.gates)
    found: tuple[Domain, ...] = allocator.snapshot.inventory.derived(key, lambda: _domains(allocator, level))
    return found


def _domains(allocator: Allocator, level: TopologyLevel) -> tuple[Domain, ...]:
    if level.node_label is not None:
        return _label_domains(allocator, level.node_label)
    assert level.device_attribute is not None
    return _attribute_domains(allocator, level.device_attribute)


def _label_domains(allocator: Allocator, label: str) -> tuple[Domain, ...]:
    nodes: dict[str, list[str]] = {}
    for name, node in sorted(allocator.snapshot.nodes.items()):
        value = node.labels.get(label)
        if value is not None:
            nodes.setdefault(value, []).append(name)
    found = []
    for value, names in sorted(nodes.items()):
        usable = tuple(frozenset(d.id for d in allocator.view(n).devices) for n in names)
        shareable = any(d.allow_multiple_allocations for n in names for d in allocator.view(n).devices)
        found.append(Domain(value, tuple(names), frozenset().union(*usable), usable=usable, shareable=shareable))
    return tuple(found)


def _attribute_domains(allocator: Allocator, attribute: str) -> tuple[Domain, ...]:
    nodes: dict[str, list[str]] = {}
    devices: dict[str, set[str]] = {}
    per_node: dict[str, set[str]] = {}  # node -> ids of its devices that carry the attribute
    for name in sorted(allocator.snapshot.nodes):
        for device in allocator.view(name).devices:
            value = device.attribute(attribute)
            if value is None or isinstance(value, tuple):
                continue
            text = str(value).lower() if isinstance(value, bool) else str(value)
            devices.setdefault(text, set()).add(device.id)
            per_node.setdefault(name, set()).add(device.id)
            if not nodes.setdefault(text, []) or nodes[text][-1] != name:
                nodes[text].append(name)
    found = []
    for value, names in sorted(nodes.items()):
        own = frozenset(devices[value])
        others = frozenset(d for n in names for d in per_node[n] if d not in own)
        usable = tuple(frozenset(d.id for d in allocator.view(n).devices if d.id not in others) for n in names)
        shareable = any(d.allow_multiple_allocations for n in names for d in allocator.view(n).devices
                        if d.id not in others)
        found.append(Domain(value, tuple(names), own, others, usable, shareable))
    return tuple(found)


def devices_needed(members: Sequence[GangMember]) -> int:
    """The fewest devices the members' claims can take together (claims not allocated yet, each once)."""
    seen: set[str] = set()
    total = 0
    for member in members:
        for claim in member.claims:
            if claim.allocation is None and claim.key not in seen:
                seen.add(claim.key)
                total += _claim_devices(claim.spec.requests)
    return total


def _claim_devices(requests: Iterable[DeviceRequest]) -> int:
    """The fewest devices the requests take: per request its smallest alternative (an `All` request at least
    one device, an admin-access request none: it takes no device from others)."""
    return sum(min((0 if s.admin_access else s.count if s.allocation_mode == EXACT_COUNT else 1
                    for s in request.alternatives), default=0) for request in requests)


def _demand(members: Sequence[GangMember], domains: tuple[Domain, ...]) -> tuple[int, int]:
    """The fewest devices the gang takes, and the fewest any member takes on its own node; (0, 0) where a
    device may be shared between claims, so that counting devices tells nothing."""
    if any(d.shareable for d in domains):
        return 0, 0
    return devices_needed(members), _least_per_member(members)


def place_in_topology(allocator: Allocator, members: Sequence[GangMember], mode: TopologyMode,
                      level: TopologyLevel, *, usage: Usage, nodes: NodeUsage,
                      known: KnownUnfit | None = None) -> DomainPlacement:
    """Place the gang by the level's domains (`mode`), next to `usage` and `nodes`; `known` as for
    `place_gang`, shared only where the usage is the same (node-label levels)."""
    domains = topology_domains(allocator, level)
    if mode is TopologyMode.REQUIRED:
        return _required(allocator, members, level, domains, usage, nodes, known)
    return _preferred(allocator, members, level, domains, usage, nodes, known)


def _required(allocator: Allocator, members: Sequence[GangMember], level: TopologyLevel,
              domains: tuple[Domain, ...], usage: Usage, nodes: NodeUsage, known: KnownUnfit | None) -> DomainPlacement:
    if not domains:
        return DomainPlacement(GangPlacement(False, reason=f"no {level.name} exists: no node has {level.source}"
                                             if level.node_label else f"no {level.name} exists: no device in a "
                                             f"ResourceSlice publishes {level.source}"), never=True)
    need, per_member = _demand(members, domains)
    largest = max(domains, key=lambda d: (len(d.devices), d.value))
    if need > len(largest.devices):
        return DomainPlacement(GangPlacement(False, reason=(
            f"the gang needs at least {need} devices in one {level.name}, and the largest {level.name} "
            f"({largest.value}) has {len(largest.devices)} devices in all")), never=True)
    free, taken = _free(domains, usage)
    found, tried = _best_single(allocator, members, level, domains, (free, taken, need, per_member), usage, nodes,
                                known)
    if found is not None:
        return found
    return DomainPlacement(_no_single(members, level, domains, free, need, tried))


def _free(domains: tuple[Domain, ...], usage: Usage) -> tuple[dict[str, int], AbstractSet[str]]:
    """Free devices per domain, and the devices in use."""
    taken = _taken(usage)
    return {d.value: len(d.devices) - len(d.devices & taken) for d in domains}, taken


BREAKDOWN = 3
"""How many domains a "no single domain" answer names: the closest and the next ones."""

Tried = tuple[Domain, GangPlacement, int]  # a domain tried, its answer, and how many members it took (at most)


def _best_single(allocator: Allocator, members: Sequence[GangMember], level: TopologyLevel,
                 domains: tuple[Domain, ...], room: tuple[Mapping[str, int], AbstractSet[str], int, int],
                 usage: Usage, nodes: NodeUsage,
                 known: KnownUnfit | None) -> tuple[DomainPlacement | None, list[Tried]]:
    """The gang in the best-fitting single domain, or None with every domain tried and its answer. `room`: the
    free devices per domain, the devices in use, and the gang's `_demand`."""
    free, taken, need, per_member = room
    tried: list[Tried] = []
    fitting = sorted((d for d in domains if free[d.value] >= need),
                     key=lambda d: (free[d.value], len(d.nodes), d.value))
    for domain in fitting:
        takes = sum((len(ids) - len(ids & taken)) // per_member for ids in domain.usable) if per_member \
            else len(members)
        if takes < len(members):
            tried.append((domain, GangPlacement(False, reason=(
                f"its nodes' free devices can take at most {takes} of the {len(members)} pods "
                f"({per_member} devices each on one node)")), takes))
            continue
        placed = _place_within(allocator, members, level, (domain,), usage, nodes, known)
        if placed.feasible:
            return DomainPlacement(placed, (domain.value,)), tried
        if placed.error:
            return DomainPlacement(placed), tried
        tried.append((domain, placed, len(placed.placements)))
    return None, tried


def _no_single(members: Sequence[GangMember], level: TopologyLevel, domains: tuple[Domain, ...],
               free: Mapping[str, int], need: int, tried: list[Tried]) -> GangPlacement:
    """Why no single domain holds the gang: the one that came closest and what it lacked, then the next
    closest (at most `BREAKDOWN` in all) and how many other domains lack the free devices."""
    if not tried:
        most = sorted(domains, key=lambda d: (-free[d.value], d.value))[:BREAKDOWN]
        listed = ", ".join(f"{level.name} {d.value} with {free[d.value]}" for d in most)
        return GangPlacement(False, reason=(
            f"no {level.name} has the {need} free devices the whole gang needs; the most free: {listed}"))
    ranked = sorted(tried, key=lambda t: (-t[2], -free[t[0].value], t[0].value))
    domain, closest, took = ranked[0]
    reason = (f"no {level.name} holds the whole gang ({len(members)} pods, {need} devices): the closest, "
              f"{level.name} {domain.value} ({free[domain.value]} free devices), took {took} of "
              f"{len(members)} pods; {closest.reason}")
    nexts = [f"{level.name} {d.value} took {t} ({free[d.value]} free)" for d, _, t in ranked[1:BREAKDOWN]]
    if nexts:
        reason += f"; next: {', '.join(nexts)}"
    short = len(domains) - len(tried)
    if short:
        verb = "s lack" if short > 1 else " lacks"
        reason += f"; {short} other {level.name}{verb} the {need} free devices"
    return dataclasses.replace(closest, reason=reason)


def _preferred(allocator: Allocator, members: Sequence[GangMember], level: TopologyLevel,
               domains: tuple[Domain, ...], usage: Usage, nodes: NodeUsage,
               known: KnownUnfit | None) -> DomainPlacement:
    need, per_member = _demand(members, domains)
    free, taken = _free(domains, usage)
    found, _ = _best_single(allocator, members, level, domains, (free, taken, need, per_member), usage, nodes,
                            known)
    if found is not None:
        return found
    tries = 0
    for size in range(2, len(domains) + 1):
        for chosen in _sets(domains, size, free, need):
            if tries >= MAX_SET_TRIES:
                return _anywhere(allocator, members, level, domains, usage, nodes, known)
            tries += 1
            placed = _place_within(allocator, members, level, chosen, usage, nodes, known)
            if placed.feasible or placed.error:
                return DomainPlacement(placed, domains_used(allocator, level, placed, domains))
    return _anywhere(allocator, members, level, domains, usage, nodes, known)


def _sets(domains: tuple[Domain, ...], size: int, free: Mapping[str, int], need: int) -> list[tuple[Domain, ...]]:
    """The sets of `size` domains worth trying, in order: every set with enough free devices, fewest free
    first, when there are at most `EXACT_SETS`; else the `size` domains with the most free devices."""
    if comb(len(domains), size) > EXACT_SETS:
        largest = tuple(sorted(domains, key=lambda d: (-free[d.value], d.value))[:size])
        return [largest] if sum(free[d.value] for d in largest) >= need else []
    found = [c for c in combinations(domains, size) if sum(free[d.value] for d in c) >= need]
    return sorted(found, key=lambda c: (sum(free[d.value] for d in c), tuple(d.value for d in c)))


def _anywhere(allocator: Allocator, members: Sequence[GangMember], level: TopologyLevel,
              domains: tuple[Domain, ...], usage: Usage, nodes: NodeUsage, known: KnownUnfit | None) -> DomainPlacement:
    placed = place_gang(allocator, members, usage=usage, nodes=nodes, known=known)
    return DomainPlacement(placed, domains_used(allocator, level, placed, domains) if placed.feasible else ())


def _place_within(allocator: Allocator, members: Sequence[GangMember], level: TopologyLevel,
                  chosen: Sequence[Domain], usage: Usage, nodes: NodeUsage, known: KnownUnfit | None) -> GangPlacement:
    allowed = sorted({n for d in chosen for n in d.nodes})
    allowed_set = set(allowed)
    restricted = [dataclasses.replace(m, nodes=tuple(allowed) if m.nodes is None
                                      else tuple(n for n in m.nodes if n in allowed_set)) for m in members]
    own = frozenset().union(*(d.devices for d in chosen))
    withheld = frozenset().union(*(d.withheld for d in chosen)) - own
    if level.device_attribute is None or not withheld:
        return place_gang(allocator, restricted, usage=usage, nodes=nodes, known=known)
    masked = usage.copy()
    masked.exclusive.update(withheld)
    masked.version += 1
    return place_gang(allocator, restricted, usage=masked, nodes=nodes)


def place_beside(allocator: Allocator, members: Sequence[GangMember], level: TopologyLevel, nodes_used: Iterable[str],
                 devices_used: Iterable[str], *, usage: Usage, nodes: NodeUsage) -> DomainPlacement:
    """More members of a gang placed `required` in a domain, inside the domain(s) its plan already uses
    (`nodes_used` for a node-label level, `devices_used` for a device attribute)."""
    domains = topology_domains(allocator, level)
    if level.node_label is not None:
        on = set(nodes_used)
        chosen = tuple(d for d in domains if on.intersection(d.nodes))
    else:
        held = set(devices_used)
        chosen = tuple(d for d in domains if held & d.devices)
    if not chosen:
        return DomainPlacement(GangPlacement(False, reason=f"the {level.name} of the group's plan is gone (no node "
                                             f"or device of it has {level.source} any more)"))
    placed = _place_within(allocator, members, level, chosen, usage, nodes, None)
    if not placed.feasible and not placed.error:
        where = ", ".join(d.value for d in chosen)
        placed = dataclasses.replace(placed, reason=f"inside {level.name} {where} of the group's plan: {placed.reason}")
    return DomainPlacement(placed, tuple(d.value for d in chosen))


def _least_per_member(members: Sequence[GangMember]) -> int:
    """The fewest devices any member takes on its own node (its unallocated claims that no other member
    shares); 0 when some member may take none there."""
    users: dict[str, int] = {}
    for member in members:
        for claim in member.claims:
            users[claim.key] = users.get(claim.key, 0) + 1
    own = [_claim_devices(r for c in m.claims if c.allocation is None and users[c.key] == 1 for r in c.spec.requests)
           for m in members]
    return min(own, default=0)


def _taken(usage: Usage) -> AbstractSet[str]:
    """The ids of the devices in use (held whole or shared): the usage's own set where no device is shared
    (not copied: only read while the usage stays as it is)."""
    if not usage.shared:
        return usage.exclusive
    return usage.exclusive.union(usage.shared)


def domains_used(allocator: Allocator, level: TopologyLevel, placed: GangPlacement,
                 domains: Iterable[Domain] | None = None) -> tuple[str, ...]:
    """The values of the level's domains a placement's members use: their nodes' (a node-label level) or
    their devices' (a device-attribute level)."""
    known = tuple(domains) if domains is not None else topology_domains(allocator, level)
    if level.node_label is not None:
        of_node = {n: d.value for d in known for n in d.nodes}
        return tuple(sorted({of_node[n] for n in placed.placements.values() if n in of_node}))
    of_device = {device: d.value for d in known for device in d.devices}
    used = {of_device[r.device_id] for a in placed.allocations.values() for r in a.results
            if r.device_id in of_device}
    return tuple(sorted(used))


def levels_out_of_order(snapshot: Snapshot, topology: Topology) -> str:
    """Why the Topology's node-label levels are not nested, broadest first, as the nodes' labels show (each
    domain of a level inside one domain of the node-label level before it); "" when they are, or when the
    nodes cannot tell (device-attribute levels are not checked)."""
    key = ("topology-order", topology)
    found: str = snapshot.inventory.derived(key, lambda: _nesting_problem(snapshot, topology))
    return found


def _nesting_problem(snapshot: Snapshot, topology: Topology) -> str:
    labelled = [level for level in topology.levels if level.node_label is not None]
    for outer, inner in pairwise(labelled):
        assert outer.node_label is not None and inner.node_label is not None
        within: dict[str, set[str]] = {}
        for node in snapshot.nodes.values():
            value, around = node.labels.get(inner.node_label), node.labels.get(outer.node_label)
            if value is not None and around is not None:
                within.setdefault(value, set()).add(around)
        for value, outers in sorted(within.items()):
            if len(outers) > 1:
                first, second = sorted(outers)[:2]
                return (f"Topology {topology.name} lists its levels out of order: {inner.name} {value} spans "
                        f"{outer.name} {first} and {outer.name} {second} (nodes labelled {inner.node_label}={value}"
                        f"), but level {outer.name} comes before {inner.name}, so each {inner.name} must lie "
                        f"inside one {outer.name}; list the levels broadest first")
    return ""
