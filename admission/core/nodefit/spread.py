"""PodTopologySpread: topology spread constraints with whenUnsatisfiable DoNotSchedule, as the scheduler's
filter decides.

A constraint's domains are the values of `topologyKey` on the eligible nodes: nodes that have every
constraint's topology key of the pod, that match the pod's node selector and required node affinity
when `nodeAffinityPolicy` is Honor (the default), and whose NoSchedule/NoExecute taints the pod
tolerates when `nodeTaintsPolicy` is Honor (the default, Ignore, does not look at taints). A domain's
count is the pods on its eligible nodes in the pod's own namespace that the constraint's
`labelSelector` matches (nil: none). The pod fits a node when the node has every topology key and,
for every constraint, the node's domain count, plus one when the pod matches the selector itself,
minus the smallest count over all domains is at most `maxSkew`; when there are fewer domains than
`minDomains`, the smallest count is taken as zero. Constraints are looked at in their order, the
first one that fails (the node lacks its key, or the skew is too large) gives the reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from admission.core.models import NodeSelector, Taint, Toleration
from admission.core.models.pod import HONOR, SpreadConstraint
from admission.core.nodefit.affinity import matches_node_affinity
from admission.core.nodefit.interpod import PlacedPod
from admission.core.nodefit.taints import untolerated_taint

SPREAD_UNMET = "node(s) didn't match pod topology spread constraints"
SPREAD_LABEL_MISSING = f"{SPREAD_UNMET} (missing required label)"


@dataclass(frozen=True, slots=True)
class SpreadPod:
    """The incoming pod's side: what decides the eligible nodes and which pods count."""

    namespace: str
    labels: Mapping[str, str]
    constraints: tuple[SpreadConstraint, ...]
    node_selector: Mapping[str, str]
    node_affinity: NodeSelector | None
    tolerations: tuple[Toleration, ...]


def eligible(pod: SpreadPod, constraint: SpreadConstraint, name: str, labels: Mapping[str, str],
             taints: tuple[Taint, ...]) -> bool:
    """Whether the node's pods count for the constraint (and its value is a domain)."""
    if any(c.topology_key not in labels for c in pod.constraints):
        return False
    if constraint.node_affinity_policy == HONOR and \
            not matches_node_affinity(pod.node_selector, pod.node_affinity, labels, name):
        return False
    return constraint.node_taints_policy != HONOR or not taints or \
        untolerated_taint(taints, pod.tolerations) is None


@dataclass(slots=True)
class SpreadCounts:
    """Per constraint of one pod: the count of every domain (its eligible nodes' values), and which nodes
    are eligible."""

    domains: list[dict[str, int]]
    eligible_nodes: list[frozenset[str]]

    def copy(self) -> SpreadCounts:
        return SpreadCounts([dict(d) for d in self.domains], self.eligible_nodes)

    def add(self, pod: SpreadPod, other: PlacedPod, labels: Mapping[str, str]) -> None:
        """Count `other`, on a node with `labels`."""
        if other.namespace != pod.namespace:
            return
        for at, constraint in enumerate(pod.constraints):
            selector = constraint.label_selector
            if other.node in self.eligible_nodes[at] and selector is not None and selector.matches(other.labels):
                value = labels[constraint.topology_key]
                self.domains[at][value] = self.domains[at].get(value, 0) + 1


def spread_counts(pod: SpreadPod, nodes: Iterable[tuple[str, Mapping[str, str], tuple[Taint, ...]]],
                  pods: Iterable[tuple[PlacedPod, Mapping[str, str]]]) -> SpreadCounts:
    """The counts for `pod` of the `pods` (each with its node's labels) over the `nodes` (name, labels,
    filtering taints)."""
    nodes = tuple(nodes)
    domains: list[dict[str, int]] = []
    eligible_nodes: list[frozenset[str]] = []
    for constraint in pod.constraints:
        names = [(name, labels) for name, labels, taints in nodes if eligible(pod, constraint, name, labels, taints)]
        eligible_nodes.append(frozenset(name for name, _ in names))
        domains.append(dict.fromkeys((labels[constraint.topology_key] for _, labels in names), 0))
    counts = SpreadCounts(domains, eligible_nodes)
    for other, labels in pods:
        counts.add(pod, other, labels)
    return counts


def smallest_counts(pod: SpreadPod, counts: SpreadCounts) -> list[int]:
    """Per constraint, the smallest domain count the skew is taken from (0 with fewer domains than
    `minDomains`)."""
    return [0 if len(domains) < constraint.min_domains or not domains else min(domains.values())
            for constraint, domains in zip(pod.constraints, counts.domains, strict=True)]


def spread_reason(pod: SpreadPod, counts: SpreadCounts, labels: Mapping[str, str],
                  smallest: list[int] | None = None) -> str | None:
    """Why PodTopologySpread rejects the pod on a node with `labels` (None: it passes); `smallest`: the
    `smallest_counts` of these counts, when the caller asks for many nodes."""
    if smallest is None:
        smallest = smallest_counts(pod, counts)
    for at, (constraint, domains) in enumerate(zip(pod.constraints, counts.domains, strict=True)):
        if constraint.topology_key not in labels:
            return SPREAD_LABEL_MISSING
        selector = constraint.label_selector
        itself = 1 if selector is not None and selector.matches(pod.labels) else 0
        if domains.get(labels[constraint.topology_key], 0) + itself - smallest[at] > constraint.max_skew:
            return SPREAD_UNMET
    return None
