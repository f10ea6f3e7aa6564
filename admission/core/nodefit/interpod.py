"""InterPodAffinity: required pod affinity and anti-affinity, both the incoming pod's and the existing pods'.

The existing pods' side (`ExistingAntiAffinity`, answered once per kind of pod for a snapshot's bound pods):

A pod bound to a node with a required pod anti-affinity term holds the term's topology domain: the
nodes whose label `topologyKey` has the value its own node has (none when its node lacks the label).
The scheduler rejects an incoming pod on every node of such a domain when the term selects it: its
namespace is one the term names (`namespaces`, or the owner's namespace when neither `namespaces`
nor `namespaceSelector` is set) and its labels match `labelSelector` (an absent selector selects
nothing, an empty one everything). Pods that succeeded or failed are not counted, as the scheduler
does not see them; nor are pods on nodes draq does not know.

`namespaceSelector` needs the namespaces' labels, which the node fit does not read: an empty one
selects every namespace, as in the scheduler; any other is taken to select every namespace too, so
draq may keep a pod off a node the scheduler would accept, never the reverse.

The incoming pod's side and the pods planned but not bound yet (`AffinityCounts`, `interpod_reason`),
as the scheduler's filter decides on a node:

- affinity: the node has every term's topology key, and for every term some pod matching *all* the
  terms runs in the node's domain of that term; or else no pod at all matches all the terms and the
  pod matches its own terms (the first pod of a group that is affine to itself);
- anti-affinity: for no term does a pod the term selects run in the node's domain (a node without
  the key is no domain and passes);
- and no existing pod's anti-affinity term selects the pod in the node's domain.

A term selects pods in its namespaces (`namespaces`, the namespaces `namespaceSelector` selects, or
the owner's namespace when both are unset) whose labels match `labelSelector` (nil: none), with
`matchLabelKeys`/`mismatchLabelKeys` merged in when the pod is parsed. An own anti-affinity term with a
non-empty `namespaceSelector` is taken to select every namespace (as above); an own affinity term with
one is not evaluated (the cycle says so).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from admission.core.models.pod import Pod, PodAffinityTerm

EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
AFFINITY_UNMET = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_UNMET = "node(s) didn't match pod anti-affinity rules"
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
_NO_NODES: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class BoundTerms:
    """The required anti-affinity terms of one bound pod, with its namespace and node."""

    namespace: str
    node: str
    terms: tuple[PodAffinityTerm, ...]


def bound_terms(pod: Pod) -> BoundTerms | None:
    """What a pod holds against others, or None (no required anti-affinity, not bound, or finished)."""
    if not pod.anti_affinity_terms or not pod.node_name or pod.phase in TERMINAL_PHASES:
        return None
    return BoundTerms(pod.namespace, pod.node_name, pod.anti_affinity_terms)


def selects(term: PodAffinityTerm, owner_namespace: str, namespace: str, labels: Mapping[str, str]) -> bool:
    """Whether an existing pod's term (the pod in `owner_namespace`) selects a pod in `namespace` with
    `labels`; a non-empty namespaceSelector is taken to select every namespace (see above)."""
    if term.label_selector is None or not term.label_selector.matches(labels):
        return False
    if term.namespace_selector is not None:
        return True  # empty: every namespace; otherwise not evaluated, taken as every namespace
    return namespace in (term.namespaces or (owner_namespace,))


def blocked_domains(holders: Iterable[BoundTerms], node_labels: Mapping[str, Mapping[str, str]],
                    namespace: str, labels: Mapping[str, str]) -> dict[str, frozenset[str]]:
    """The topology domains (label key -> values) the existing pods' terms keep a pod with `namespace`
    and `labels` out of."""
    domains: dict[str, set[str]] = {}
    for holder in holders:
        own = node_labels.get(holder.node)
        if own is None:
            continue
        for term in holder.terms:
            value = own.get(term.topology_key)
            if value is not None and selects(term, holder.namespace, namespace, labels):
                domains.setdefault(term.topology_key, set()).add(value)
    return {key: frozenset(values) for key, values in domains.items()}


def rejected_nodes(holders: Iterable[BoundTerms], node_labels: Mapping[str, Mapping[str, str]],
                   namespace: str, labels: Mapping[str, str]) -> frozenset[str]:
    """The nodes where the scheduler's InterPodAffinity filter rejects the pod for existing pods'
    required anti-affinity."""
    domains = blocked_domains(holders, node_labels, namespace, labels)
    if not domains:
        return _NO_NODES
    return frozenset(name for name, own in node_labels.items()
                     if any(own.get(key) in values for key, values in domains.items()))


class ExistingAntiAffinity:
    """The required anti-affinity terms of a snapshot's bound pods (by pod key), and per kind of incoming
    pod (namespace, labels) the nodes they keep it out of, answered once."""

    __slots__ = ("_answers", "holders")

    def __init__(self, holders: Mapping[str, BoundTerms] | None = None) -> None:
        self.holders: Mapping[str, BoundTerms] = holders or {}
        self._answers: dict[tuple[str, frozenset[tuple[str, str]]], frozenset[str]] = {}

    @staticmethod
    def of_pods(pods: Iterable[Pod]) -> ExistingAntiAffinity:
        return ExistingAntiAffinity({pod.key: found for pod in pods if (found := bound_terms(pod)) is not None})

    def updated(self, before: Mapping[str, Pod], after: Mapping[str, Pod],
                changed: set[str] | None = None) -> ExistingAntiAffinity:
        """The terms of the pods `after`, from these of the pods `before`: only the pods that changed
        (`changed`, their keys; None: found by comparing) are looked at again."""
        if changed is None:
            changed = {key for key, pod in after.items() if before.get(key) is not pod}
            changed.update(key for key in before if key not in after)
        holders = dict(self.holders)
        for key in changed:
            pod = after.get(key)
            found = bound_terms(pod) if pod is not None else None
            if found is None:
                holders.pop(key, None)
            else:
                holders[key] = found
        return ExistingAntiAffinity(holders)

    def rejected(self, namespace: str, labels: Mapping[str, str],
                 node_labels: Mapping[str, Mapping[str, str]]) -> frozenset[str]:
        """The nodes the pod may not go on (empty when no bound pod has a required anti-affinity term).
        The answers are kept for the given nodes: a caller passes the same nodes for one index."""
        if not self.holders:
            return _NO_NODES
        key = (namespace, frozenset(labels.items()))
        found = self._answers.get(key)
        if found is None:
            found = self._answers[key] = rejected_nodes(self.holders.values(), node_labels, namespace, labels)
        return found


@dataclass(frozen=True, slots=True)
class PlacedPod:
    """A pod on a node (bound, or planned there) as the inter-pod filters see it."""

    namespace: str
    labels: Mapping[str, str]
    node: str
    anti_affinity: tuple[PodAffinityTerm, ...] = ()


def placed_pod(pod: Pod) -> PlacedPod | None:
    """The pod as it counts for others, or None (not bound, or finished)."""
    if not pod.node_name or pod.phase in TERMINAL_PHASES:
        return None
    return PlacedPod(pod.namespace, pod.labels, pod.node_name, pod.anti_affinity_terms)


@dataclass(frozen=True, slots=True)
class AffinityTerms:
    """The incoming pod's side: its namespace, labels and required (anti-)affinity terms."""

    namespace: str
    labels: Mapping[str, str]
    affinity: tuple[PodAffinityTerm, ...] = ()
    anti_affinity: tuple[PodAffinityTerm, ...] = ()

    def matches_all(self, other: PlacedPod) -> bool:
        return all(selects(t, self.namespace, other.namespace, other.labels) for t in self.affinity)

    @property
    def matches_itself(self) -> bool:
        return all(selects(t, self.namespace, self.namespace, self.labels) for t in self.affinity)


