"""A group's topology request checked against its ClusterQueue's Topology, and the group placed by it.

A group that asks for a level (`GroupView.topology`) is placed by `place_in_topology` on the level of the
Topology its ClusterQueue names (`spec.topologyName`); late members of a group admitted with a `required`
level are placed inside the domain its plan uses. A queue without a Topology, or a Topology without
the level, can never place the group: it waits as never-admissible. A Topology that is missing or does not
parse stops only the groups that ask for a level, as an invalid queue would.
"""

from __future__ import annotations

from collections.abc import Sequence

from admission.core.allocator import (
    Allocator,
    DomainPlacement,
    GangMember,
    GangPlacement,
    KnownUnfit,
    Usage,
    levels_out_of_order,
    place_beside,
    place_gang,
    place_in_topology,
)
from admission.core.cycle.groups import GroupView
from admission.core.cycle.types import CycleInput, Wait, WaitReason
from admission.core.models import ObjectRef, TopologyLevel, TopologyMode
from admission.core.nodefit import NodeUsage
from admission.core.quota import Plan


def topology_level(group: GroupView, cluster_queue: str, cycle: CycleInput) -> TopologyLevel | Wait | None:
    """The level the group asks for, or why it cannot be had; None when it asks for none."""
    request = group.topology
    if request is None:
        return None
    queue = cycle.state.queues[cluster_queue]
    asks = f"the group asks for topology {request.describe()}"
    if queue.topology is None:
        return Wait(group.key, WaitReason.NEVER_FITS, f"{asks}, but ClusterQueue {cluster_queue} names no Topology "
                    "(spec.topologyName); its administrator sets one, or remove the group's topology request",
                    cluster_queue)
    topology = cycle.topologies.get(queue.topology)
    if topology is None:
        broken = cycle.invalid.get(ObjectRef("Topology", "", queue.topology))
        state = f"which is invalid: {broken}" if broken else "which does not exist"
        return Wait(group.key, WaitReason.QUEUE_INVALID, f"{asks}; ClusterQueue {cluster_queue} names Topology "
                    f"{queue.topology}, {state}", cluster_queue)
    level = topology.level(request.level)
    if level is None:
        levels = ", ".join(lv.name for lv in topology.levels)
        return Wait(group.key, WaitReason.NEVER_FITS, f"{asks}, but Topology {topology.name} (of ClusterQueue "
                    f"{cluster_queue}) has no level {request.level!r}; its levels: {levels}", cluster_queue)
    disorder = levels_out_of_order(cycle.snapshot, topology)
    if disorder:
        return Wait(group.key, WaitReason.NEVER_FITS, f"{asks}, but {disorder}", cluster_queue)
    return level


def place_by_topology(group: GroupView, level: TopologyLevel, allocator: Allocator, members: Sequence[GangMember],
                      usage: Usage, nodes: NodeUsage, known: KnownUnfit | None) -> DomainPlacement:
    """The group placed by its request on `level` (node-label levels share `known`: their usage is the same)."""
    assert group.topology is not None
    return place_in_topology(allocator, members, group.topology.mode, level, usage=usage, nodes=nodes,
                             known=known if level.node_label is not None else None)


def never_in_topology(group: GroupView, cluster_queue: str, placed: DomainPlacement) -> Wait:
    """The wait of a group no domain of its level can ever hold."""
    assert group.topology is not None
    return Wait(group.key, WaitReason.NEVER_FITS, f"topology {group.topology.describe()}: {placed.placement.reason}; "
                "shrink the group, ask for a broader level, or use preferred", cluster_queue)


def place_late(group: GroupView, cluster_queue: str, plan: Plan, allocator: Allocator,
               members: Sequence[GangMember], usage: Usage, nodes: NodeUsage, cycle: CycleInput) -> GangPlacement:
    """Late members placed beside their admitted group: inside the domain its plan uses when the group
    requires one (and its level can still be had), else wherever they fit."""
    level = topology_level(group, cluster_queue, cycle)
    if not isinstance(level, TopologyLevel) or group.topology is None or \
            group.topology.mode is not TopologyMode.REQUIRED:
        return place_gang(allocator, members, usage=usage, nodes=nodes)
    devices = [device for claim in plan.claims for _, device in claim.devices]
    return place_beside(allocator, members, level, (node for _, node in plan.nodes), devices, usage=usage,
                        nodes=nodes).placement
