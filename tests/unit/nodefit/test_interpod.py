"""InterPodAffinity, existing pods' side: a bound pod's required anti-affinity keeps the pods it selects out
of its topology domain. Cases checked by hand: three nodes, a and b in zone z1, c in zone z2."""

from __future__ import annotations

from typing import Any

import pytest

from admission.core.allocator import Allocator, KnownUnfit, Snapshot, members_for, place_gang
from admission.core.errors import InvalidInput
from admission.core.features import exactly
from admission.core.models import Node, Pod
from admission.core.nodefit import EXISTING_ANTI_AFFINITY, NodeFitIndex, PodFit
from tests.support.builders import Manifest, container, models, node, pod, with_spec

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
NODES = [node("a", {ZONE: "z1", HOST: "a"}, allocatable={"cpu": "4", "pods": "10"}),
         node("b", {ZONE: "z1", HOST: "b"}, allocatable={"cpu": "4", "pods": "10"}),
         node("c", {ZONE: "z2", HOST: "c"}, allocatable={"cpu": "4", "pods": "10"})]


def term(topology: str = ZONE, selector: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"topologyKey": topology, **fields}
    if selector is not None:
        entry["labelSelector"] = selector
    return entry


def holder(*terms: dict[str, Any], on: str = "a", namespace: str = "default", phase: str = "Running") -> Manifest:
    """A pod bound to `on` with these required anti-affinity terms."""
    return with_spec(pod("holder", namespace, labels={"app": "db"}, node=on, phase=phase),
                     affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}})


WEB = {"matchLabels": {"app": "web"}}


def index_of(*manifests: Manifest) -> NodeFitIndex:
    objects = models(*NODES, *manifests)
    return NodeFitIndex([m for m in objects if isinstance(m, Node)], [m for m in objects if isinstance(m, Pod)])


def incoming(namespace: str = "default", **labels: str) -> PodFit:
    found = models(pod("new", namespace, labels=labels))[0]
    assert isinstance(found, Pod)
    return PodFit.of(found)


def test_the_terms_are_parsed() -> None:
    parsed = models(holder(term(selector={"matchLabels": {"app": "web"},
                                          "matchExpressions": [{"key": "tier", "operator": "Exists"}]},
                                namespaces=["x"], namespaceSelector={})))[0]
    assert isinstance(parsed, Pod) and len(parsed.anti_affinity_terms) == 1
    (found,) = parsed.anti_affinity_terms
    assert found.topology_key == ZONE and found.namespaces == ("x",)
    assert found.label_selector is not None and found.label_selector.matches({"app": "web", "tier": "1"})
    assert not found.label_selector.matches({"app": "web"})
    assert found.namespace_selector is not None and found.namespace_selector.matches({})


@pytest.mark.parametrize(("selectors", "field"), [
    ({"labelSelector": {"matchExpressions": [{"key": "app", "operator": "Bogus", "values": ["web"]}]}},
     "labelSelector.matchExpressions[0].operator"),
    ({"labelSelector": WEB, "namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In"}]}},
     "namespaceSelector.matchExpressions[0].values"),
])
def test_a_term_with_an_invalid_selector_makes_the_pod_invalid(selectors: dict[str, Any], field: str) -> None:
    # Before, such a term selected no pod (or every namespace) without a word.
    with pytest.raises(InvalidInput) as caught:
        models(holder({"topologyKey": ZONE, **selectors}))
    assert caught.value.obj == "Pod default/holder"
    assert caught.value.field == ("spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]."
                                  + field)


@pytest.mark.parametrize(("terms", "namespace", "labels", "rejected"), [
    # The zone of node a is z1: a and b are out for pods the term selects, c is not.
    ([term(ZONE, WEB)], "default", {"app": "web"}, {"a", "b"}),
    # By hostname the domain is node a alone.
    ([term(HOST, WEB)], "default", {"app": "web"}, {"a"}),
    # The selector does not select the pod.
    ([term(ZONE, WEB)], "default", {"app": "api"}, set()),
    # No labelSelector selects no pod; an empty one every pod.
    ([term(ZONE)], "default", {"app": "web"}, set()),
    ([term(ZONE, {})], "default", {}, {"a", "b"}),
    # Node a has no `rack` label: the term holds no domain.
    ([term("rack", WEB)], "default", {"app": "web"}, set()),
    # Namespaces: by default the holder's own; `namespaces` names others; an empty namespaceSelector is all.
    ([term(ZONE, WEB)], "other", {"app": "web"}, set()),
    ([term(ZONE, WEB, namespaces=["other"])], "other", {"app": "web"}, {"a", "b"}),
    ([term(ZONE, WEB, namespaces=["other"])], "default", {"app": "web"}, set()),
    ([term(ZONE, WEB, namespaceSelector={})], "other", {"app": "web"}, {"a", "b"}),
    # A namespaceSelector with requirements is not evaluated: taken to select every namespace.
    ([term(ZONE, WEB, namespaceSelector={"matchLabels": {"team": "x"}})], "other", {"app": "web"}, {"a", "b"}),
    # Two terms: either one keeps the pod out of its domain.
    ([term(HOST, {"matchLabels": {"app": "api"}}), term(ZONE, WEB)], "default", {"app": "web"}, {"a", "b"}),
    ([term(HOST, {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]})],
     "default", {"app": "api"}, {"a"}),
])
def test_bound_pods_anti_affinity_keeps_selected_pods_out_of_their_domain(
        terms: list[dict[str, Any]], namespace: str, labels: dict[str, str], rejected: set[str]) -> None:
    index = index_of(holder(*terms))
    assert index.anti_affinity_rejected(incoming(namespace, **labels)) == rejected


