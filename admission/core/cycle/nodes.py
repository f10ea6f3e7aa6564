"""Node resources as the cycle sees them: bound pods, plus admitted members on the nodes their plan names,
plus the open slots of declared shapes (their role's template) on the nodes reserved for them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from admission.core.cycle.groups import TERMINAL_PHASES, GroupView
from admission.core.cycle.shape import open_slot_pods
from admission.core.models import Pod
from admission.core.nodefit import NodeUsage, PodFit
from admission.core.quota import Phase


def promised_pods(groups: Sequence[GroupView], nodes: NodeUsage) -> NodeUsage:
    """`nodes` plus the members of admitted groups that are not bound yet, on the nodes their plan names:
    the scheduler is about to place them there, so their requests are taken as node devices are. An open
    slot takes its role's template requests on its node (when the group's shape is still declared)."""
    for group in groups:
        pod_group = group.pod_group
        if pod_group is not None and pod_group.phase is Phase.ADMITTED:
            planned = {f"{group.namespace}/{name}": node for name, node in pod_group.plan.nodes}
            nodes = with_pods(nodes, group.pods, planned)
            nodes = _with_open_slots(nodes, group)
    return nodes


def _with_open_slots(nodes: NodeUsage, group: GroupView) -> NodeUsage:
    for node, placeholder in open_slot_pods(group):
        nodes = nodes.plus(node, PodFit.of(placeholder).requests)
    return nodes


def with_pods(nodes: NodeUsage, pods: Sequence[Pod], placements: Mapping[str, str]) -> NodeUsage:
    for pod in pods:
        node = placements.get(pod.key)
        if node and not pod.node_name and pod.phase not in TERMINAL_PHASES:
            fit = PodFit.of(pod)
            nodes = nodes.plus(node, fit.requests, fit.placed_on(node))
    return nodes

