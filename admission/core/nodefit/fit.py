"""Does a pod fit a node, as the kube-scheduler's node filters decide, and if not, why not.

Filters, in the scheduler's order: NodeUnschedulable, TaintToleration, NodeAffinity (these depend
only on the pod and the node: `static_reason`), then NodeResourcesFit (`resource_reasons`, which
depends on what the pods already on the node request). Reasons use the scheduler's wording, so a
summary reads like its "0/4 nodes are available: ..." message.

Resources are compared in the scheduler's integer units (see `requests.scheduler_amounts`). A
resource a node does not list counts as zero, except that a node listing no allocatable resources
at all is not checked (only hand-written manifests lack them; a kubelet always reports them), and
the pod count is checked only when the node lists `pods`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from admission.core.models import Container, DeviceClass, Node, NodeSelector, Pod, Taint, Toleration
from admission.core.models.pod import PodAffinityTerm, SpreadConstraint
from admission.core.nodefit.affinity import matches_node_affinity
from admission.core.nodefit.extended import served_resources
from admission.core.nodefit.interpod import (
    EXISTING_ANTI_AFFINITY,
    AffinityCounts,
    AffinityTerms,
    ExistingAntiAffinity,
    PlacedPod,
    interpod_reason,
    placed_pod,
)
from admission.core.nodefit.requests import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    allocatable_amounts,
    pod_requests,
    scheduler_amounts,
)
from admission.core.nodefit.spread import SpreadCounts, SpreadPod, smallest_counts, spread_counts, spread_reason
from admission.core.nodefit.taints import FILTERED_EFFECTS, tolerates_unschedulable, untolerated_taint

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})

UNSCHEDULABLE = "node(s) were unschedulable"
AFFINITY_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
NODE_NAME_MISMATCH = "node(s) didn't match the requested node name"
TOO_MANY_PODS = "Too many pods"
_FIRST = (CPU, MEMORY, EPHEMERAL_STORAGE)
_NONE: Mapping[str, int] = {}


def untolerated(taint: Taint) -> str:
    return f"node(s) had untolerated taint {taint.describe()}"


def insufficient(resource: str) -> str:
    return f"Insufficient {resource}"


@dataclass(frozen=True, slots=True)
class PodFit:
    """What the node filters need of one pod, computed once: its requests in scheduler units, its node
    selector and required node affinity, its tolerations (and its containers, for the claim of its
    DRA-backed extended resources)."""

    key: str
    requests: Mapping[str, int] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    node_affinity: NodeSelector | None = None
    tolerations: tuple[Toleration, ...] = ()
    containers: tuple[Container, ...] = ()
    init_containers: int = 0  # how many come before `containers` (the scheduler's container index counts them)
    labels: Mapping[str, str] = field(default_factory=dict)  # what other pods' terms and constraints select
    # Required pod affinity and anti-affinity terms, and DoNotSchedule topology spread constraints.
    affinity_terms: tuple[PodAffinityTerm, ...] = ()
    anti_affinity_terms: tuple[PodAffinityTerm, ...] = ()
    spread_constraints: tuple[SpreadConstraint, ...] = ()
    # Equal for pods the static filters treat alike (gangs of identical pods share their answers).
    placement_key: tuple[object, ...] = field(init=False, repr=False, compare=False)
    # The requests in the order the scheduler reports them: cpu, memory, ephemeral-storage, then by name.
    ordered: tuple[tuple[str, int], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        key = (tuple(sorted(self.node_selector.items())), self.node_affinity, self.tolerations)
        object.__setattr__(self, "placement_key", key)
        first = [(name, self.requests[name]) for name in _FIRST if name in self.requests]
        rest = sorted((name, amount) for name, amount in self.requests.items() if name not in _FIRST)
        object.__setattr__(self, "ordered", (*first, *rest))

    @staticmethod
    def of(pod: Pod) -> PodFit:
        return PodFit(pod.key, scheduler_amounts(pod_requests(pod)), dict(pod.node_selector), pod.node_affinity,
                      pod.tolerations, pod.containers, len(pod.init_containers), pod.labels,
                      pod.affinity_terms, pod.anti_affinity_terms, pod.spread_constraints)

    @property
    def namespace(self) -> str:
        return self.key.partition("/")[0]

    @property
    def constrained(self) -> bool:
        """Whether where other pods are decides where this one may go (inter-pod terms, spread)."""
        return bool(self.affinity_terms or self.anti_affinity_terms or self.spread_constraints)

    def placed_on(self, node: str) -> PlacedPod:
        return PlacedPod(self.namespace, self.labels, node, self.anti_affinity_terms)

    def affinity(self) -> AffinityTerms:
        return AffinityTerms(self.namespace, self.labels, self.affinity_terms, self.anti_affinity_terms)

    def spread(self) -> SpreadPod:
        return SpreadPod(self.namespace, self.labels, self.spread_constraints, self.node_selector,
                         self.node_affinity, self.tolerations)

    def interpod_key(self) -> tuple[object, ...]:
        """Equal for pods the inter-pod filters treat alike."""
        return (self.namespace, frozenset(self.labels.items()), self.affinity_terms, self.anti_affinity_terms,
                self.spread_constraints, self.placement_key if self.spread_constraints else None)


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What the node filters need of one node: labels, allocatable in scheduler units (None: not checked),
    the taints that filter (NoSchedule, NoExecute), and whether it is cordoned."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    allocatable: Mapping[str, int] | None = None
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False

    @staticmethod
    def of(node: Node) -> NodeFacts:
        return NodeFacts(node.name, node.labels, allocatable_amounts(node.allocatable) if node.allocatable else None,
                         tuple(t for t in node.taints if t.effect in FILTERED_EFFECTS), node.unschedulable)


def static_reason(pod: PodFit, node: NodeFacts) -> str | None:
    """Why the pod can never run on the node, whatever runs there (None: it may)."""
    if node.unschedulable and not tolerates_unschedulable(pod.tolerations):
        return UNSCHEDULABLE
    if node.taints:
        taint = untolerated_taint(node.taints, pod.tolerations)
        if taint is not None:
            return untolerated(taint)
    if not matches_node_affinity(pod.node_selector, pod.node_affinity, node.labels, node.name):
        return AFFINITY_MISMATCH
    return None


def resource_reasons(pod: PodFit, node: NodeFacts, used: Mapping[str, int],
                     skipped: Collection[str] = ()) -> list[str]:
    """What the node lacks for the pod next to the pods already on it (`used`, with their count under
    `pods`); resources in `skipped` are not checked here (they are served by DRA devices)."""
    allocatable = node.allocatable
    if allocatable is None:
        return []
    reasons = []
    if PODS in allocatable and used.get(PODS, 0) + 1 > allocatable[PODS]:
        reasons.append(TOO_MANY_PODS)
    for name, wanted in pod.ordered:
        if wanted > allocatable.get(name, 0) - used.get(name, 0) and name not in skipped:
            reasons.append(insufficient(name))
    return reasons


@dataclass(frozen=True, slots=True)
class _Chain:
    """Planned pods, the last first; `anti_affinity`: whether any of them has required anti-affinity."""

    pod: PlacedPod
    rest: _Chain | None
    anti_affinity: bool

    @staticmethod
    def of(pod: PlacedPod, rest: _Chain | None) -> _Chain:
        return _Chain(pod, rest, bool(pod.anti_affinity) or (rest is not None and rest.anti_affinity))


class NodeUsage:
    """Per node, what the pods on it request (scheduler units) and how many they are (under `pods`).

    Immutable: `plus` returns a new usage that shares everything but the one node it changes, so a
    search can keep one per branch cheaply. The pods added by `plus` with their labels and terms are
    kept too (`placed`: planned, not bound; the inter-pod filters count them), in a chain each usage
    shares with the one it was made from. A usage of pods (`of_pods`) also keeps the counted pods by node,
    so that `updated` sums again only the nodes whose pods changed, from their own pods.
    """

    __slots__ = ("_base", "_by_node", "_changed", "_placed", "placed_anti_affinity")

    def __init__(self, base: Mapping[str, Mapping[str, int]] | None = None,
                 changed: Mapping[str, Mapping[str, int]] | None = None, placed: _Chain | None = None,
                 by_node: Mapping[str, Mapping[str, Pod]] | None = None) -> None:
        self._base = base or {}
        self._changed = changed or {}
        self._placed = placed
        self._by_node = by_node  # node -> pod key -> pod, of the pods counted in `_base` (None: not kept)
        # Whether a placed pod has required anti-affinity terms (then every pod's filters must look).
        self.placed_anti_affinity = placed is not None and placed.anti_affinity

    @property
    def placed(self) -> Iterator[PlacedPod]:
        """The pods added by `plus`, the last first."""
        link = self._placed
        while link is not None:
            yield link.pod
            link = link.rest

    def on(self, node: str) -> Mapping[str, int]:
        found = self._changed.get(node)
        return found if found is not None else self._base.get(node, _NONE)

    def plus(self, node: str, requests: Mapping[str, int], pod: PlacedPod | None = None) -> NodeUsage:
        """One more pod with `requests` on `node` (`pod`: what the inter-pod filters see of it)."""
        updated = dict(self.on(node))
        for name, amount in requests.items():
            updated[name] = updated.get(name, 0) + amount
        updated[PODS] = updated.get(PODS, 0) + 1
        return NodeUsage(self._base, {**self._changed, node: updated},
                         self._placed if pod is None else _Chain.of(pod, self._placed))

    def minus(self, node: str, requests: Mapping[str, int]) -> NodeUsage:
        """One pod with `requests` less on `node` (a pod about to be evicted)."""
        updated = dict(self.on(node))
        for name, amount in requests.items():
            updated[name] = max(0, updated.get(name, 0) - amount)
        updated[PODS] = max(0, updated.get(PODS, 0) - 1)
        return NodeUsage(self._base, {**self._changed, node: updated}, self._placed)

    def minus_all(self, pods: Iterable[tuple[str, Mapping[str, int]]]) -> NodeUsage:
        """`minus` for each (node, requests) in turn, in one new usage (not one per pod)."""
        copies: dict[str, dict[str, int]] = {}
        for node, requests in pods:
            updated = copies.get(node)
            if updated is None:
                updated = copies[node] = dict(self.on(node))
            for name, amount in requests.items():
                updated[name] = max(0, updated.get(name, 0) - amount)
            updated[PODS] = max(0, updated.get(PODS, 0) - 1)
        return NodeUsage(self._base, {**self._changed, **copies}, self._placed)

    def updated(self, before: Mapping[str, Pod], after: Mapping[str, Pod],
                changed: set[str] | None = None) -> NodeUsage:
        """This usage of the pods `before` (no pods added by `plus`) made the usage of the pods `after`:
        the nodes of the pods that changed (`changed`, their keys; None: found by comparing) are summed
        again from their own pods, the others shared."""
        assert not self._changed, "only a usage of pods can be updated"
        if changed is None:
            changed = {key for key, pod in after.items() if before.get(key) is not pod}
            changed.update(key for key, pod in before.items() if after.get(key) is not pod)
        by_node = self._by_node
        if by_node is None:  # not kept (a usage made by hand): sum the pods afresh
            return NodeUsage.of_pods(after.values())
        copies: dict[str, dict[str, Pod]] = {}
        for key in changed:
            old, new = before.get(key), after.get(key)
            if old is new:
                continue
            if old is not None and _counted(old):
                _pods_of(copies, by_node, old.node_name).pop(key, None)
            if new is not None and _counted(new):
                _pods_of(copies, by_node, new.node_name)[key] = new
        if not copies:
            return self
        base, nodes = dict(self._base), dict(by_node)
        for node, pods in copies.items():
            if pods:
                base[node], nodes[node] = _sum(pods.values()), pods
            else:
                base.pop(node, None)
                nodes.pop(node, None)
        return NodeUsage(base, by_node=nodes)

    @staticmethod
    def of_pods(pods: Iterable[Pod]) -> NodeUsage:
        """What the pods bound to nodes take there; pods that have succeeded or failed take nothing."""
        by_node: dict[str, dict[str, int]] = {}
        pods_by_node: dict[str, dict[str, Pod]] = {}
        with _REQUESTS.round() as requests_of:
            for pod in pods:
                if not _counted(pod):
                    continue
                used = by_node.get(pod.node_name)
                if used is None:
                    used = by_node[pod.node_name] = {}
                    pods_by_node[pod.node_name] = {}
                pods_by_node[pod.node_name][pod.key] = pod
                for name, amount in requests_of(pod).items():
                    used[name] = used.get(name, 0) + amount
                used[PODS] = used.get(PODS, 0) + 1
        return NodeUsage(by_node, by_node=pods_by_node)


def _counted(pod: Pod) -> bool:
    """Whether the pod takes room on a node: bound there and neither succeeded nor failed."""
    return bool(pod.node_name) and pod.phase not in TERMINAL_PHASES


def _pods_of(copies: dict[str, dict[str, Pod]], by_node: Mapping[str, Mapping[str, Pod]],
             node: str) -> dict[str, Pod]:
    """The pods on `node` in `copies`, copied there from `by_node` the first time (copy-on-write)."""
    found = copies.get(node)
    if found is None:
        found = copies[node] = dict(by_node.get(node, _NO_PODS))
    return found


def _sum(pods: Iterable[Pod]) -> dict[str, int]:
    used: dict[str, int] = {}
    for pod in pods:
        for name, amount in _REQUESTS.amounts(pod).items():
            used[name] = used.get(name, 0) + amount
        used[PODS] = used.get(PODS, 0) + 1
    return used


_NO_PODS: Mapping[str, Pod] = {}


class _RequestsMemo:
    """Scheduler amounts of the bound pods of the last snapshot, by pod object. Pods are immutable, and a
    reader that parses an unchanged pod once hands the same object to every snapshot, so most pods of a
    cluster are counted once, not once per cycle. Only the last round's pods are kept."""

    def __init__(self) -> None:
        self._last: dict[int, tuple[Pod, Mapping[str, int]]] = {}

    @contextmanager
    def round(self) -> Iterator[Callable[[Pod], Mapping[str, int]]]:
        previous, current = self._last, {}

        def requests_of(pod: Pod) -> Mapping[str, int]:
            known = previous.get(id(pod))
            amounts = known[1] if known is not None and known[0] is pod else scheduler_amounts(pod_requests(pod))
            current[id(pod)] = (pod, amounts)
            return amounts

        yield requests_of
        self._last = current

    def amounts(self, pod: Pod) -> Mapping[str, int]:
        known = self._last.get(id(pod))
        return known[1] if known is not None and known[0] is pod else scheduler_amounts(pod_requests(pod))


