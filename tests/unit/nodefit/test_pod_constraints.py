"""InterPodAffinity, the incoming pod's side, and PodTopologySpread (DoNotSchedule), on nodes a and b in
zone z1 and c in zone z2 (d, where present, has no zone). Each case is worked out by hand from the
scheduler's filters."""

from __future__ import annotations

from typing import Any

import pytest

from admission.core.models import LabelSelector, Node, Pod
from admission.core.models.pod import PodAffinityTerm
from admission.core.nodefit import (
    AFFINITY_UNMET,
    ANTI_AFFINITY_UNMET,
    EXISTING_ANTI_AFFINITY,
    SPREAD_LABEL_MISSING,
    SPREAD_UNMET,
    NodeFitIndex,
    NodeUsage,
    PodFit,
)
from admission.core.nodefit.interpod import PlacedPod
from tests.support.builders import Manifest, models, node, pod, taint, toleration, with_spec

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
NODES = [node("a", {ZONE: "z1", HOST: "a"}), node("b", {ZONE: "z1", HOST: "b"}), node("c", {ZONE: "z2", HOST: "c"})]
NO_ZONE = node("d", {HOST: "d"})
WEB = {"matchLabels": {"app": "web"}}
DB = {"matchLabels": {"app": "db"}}


def term(selector: dict[str, Any] | None, topology: str = ZONE, **fields: Any) -> dict[str, Any]:
    return {"topologyKey": topology, **({"labelSelector": selector} if selector is not None else {}), **fields}


def bound(name: str, on: str, namespace: str = "default", phase: str = "Running", **labels: str) -> Manifest:
    return pod(name, namespace, labels=labels, node=on, phase=phase)


def incoming(labels: dict[str, str], namespace: str = "default", **spec: Any) -> PodFit:
    found = models(with_spec(pod("new", namespace, labels=labels), **spec))[0]
    assert isinstance(found, Pod)
    return PodFit.of(found)


def required(kind: str, *terms: dict[str, Any]) -> dict[str, Any]:
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def rejected(fit: PodFit, *manifests: Manifest, nodes: list[Manifest] = NODES,
             usage: NodeUsage | None = None) -> dict[str, str]:
    objects = models(*nodes, *manifests)
    index = NodeFitIndex([m for m in objects if isinstance(m, Node)], [m for m in objects if isinstance(m, Pod)])
    return index.interpod_rejected(fit, usage or NodeUsage(), sorted(index.nodes))


# ----- pod affinity ---------------------------------------------------------------------------------------
def test_affinity_needs_a_matching_pod_in_the_nodes_domain() -> None:
    fit = incoming({"app": "web"}, affinity=required("podAffinity", term(DB)))
    assert rejected(fit, bound("db", "a", app="db")) == {"c": AFFINITY_UNMET}


def test_a_node_without_the_topology_key_fails_affinity_even_for_the_first_pod() -> None:
    fit = incoming({"app": "web"}, affinity=required("podAffinity", term(WEB)))
    assert rejected(fit, nodes=[*NODES, NO_ZONE]) == {"d": AFFINITY_UNMET}


def test_the_first_pod_affine_to_itself_goes_anywhere_but_only_if_it_matches_its_terms() -> None:
    assert rejected(incoming({"app": "web"}, affinity=required("podAffinity", term(WEB)))) == {}
    everywhere = {name: AFFINITY_UNMET for name in "abc"}
    assert rejected(incoming({"app": "api"}, affinity=required("podAffinity", term(WEB)))) == everywhere


def test_once_a_matching_pod_exists_the_exception_is_gone() -> None:
    fit = incoming({"app": "web"}, affinity=required("podAffinity", term(WEB)))
    assert rejected(fit, bound("w", "c", app="web")) == {"a": AFFINITY_UNMET, "b": AFFINITY_UNMET}
    # A finished pod is not seen: the exception holds again.
    assert rejected(fit, bound("w", "c", phase="Succeeded", app="web")) == {}


