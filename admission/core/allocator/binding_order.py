"""Whether the members' required pod affinity holds in every order the scheduler may bind them.

The scheduler binds a group's members one at a time, in an order draq does not choose. Required pod
anti-affinity (both the member's terms and the terms of pods already there) only ever rejects more as
pods are added, and the rejection is symmetric in a pair of pods, so a plan in which no pair conflicts
fits in every order. Topology spread is checked by the gang search in its own order; a member the
scheduler takes earlier than planned is rejected and tried again when other pods bind (see
docs/operator.md, Node fit). Required pod affinity is the case worked out here: a member fits when, for
every term, a pod matching all its terms is bound in the node's domain of that term, or when no pod
matching all its terms exists at all and the member matches them itself (the first pod of a group
affine to itself). So, with B the pods not of the group (bound, or planned for admitted groups):

- if a pod of B matches all the member's terms, or the member does not match them itself, B alone
  must meet every term on its planned node (the member may be bound first);
- otherwise the member fits first by the exception, and once any member p matching all its terms is
  bound, B and p must meet every term (each bound member only adds pods that count, so the single p
  are the tightest cases).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from admission.core.nodefit import NodeFitIndex, NodeUsage, PodFit
from admission.core.nodefit.interpod import AffinityCounts, AffinityTerms

if TYPE_CHECKING:
    from admission.core.allocator.gang import GangMember


def affinity_order_problem(index: NodeFitIndex, members: Sequence[GangMember], placements: Mapping[str, str],
                           outside: NodeUsage) -> str | None:
    """Why a member's required pod affinity may fail in some binding order of the plan, or None."""
    placed = [(m.fit, placements[m.key]) for m in members if m.fit is not None]
    for fit, node in placed:
        if not fit.affinity_terms:
            continue
        problem = _member_problem(index, fit, node, placed, outside)
        if problem is not None:
            return problem
    return None


def _member_problem(index: NodeFitIndex, fit: PodFit, node: str, placed: Sequence[tuple[PodFit, str]],
                    outside: NodeUsage) -> str | None:
    terms = fit.affinity()
    labels = index.nodes[node].labels
    counts, _ = index.interpod_counts(fit, outside)
    if counts.affinity or not terms.matches_itself:
        if _all_terms_met(terms, counts, labels):
            return None
        return (f"pod {fit.key} on node {node}: its required pod affinity is met only by other members of its "
                "group, and the scheduler may bind it before them (it binds members one by one, in its own "
                "order); draq admits only plans that hold in every order")
    for other, other_node in placed:
        if other is fit:
            continue
        as_placed = other.placed_on(other_node)
        if not terms.matches_all(as_placed):
            continue
        with_other = counts.copy()
        other_labels = index.nodes[other_node].labels
        with_other.add(terms, as_placed, other_labels)
        if not _all_terms_met(terms, with_other, labels):
            return (f"pod {fit.key} on node {node}: if the scheduler binds {other.key} (on node {other_node}) "
                    "first, its required pod affinity is no longer met by itself, and nothing meets it on "
                    f"node {node}")
    return None


def _all_terms_met(terms: AffinityTerms, counts: AffinityCounts, labels: Mapping[str, str]) -> bool:
    """Every term has a pod matching all terms in the node's domain of the term."""
    for term in terms.affinity:
        value = labels.get(term.topology_key)
        if value is None or counts.affinity.get((term.topology_key, value), 0) <= 0:
            return False
    return True