_REQUESTS = _RequestsMemo()


def pod_amounts(pod: Pod) -> Mapping[str, int]:
    """What the pod takes on its node in scheduler units (`scheduler_amounts(pod_requests(pod))`), as the last
    count of bound pods found it (`NodeUsage.of_pods`) where that count had this very pod."""
    return _REQUESTS.amounts(pod)


class NodeFitIndex:
    """The node side of the node filters for one snapshot, computed once: every node's facts, what the
    pods bound to nodes use, the required anti-affinity terms they hold (InterPodAffinity) and which
    extended resources a DeviceClass serves (KEP 5004)."""

    def __init__(self, nodes: Iterable[Node] = (), pods: Iterable[Pod] = (),
                 classes: Iterable[DeviceClass] = ()) -> None:
        self.nodes: dict[str, NodeFacts] = {n.name: NodeFacts.of(n) for n in nodes}
        pods = tuple(pods)
        self.usage = NodeUsage.of_pods(pods)
        self.anti_affinity = ExistingAntiAffinity.of_pods(pods)
        self._pods: Iterable[Pod] = pods
        self._interpod: dict[tuple[object, ...], tuple[AffinityCounts, SpreadCounts | None]] = {}
        self._node_labels: dict[str, Mapping[str, str]] | None = None
        # Extended resources a DeviceClass serves (KEP 5004), with the class.
        self.dra_classes: dict[str, DeviceClass] = served_resources(classes)
        self._static: dict[tuple[object, ...], tuple[tuple[str, ...], Mapping[str, str]]] = {}

    def updated(self, nodes: tuple[Mapping[str, Node], Mapping[str, Node]] | None,
                pods: tuple[Mapping[str, Pod], Mapping[str, Pod]] | None,
                changed_pods: set[str] | None = None) -> NodeFitIndex:
        """The index of the next snapshot, copy-on-write: `nodes` the (previous, new) nodes by name, `pods`
        the (previous, new) pods by key (None: unchanged). Only the nodes whose facts or pods
        changed are computed again; the answers of `static_filter` are kept while no node changed."""
        other = NodeFitIndex.__new__(NodeFitIndex)
        other.dra_classes = self.dra_classes
        other.nodes, other._static = self.nodes, self._static
        other._node_labels = self._node_labels
        anti_affinity = self.anti_affinity
        if nodes is not None:
            before, after = nodes
            changed = [name for name, node in after.items() if before.get(name) is not node]
            if changed or before.keys() != after.keys():
                other.nodes = {name: self.nodes[name] if before.get(name) is node and name in self.nodes
                               else NodeFacts.of(node) for name, node in after.items()}
                other._static = {}
                other._node_labels = None
                anti_affinity = ExistingAntiAffinity(anti_affinity.holders)  # its answers read the nodes' labels
        other.usage = self.usage if pods is None else self.usage.updated(*pods, changed_pods)
        other._pods = self._pods if pods is None else pods[1].values()
        other._interpod = self._interpod if pods is None and other._static is self._static else {}
        other.anti_affinity = anti_affinity if pods is None else anti_affinity.updated(*pods, changed_pods)
        return other

    def anti_affinity_rejected(self, pod: PodFit) -> frozenset[str]:
        """The nodes where bound pods' required anti-affinity keeps this pod out (InterPodAffinity)."""
        if not self.anti_affinity.holders:
            return frozenset()
        if self._node_labels is None:
            self._node_labels = {name: facts.labels for name, facts in self.nodes.items()}
        return self.anti_affinity.rejected(pod.namespace, pod.labels, self._node_labels)

    def static_filter(self, pod: PodFit) -> tuple[tuple[str, ...], Mapping[str, str]]:
        """The nodes (by name) where pods like this one may run whatever runs there, and why every other
        node fails; answered once per kind of pod for the snapshot's lifetime."""
        key = pod.placement_key
        found = self._static.get(key)
        if found is None:
            nodes: list[str] = []
            rejected: dict[str, str] = {}
            for name in sorted(self.nodes):
                reason = static_reason(pod, self.nodes[name])
                if reason is None:
                    nodes.append(name)
                else:
                    rejected[name] = reason
            self._static[key] = found = (tuple(nodes), rejected)
        return found

    def dra_served(self, pod: PodFit, node: NodeFacts) -> tuple[str, ...]:
        """Extended resources the pod requests that this node would get from DRA devices: a DeviceClass
        serves them and the node does not list them (with DRAExtendedResource on)."""
        if not self.dra_classes:
            return ()
        allocatable = node.allocatable or _NONE
        return tuple(name for name in pod.requests if name in self.dra_classes and not allocatable.get(name))

    def reasons(self, pod: PodFit, node: str, usage: NodeUsage | None = None,
                extended_resource: bool = False) -> list[str]:
        """Every reason the pod does not fit the node (empty: it fits), in the scheduler's order: the static
        one, else the resources, else existing pods' anti-affinity. With DRAExtendedResource, resources DRA
        devices would serve on this node are left to the allocator."""
        facts = self.nodes[node]
        static = static_reason(pod, facts)
        if static is not None:
            return [static]
        delegated = self.dra_served(pod, facts) if extended_resource else ()
        reasons = resource_reasons(pod, facts, (usage or self.usage).on(node), delegated)
        if not reasons and node in self.anti_affinity_rejected(pod):
            reasons.append(EXISTING_ANTI_AFFINITY)
        return reasons

    def _bound_counts(self, pod: PodFit) -> tuple[AffinityCounts, SpreadCounts | None]:
        """What the bound pods count for the pod's inter-pod filters (their anti-affinity against it is
        `anti_affinity_rejected`'s), once per kind of pod and snapshot."""
        key = pod.interpod_key()
        found = self._interpod.get(key)
        if found is None:
            terms = pod.affinity()
            counts = AffinityCounts()
            bound = [(p, labels) for p in map(placed_pod, self._pods)
                     if p is not None and (labels := self._labels_of(p.node)) is not None]
            if terms.affinity or terms.anti_affinity:
                for other, labels in bound:
                    counts.add(terms, other, labels, existing=False)
            spread = None
            if pod.spread_constraints:
                nodes = ((name, facts.labels, facts.taints) for name, facts in self.nodes.items())
                spread = spread_counts(pod.spread(), nodes, bound)
            self._interpod[key] = found = (counts, spread)
        return found

    def _labels_of(self, node: str) -> Mapping[str, str] | None:
        facts = self.nodes.get(node)
        return None if facts is None else facts.labels

    def interpod_counts(self, pod: PodFit, usage: NodeUsage) -> tuple[AffinityCounts, SpreadCounts | None]:
        """The inter-pod counts for the pod of the bound pods and the pods planned in `usage`."""
        base_counts, base_spread = self._bound_counts(pod)
        terms, counts = pod.affinity(), base_counts.copy()
        spread_pod, spread = pod.spread(), base_spread.copy() if base_spread is not None else None
        for other in usage.placed:
            labels = self._labels_of(other.node)
            if labels is None:
                continue
            counts.add(terms, other, labels)
            if spread is not None:
                spread.add(spread_pod, other, labels)
        return counts, spread

    def interpod_check(self, pod: PodFit, usage: NodeUsage) -> Callable[[str], str | None] | None:
        """Why PodTopologySpread or InterPodAffinity reject the pod on a node (by name; None: they pass),
        next to the bound pods and the pods planned in `usage`; None when neither can (the pod has no
        such constraint and no planned pod has anti-affinity). The bound pods' own anti-affinity is
        `anti_affinity_rejected`'s."""
        if not pod.constrained and not usage.placed_anti_affinity:
            return None
        terms, spread_pod = pod.affinity(), pod.spread()
        counts, spread = self.interpod_counts(pod, usage)
        smallest = smallest_counts(spread_pod, spread) if spread is not None else None
        nodes = self.nodes

        def reason(name: str) -> str | None:
            labels = nodes[name].labels
            found = spread_reason(spread_pod, spread, labels, smallest) if spread is not None else None
            return found or interpod_reason(terms, counts, labels)

        return reason

    def interpod_rejected(self, pod: PodFit, usage: NodeUsage, nodes: Iterable[str]) -> dict[str, str]:
        """Of `nodes`, those `interpod_check` rejects the pod on, with the reason."""
        check = self.interpod_check(pod, usage)
        if check is None:
            return {}
        return {name: found for name in nodes if (found := check(name)) is not None}