def test_the_pods_counted_for_affinity_match_all_the_terms() -> None:
    terms = required("podAffinity", term(DB), term({"matchLabels": {"tier": "x"}}, HOST))
    # db on a, tier=x on c: no pod matches both terms, so nothing counts; the pod does not match them itself.
    fit = incoming({"app": "web"}, affinity=terms)
    assert rejected(fit, bound("db", "a", app="db"), bound("x", "c", tier="x")) == \
        {name: AFFINITY_UNMET for name in "abc"}
    # One pod matching both, on b: the zone term is met on a and b, the host term on b only.
    assert rejected(fit, bound("both", "b", app="db", tier="x")) == {"a": AFFINITY_UNMET, "c": AFFINITY_UNMET}


def test_affinity_terms_select_pods_of_their_namespaces() -> None:
    db_elsewhere = bound("db", "a", namespace="other", app="db")
    own_namespace = incoming({"app": "web"}, affinity=required("podAffinity", term(DB)))
    assert rejected(own_namespace, db_elsewhere) == {name: AFFINITY_UNMET for name in "abc"}
    named = incoming({"app": "web"}, affinity=required("podAffinity", term(DB, namespaces=["other"])))
    assert rejected(named, db_elsewhere) == {"c": AFFINITY_UNMET}
    every = incoming({"app": "web"}, affinity=required("podAffinity", term(DB, namespaceSelector={})))
    assert rejected(every, db_elsewhere) == {"c": AFFINITY_UNMET}


def test_a_term_without_a_label_selector_selects_no_pod() -> None:
    fit = incoming({"app": "web"}, affinity=required("podAffinity", term(None)))
    assert rejected(fit, bound("db", "a", app="db")) == {name: AFFINITY_UNMET for name in "abc"}


# ----- pod anti-affinity ----------------------------------------------------------------------------------
def test_anti_affinity_keeps_the_pod_out_of_the_domains_of_the_pods_it_selects() -> None:
    fit = incoming({"app": "web"}, affinity=required("podAntiAffinity", term(DB)))
    assert rejected(fit, bound("db", "a", app="db"), nodes=[*NODES, NO_ZONE]) == \
        {"a": ANTI_AFFINITY_UNMET, "b": ANTI_AFFINITY_UNMET}
    assert rejected(fit, bound("db", "a", namespace="other", app="db")) == {}


def test_affinity_is_checked_before_anti_affinity() -> None:
    fit = incoming({"app": "web"}, affinity={**required("podAffinity", term(DB, HOST)),
                                             **required("podAntiAffinity", term(DB))})
    assert rejected(fit, bound("db", "a", app="db")) == \
        {"a": ANTI_AFFINITY_UNMET, "b": AFFINITY_UNMET, "c": AFFINITY_UNMET}


def test_planned_pods_count_like_bound_ones_both_ways() -> None:
    anti = (PodAffinityTerm(ZONE, LabelSelector((("app", "web"),))),)
    holder = NodeUsage().plus("c", {}, PlacedPod("default", {"app": "db"}, "c", anti))
    assert rejected(incoming({"app": "web"}), usage=holder) == {"c": EXISTING_ANTI_AFFINITY}
    assert rejected(incoming({"app": "api"}), usage=holder) == {}
    affine = incoming({"app": "api"}, affinity=required("podAffinity", term(DB)))
    assert rejected(affine, usage=holder) == {"a": AFFINITY_UNMET, "b": AFFINITY_UNMET}


# ----- topology spread ------------------------------------------------------------------------------------
def spread(selector: dict[str, Any] | None = WEB, topology: str = ZONE, max_skew: int = 1,
           **fields: Any) -> list[dict[str, Any]]:
    return [{"maxSkew": max_skew, "topologyKey": topology, "whenUnsatisfiable": "DoNotSchedule",
             **({"labelSelector": selector} if selector is not None else {}), **fields}]