Pair = tuple[str, str]  # (topology key, value)


@dataclass(slots=True)
class AffinityCounts:
    """Per topology pair, for one incoming pod: the pods matching all its affinity terms, the pods its
    anti-affinity terms select, and the pods whose anti-affinity terms select it."""

    affinity: dict[Pair, int] = field(default_factory=dict)
    anti_affinity: dict[Pair, int] = field(default_factory=dict)
    existing_anti_affinity: dict[Pair, int] = field(default_factory=dict)

    def copy(self) -> AffinityCounts:
        return AffinityCounts(dict(self.affinity), dict(self.anti_affinity), dict(self.existing_anti_affinity))

    def add(self, pod: AffinityTerms, other: PlacedPod, labels: Mapping[str, str], existing: bool = True) -> None:
        """Count `other`, on a node with `labels`; `existing`: its own anti-affinity terms too (False when
        `ExistingAntiAffinity` already answers for them)."""
        if pod.affinity and pod.matches_all(other):
            for term in pod.affinity:
                _bump(self.affinity, term.topology_key, labels)
        for term in pod.anti_affinity:
            if selects(term, pod.namespace, other.namespace, other.labels):
                _bump(self.anti_affinity, term.topology_key, labels)
        if existing:
            for term in other.anti_affinity:
                if selects(term, other.namespace, pod.namespace, pod.labels):
                    _bump(self.existing_anti_affinity, term.topology_key, labels)


def _bump(counts: dict[Pair, int], key: str, labels: Mapping[str, str]) -> None:
    value = labels.get(key)
    if value is not None:
        counts[(key, value)] = counts.get((key, value), 0) + 1


def affinity_met(pod: AffinityTerms, counts: AffinityCounts, labels: Mapping[str, str]) -> bool:
    """Whether the pod's required affinity lets it on a node with `labels`."""
    present = True
    for term in pod.affinity:
        value = labels.get(term.topology_key)
        if value is None:
            return False
        if counts.affinity.get((term.topology_key, value), 0) <= 0:
            present = False
    return present or (not counts.affinity and pod.matches_itself)


def interpod_reason(pod: AffinityTerms, counts: AffinityCounts, labels: Mapping[str, str]) -> str | None:
    """Why InterPodAffinity rejects the pod on a node with `labels`, in the scheduler's words (None: it
    passes), in the scheduler's order: its affinity, its anti-affinity, the existing pods' anti-affinity."""
    if pod.affinity and not affinity_met(pod, counts, labels):
        return AFFINITY_UNMET
    for term in pod.anti_affinity:
        value = labels.get(term.topology_key)
        if value is not None and counts.anti_affinity.get((term.topology_key, value), 0) > 0:
            return ANTI_AFFINITY_UNMET
    for (key, value), count in counts.existing_anti_affinity.items():
        if count > 0 and labels.get(key) == value:
            return EXISTING_ANTI_AFFINITY
    return None
