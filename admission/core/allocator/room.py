"""Free room and fragmentation per topology domain: for every level of every Topology, each domain's
devices, how many are free, and the largest gang it can still take.

The largest gang is counted in **whole-node pods of the level**: pods that each take as many devices as the
largest node of the level offers in a domain (8 on 8-GPU nodes), each on one node. A rack with 135 free
GPUs spread one short on 9 of its 18 nodes takes a gang of 9 such pods, not 16: the devices free outside
whole-node slots are its fragmentation. At most `MAX_DOMAINS` domains are reported per level (by value),
so that a metric's series stay bounded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from admission.core.allocator.api import Allocator, Snapshot
from admission.core.allocator.topology import Domain, topology_domains
from admission.core.allocator.usage import Usage
from admission.core.features import FeatureGates
from admission.core.models import Topology, TopologyLevel

MAX_DOMAINS = 512  # per level


@dataclass(frozen=True, slots=True)
class DomainFigure:
    topology: str
    level: str
    domain: str
    nodes: int
    devices: int
    free: int
    pod_devices: int  # devices of one whole-node pod of the level (its largest node's, in a domain)
    largest_gang: int  # whole-node pods the domain can still take, each on its own node

    @property
    def stranded(self) -> int:
        """Free devices no whole-node pod can use: the domain's fragmentation."""
        return self.free - self.largest_gang * self.pod_devices

    def to_dict(self) -> dict[str, object]:
        return {"topology": self.topology, "level": self.level, "domain": self.domain, "nodes": self.nodes,
                "devices": self.devices, "free": self.free, "podDevices": self.pod_devices,
                "largestGang": self.largest_gang, "stranded": self.stranded}


def domain_figures(snapshot: Snapshot, gates: FeatureGates, topologies: Iterable[Topology], usage: Usage,
                   limit: int = MAX_DOMAINS) -> tuple[DomainFigure, ...]:
    """Every domain's figures, by Topology, level (broadest first) and value; `usage`: the devices in use
    (reservations included, as the cycle left them)."""
    allocator = Allocator(snapshot, gates)
    taken = frozenset(usage.exclusive).union(usage.shared)
    found: list[DomainFigure] = []
    for topology in sorted(topologies, key=lambda t: t.name):
        for level in topology.levels:
            found.extend(_level_figures(allocator, topology.name, level, taken)[:limit])
    return tuple(found)


def _level_figures(allocator: Allocator, topology: str, level: TopologyLevel,
                   taken: frozenset[str]) -> list[DomainFigure]:
    domains = topology_domains(allocator, level)
    pod_devices = max((len(ids & d.devices) for d in domains for ids in d.usable), default=0)
    return [_figure(topology, level.name, d, taken, pod_devices) for d in domains]


def _figure(topology: str, level: str, domain: Domain, taken: frozenset[str], pod_devices: int) -> DomainFigure:
    # A device-attribute domain counts only its own devices free on each node, not the node's others.
    per_node = [len((ids & domain.devices) - taken) for ids in domain.usable]
    free = sum(per_node)
    largest = sum(f // pod_devices for f in per_node) if pod_devices else 0
    return DomainFigure(topology, level, domain.value, len(domain.nodes), len(domain.devices), free, pod_devices,
                        largest)
