"""Capacity planning by whole domains: when waiting groups ask for a topology level (`required: rack`),
added capacity is planned as whole domains of that level, each of the shape of an existing one (as many
nodes as its largest domain, of the profile given), not as loose nodes that no rack holds.

The level is that of the first target group that asks for a node-label level of its ClusterQueue's
Topology; the template is the level's domain with the most nodes (ties: by value). An added domain's nodes
carry the level's label with a new value (`planned-<level>-<n>`) and, for the broader node-label levels of
the Topology, the template's values (a new rack in the template's block). The count is found as the node
plan finds its counts: doubled from 1 until every target is admitted or no target waits for devices or
nodes, then the smallest count by binary search.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from admission.core.allocator import Allocator, Snapshot, topology_domains
from admission.core.cycle import GroupView, WaitReason
from admission.core.models import Model, Node, Topology, TopologyLevel
from admission.core.simulate.cluster import SimulatedCluster
from admission.core.simulate.engine import ProgressHook, SimulationSettings, simulate
from admission.core.simulate.plan import NodeMaker
from admission.core.simulate.results import Fate, GroupOutcome, SimulationResult

_NODE_REASONS = frozenset({WaitReason.DEVICES.value, WaitReason.NODES.value})


@dataclass(frozen=True, slots=True)
class DomainsToAdd:
    level: str
    template: str  # the existing domain whose shape the added ones copy
    nodes_each: int
    profile: str
    count: int  # domains to add
    targets: tuple[str, ...]
    admitted: tuple[str, ...]
    unplannable: tuple[GroupOutcome, ...]
    result: SimulationResult
    simulations: int

    def to_dict(self) -> dict[str, object]:
        return {"level": self.level, "domains": self.count, "shapedLike": self.template, "nodesEach": self.nodes_each,
                "profile": self.profile, "nodes": {self.profile: self.count * self.nodes_each},
                "total": self.count * self.nodes_each, "targets": list(self.targets), "admitted": list(self.admitted),
                "simulations": self.simulations,
                "cannotRun": [{"group": o.group, "reason": o.reason, "message": o.message} for o in self.unplannable]}

    def lines(self) -> list[str]:
        out = [f"domain plan: the waiting groups ask for {self.level} domains, so whole {self.level}s are planned, "
               f"not loose nodes: add {self.count} {self.level}(s) shaped like {self.level} {self.template} "
               f"({self.nodes_each} × {self.profile} each, {self.count * self.nodes_each} node(s)): "
               f"{len(self.admitted)} of {len(self.targets)} waiting group(s) admitted "
               f"({self.simulations} simulations)"]
        if self.unplannable:
            out.append(f"groups that no added {self.level} of this shape lets run:")
            out += [f"  {o.group}: {o.reason}: {o.message}" for o in self.unplannable]
        return out


@dataclass(frozen=True, slots=True)
class _Shape:
    topology: Topology
    level: TopologyLevel
    template: str
    nodes: int
    labels: dict[str, str]  # the broader node-label levels' values, from the template's first node


def plan_domains(cluster: SimulatedCluster, settings: SimulationSettings, profiles: Sequence[str], make: NodeMaker,
                 targets: Collection[str] | None = None, within: float = 0.0,
                 progress: ProgressHook | None = None) -> DomainsToAdd | None:
    """Whole domains to add so that `targets` (default: every group left waiting) are admitted within
    `within` seconds; None when no target asks for a node-label level that has a domain to copy."""
    bounded = replace(settings, horizon=within)
    baseline = simulate(cluster, bounded, progress)
    wanted = tuple(targets) if targets is not None else tuple(o.group for o in baseline.waiting)
    groups = {g.key: g for g in cluster.groups()}
    shape = next((s for key in wanted if key in groups if (s := _shape(cluster, groups[key], settings)) is not None),
                 None)
    if shape is None or not profiles:
        return None
    profile = profiles[0]
    runs: dict[int, SimulationResult] = {0: baseline}

    def run(count: int) -> SimulationResult:
        if count not in runs:
            runs[count] = simulate(cluster.with_models(_domains(shape, profile, make, count)), bounded, progress,
                                   targets=wanted)
        return runs[count]

    def admitted(count: int) -> set[str]:
        return {t for t in wanted if (o := run(count).outcome(t)) is not None and o.fate is Fate.ADMITTED}

    cap = max(1, len(wanted))  # each target needs at most one new domain of its own
    count = 1
    while True:
        missing = [o for t in wanted if (o := run(count).outcome(t)) is not None and o.fate is Fate.WAITING]
        if not missing or count >= cap or not any(o.reason in _NODE_REASONS for o in missing):
            break
        count = min(cap, count * 2)
    reachable, low, high = admitted(count), 0, count
    while low < high:
        middle = (low + high) // 2
        if reachable <= admitted(middle):
            high = middle
        else:
            low = middle + 1
    final = run(high)
    unplannable = tuple(o for t in wanted if t not in reachable and (o := run(count).outcome(t)) is not None)
    return DomainsToAdd(shape.level.name, shape.template, shape.nodes, profile, high, wanted,
                        tuple(t for t in wanted if t in admitted(high)), unplannable, final, len(runs))


def _shape(cluster: SimulatedCluster, group: GroupView, settings: SimulationSettings) -> _Shape | None:
    """The Topology and node-label level the group asks for, and the largest existing domain of it."""
    if group.topology is None:
        return None
    local = cluster.local_queues.get(f"{group.namespace}/{group.queue}")
    queue = next((q for q in cluster.cluster_queues if local is not None and q.name == local.cluster_queue), None)
    topology = cluster.topologies.get(queue.topology or "") if queue is not None else None
    level = topology.level(group.topology.level) if topology is not None else None
    if topology is None or level is None or level.node_label is None:
        return None
    snapshot = Snapshot.from_models(cluster.models)
    domains = topology_domains(Allocator(snapshot, settings.gates), level)
    if not domains:
        return None
    template = max(domains, key=lambda d: (len(d.nodes), d.value))
    first = snapshot.nodes[template.nodes[0]]
    broader = topology.levels[:topology.levels.index(level)]
    labels = {lv.node_label: first.labels[lv.node_label] for lv in broader
              if lv.node_label is not None and lv.node_label in first.labels}
    return _Shape(topology, level, template.value, len(template.nodes), labels)


def _domains(shape: _Shape, profile: str, make: NodeMaker, count: int) -> list[Model]:
    """`count` new domains of `shape.nodes` nodes of `profile` each, labelled into their domain."""
    assert shape.level.node_label is not None
    added: list[Model] = []
    for domain in range(count):
        labels = {**shape.labels, shape.level.node_label: f"planned-{shape.level.name}-{domain}"}
        for index in range(shape.nodes):
            for model in make(profile, domain * shape.nodes + index):
                added.append(_labelled(model, labels) if isinstance(model, Node) else model)
    return added


def _labelled(node: Node, labels: dict[str, str]) -> Node:
    return replace(node, meta=replace(node.meta, labels={**node.meta.labels, **labels}))