def test_finished_and_unbound_pods_hold_nothing() -> None:
    assert index_of(holder(term(ZONE, WEB), phase="Succeeded")).anti_affinity_rejected(incoming(app="web")) == set()
    unbound = with_spec(pod("holder", labels={"app": "db"}), affinity={"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [term(ZONE, WEB)]}})
    assert index_of(unbound).anti_affinity_rejected(incoming(app="web")) == set()
    # Preferred anti-affinity only scores nodes.
    preferred = with_spec(pod("holder", node="a"), affinity={"podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": term(ZONE, WEB)}]}})
    assert index_of(preferred).anti_affinity_rejected(incoming(app="web")) == set()


def test_reasons_put_resources_before_anti_affinity() -> None:
    busy = with_spec(pod("busy", node="b"), containers=[container(requests={"cpu": "4"})])
    index = index_of(holder(term(ZONE, WEB)), busy)
    fit = incoming(app="web")
    wanting = PodFit(fit.key, {"cpu": 1000}, labels=fit.labels)
    assert index.reasons(wanting, "a") == [EXISTING_ANTI_AFFINITY]
    assert index.reasons(wanting, "b") == ["Insufficient cpu"]  # NodeResourcesFit comes first
    assert index.reasons(wanting, "c") == []


def test_an_updated_index_follows_the_pods_and_the_nodes() -> None:
    objects = models(*NODES, holder(term(ZONE, WEB)))
    nodes = {m.name: m for m in objects if isinstance(m, Node)}
    pods = {m.key: m for m in objects if isinstance(m, Pod)}
    index = NodeFitIndex(nodes.values(), pods.values())
    web = incoming(app="web")
    assert index.anti_affinity_rejected(web) == {"a", "b"}
    # The holder finishes: nothing is held any more.
    (finished,) = [m for m in models(holder(term(ZONE, WEB), phase="Succeeded")) if isinstance(m, Pod)]
    later = index.updated(None, (pods, {finished.key: finished}))
    assert later.anti_affinity_rejected(web) == set()
    assert index.anti_affinity_rejected(web) == {"a", "b"}  # the earlier index is unchanged
    # Node b moves to zone z2: the domain z1 is node a alone.
    moved = {**nodes, "b": models(node("b", {ZONE: "z2", HOST: "b"}))[0]}
    assert index.updated((nodes, moved), None).anti_affinity_rejected(web) == {"a"}
    # The holder is deleted.
    assert index.updated(None, (pods, {})).anti_affinity_rejected(web) == set()


GATES = exactly("1.35", [])


def place(*manifests: Manifest, group: tuple[str, ...]) -> Any:
    snapshot = Snapshot.from_models(models(*NODES, *manifests))
    members = members_for([snapshot.pods[f"default/{name}"] for name in group], snapshot.claims, snapshot.templates)
    return place_gang(Allocator(snapshot, GATES), members)


def web(name: str, cpu: str = "1") -> Manifest:
    return with_spec(pod(name, labels={"app": "web"}), containers=[container(requests={"cpu": cpu})])


def test_gang_members_avoid_the_domain_of_a_bound_pods_anti_affinity() -> None:
    plan = place(holder(term(ZONE, WEB)), web("w0"), web("w1"), group=("w0", "w1"))
    assert plan.feasible and dict(plan.placements) == {"default/w0": "c", "default/w1": "c"}


def test_a_member_kept_out_everywhere_waits_with_the_schedulers_words() -> None:
    busy = with_spec(pod("busy", node="c"), containers=[container(requests={"cpu": "4"})])
    plan = place(holder(term(ZONE, WEB)), busy, web("w0"), group=("w0",))
    assert not plan.feasible and plan.unschedulable
    assert plan.reason == ("pod default/w0 fits on no node after placing 0 other pod(s) of the group: 0/3 nodes "
                           "are available: 1 Insufficient cpu, 2 node(s) didn't satisfy existing pods "
                           "anti-affinity rules")


def test_a_node_short_of_resources_is_counted_for_them_not_for_anti_affinity() -> None:
    plan = place(holder(term(HOST, WEB)), web("w0", "5"), group=("w0",))
    assert not plan.feasible
    assert plan.reason is not None and plan.reason.endswith("0/3 nodes are available: 3 Insufficient cpu")


def test_groups_alike_but_for_their_labels_are_not_given_each_others_answer() -> None:
    busy = with_spec(pod("busy", node="c"), containers=[container(requests={"cpu": "4"})])
    api = with_spec(pod("a0", labels={"app": "api"}), containers=[container(requests={"cpu": "1"})])
    snapshot = Snapshot.from_models(models(*NODES, holder(term(ZONE, WEB)), busy, web("w0"), api))
    allocator, known = Allocator(snapshot, GATES), KnownUnfit()
    first = place_gang(allocator, members_for([snapshot.pods["default/w0"]], snapshot.claims, snapshot.templates),
                       known=known)
    second = place_gang(allocator, members_for([snapshot.pods["default/a0"]], snapshot.claims, snapshot.templates),
                        known=known)
    assert not first.feasible and second.feasible and second.placements["default/a0"] == "a"