def test_the_skew_counts_the_pod_itself_when_it_matches() -> None:
    fit = incoming({"app": "web"}, topologySpreadConstraints=spread())
    assert rejected(fit, bound("w", "a", app="web")) == {"a": SPREAD_UNMET, "b": SPREAD_UNMET}
    other = incoming({"app": "api"}, topologySpreadConstraints=spread())
    assert rejected(other, bound("w", "a", app="web")) == {}
    assert rejected(fit, bound("w", "a", app="web"), bound("w2", "c", app="web")) == {}
    assert rejected(incoming({"app": "web"}, topologySpreadConstraints=spread(max_skew=2)),
                    bound("w", "a", app="web")) == {}


def test_only_pods_of_the_own_namespace_matching_the_selector_count() -> None:
    fit = incoming({"app": "web"}, topologySpreadConstraints=spread())
    assert rejected(fit, bound("w", "a", namespace="other", app="web"), bound("x", "a", app="api")) == {}
    assert rejected(incoming({"app": "web"}, topologySpreadConstraints=spread(None)), bound("w", "a", app="web")) == {}


def test_fewer_domains_than_min_domains_make_the_smallest_count_zero() -> None:
    pods = (bound("w", "a", app="web"), bound("w2", "c", app="web"))
    assert rejected(incoming({"app": "web"}, topologySpreadConstraints=spread(minDomains=3)), *pods) == \
        {name: SPREAD_UNMET for name in "abc"}
    assert rejected(incoming({"app": "web"}, topologySpreadConstraints=spread(minDomains=2)), *pods) == {}


def test_nodes_without_the_key_are_no_domain_and_fail() -> None:
    fit = incoming({"app": "web"}, topologySpreadConstraints=spread())
    assert rejected(fit, bound("w", "d", app="web"), nodes=[*NODES, NO_ZONE]) == {"d": SPREAD_LABEL_MISSING}


def test_node_affinity_policy_honor_leaves_nodes_the_pod_may_not_use_out_of_the_domains() -> None:
    pods = (bound("w", "a", app="web"),)
    honor = incoming({"app": "web"}, nodeSelector={ZONE: "z1"}, topologySpreadConstraints=spread())
    assert rejected(honor, *pods) == {}  # z2 is no domain: the smallest count is z1's own
    ignore = incoming({"app": "web"}, nodeSelector={ZONE: "z1"},
                      topologySpreadConstraints=spread(nodeAffinityPolicy="Ignore"))
    assert rejected(ignore, *pods) == {"a": SPREAD_UNMET, "b": SPREAD_UNMET}


def test_node_taints_policy_honor_leaves_untolerated_nodes_out_of_the_domains() -> None:
    tainted = [*NODES[:2], with_spec(NODES[2], taints=[taint("dedicated", "x")])]
    pods = (bound("w", "a", app="web"),)
    ignore = incoming({"app": "web"}, topologySpreadConstraints=spread())
    assert rejected(ignore, *pods, nodes=tainted) == {"a": SPREAD_UNMET, "b": SPREAD_UNMET}
    honor = incoming({"app": "web"}, topologySpreadConstraints=spread(nodeTaintsPolicy="Honor"))
    assert rejected(honor, *pods, nodes=tainted) == {}
    tolerating = incoming({"app": "web"}, tolerations=[toleration("dedicated", "x")],
                          topologySpreadConstraints=spread(nodeTaintsPolicy="Honor"))
    assert rejected(tolerating, *pods, nodes=tainted) == {"a": SPREAD_UNMET, "b": SPREAD_UNMET}


def test_planned_pods_count_for_the_spread() -> None:
    fit = incoming({"app": "web"}, topologySpreadConstraints=spread())
    usage = NodeUsage().plus("c", {}, PlacedPod("default", {"app": "web"}, "c"))
    assert rejected(fit, bound("w", "a", app="web"), usage=usage) == {}
    assert rejected(fit, usage=usage) == {"c": SPREAD_UNMET}


@pytest.mark.parametrize("constraints", [spread(), spread(topology=HOST)])
def test_a_pod_without_constraints_is_not_looked_at(constraints: list[dict[str, Any]]) -> None:
    assert rejected(incoming({"app": "web"}), bound("w", "a", app="web")) == {}
    assert incoming({"app": "web"}, topologySpreadConstraints=constraints).constrained
