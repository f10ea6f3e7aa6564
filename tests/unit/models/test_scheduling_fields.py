"""Parsing what the scheduler's node filters read: taints, tolerations, node affinity, inter-pod constraints,
container restart policies, overhead and pod-level resources."""

from __future__ import annotations

import pytest

from admission.core.errors import InvalidInput
from admission.core.models import Node, Pod, Taint, Toleration
from admission.core.quantity import parse_quantity
from tests.support.builders import (
    container,
    model,
    node,
    node_affinity,
    pod,
    requirement,
    taint,
    toleration,
    with_spec,
)


def test_node_taints_and_cordon() -> None:
    parsed = model(with_spec(node("n"), taints=[taint("gpu", "true"), taint("spot", effect="PreferNoSchedule")],
                             unschedulable=True))
    assert isinstance(parsed, Node)
    assert parsed.taints == (Taint("gpu", "true", "NoSchedule"), Taint("spot", "", "PreferNoSchedule"))
    assert parsed.unschedulable
    assert model(node("plain")).taints == ()


def test_a_taint_needs_key_and_effect() -> None:
    with pytest.raises(InvalidInput, match=r"spec.taints\[0\].effect"):
        model(with_spec(node("n"), taints=[{"key": "gpu"}]))


def test_tolerations_default_to_equal_and_keep_empty_fields() -> None:
    parsed = model(with_spec(pod("p"), tolerations=[
        toleration("gpu", "true"), toleration(operator="Exists"), toleration("spot", operator="Exists",
                                                                             effect="NoExecute")]))
    assert isinstance(parsed, Pod)
    assert parsed.tolerations == (Toleration("gpu", "Equal", "true", ""), Toleration("", "Exists", "", ""),
                                  Toleration("spot", "Exists", "", "NoExecute"))


def test_required_node_affinity_terms_and_fields() -> None:
    affinity = node_affinity([requirement("zone", "In", "a", "b"), requirement("gpu", "Exists")],
                             fields=[[requirement("metadata.name", "In", "n1")]])
    parsed = model(with_spec(pod("p"), affinity=affinity))
    assert parsed.node_affinity is not None
    first, second = parsed.node_affinity.terms
    assert [(r.key, r.operator, r.values) for r in first.match_expressions] == [
        ("zone", "In", ("a", "b")), ("gpu", "Exists", ())]
    assert [(r.key, r.values) for r in second.match_fields] == [("metadata.name", ("n1",))]
    assert parsed.node_affinity.matches({"zone": "a", "gpu": "yes"}, "n9")
    assert parsed.node_affinity.matches({}, "n1")
    assert not parsed.node_affinity.matches({"zone": "c", "gpu": "yes"}, "n2")


def test_preferred_node_affinity_alone_is_no_requirement() -> None:
    preferred = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [requirement("zone", "In", "a")]}}]}}
    assert model(with_spec(pod("p"), affinity=preferred)).node_affinity is None


def test_bad_node_affinity_names_the_field() -> None:
    with pytest.raises(InvalidInput, match="nodeSelectorTerms"):
        model(with_spec(pod("p"), affinity={"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}))
    with pytest.raises(InvalidInput, match="integer"):
        model(with_spec(pod("p"), affinity=node_affinity([requirement("cores", "Gt", "many")])))


def test_inter_pod_constraints_are_read_in_their_hard_forms_only() -> None:
    term = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
    spec = {
        "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term],
                                     "preferredDuringSchedulingIgnoredDuringExecution": [
                                         {"weight": 1, "podAffinityTerm": term}]},
                     "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term, term]}},
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}],
    }
    parsed = model(with_spec(pod("p"), **spec))
    counts = (len(parsed.affinity_terms), len(parsed.anti_affinity_terms), len(parsed.spread_constraints))
    assert counts == (1, 2, 1)
    (spread,) = parsed.spread_constraints
    assert (spread.max_skew, spread.topology_key, spread.label_selector, spread.min_domains) == (1, "zone", None, 1)
    assert (spread.node_affinity_policy, spread.node_taints_policy) == ("Honor", "Ignore")
    soft = model(with_spec(pod("p"), topologySpreadConstraints=[spec["topologySpreadConstraints"][1]]))
    assert (soft.affinity_terms, soft.anti_affinity_terms, soft.spread_constraints) == ((), (), ())


def test_match_label_keys_are_merged_into_the_selectors_as_the_api_server_does() -> None:
    term = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "zone",
            "matchLabelKeys": ["job", "absent"], "mismatchLabelKeys": ["team"]}
    spread = {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "minDomains": 3,
              "labelSelector": {"matchLabels": {"app": "x"}}, "matchLabelKeys": ["job"],
              "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor"}
    parsed = model(with_spec(pod("p", labels={"app": "x", "job": "1", "team": "a"}),
                             affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
                             topologySpreadConstraints=[spread]))
    (affinity,) = parsed.affinity_terms
    assert affinity.label_selector is not None
    assert affinity.label_selector.matches({"app": "x", "job": "1", "team": "b"})
    assert not affinity.label_selector.matches({"app": "x", "job": "2", "team": "b"})
    assert not affinity.label_selector.matches({"app": "x", "job": "1", "team": "a"})
    (constraint,) = parsed.spread_constraints
    assert (constraint.max_skew, constraint.min_domains) == (2, 3)
    assert (constraint.node_affinity_policy, constraint.node_taints_policy) == ("Ignore", "Honor")
    assert constraint.label_selector is not None and not constraint.label_selector.matches({"app": "x", "job": "2"})


@pytest.mark.parametrize(("field", "value", "message"), [
    ("maxSkew", 0, "maxSkew: must be at least 1"),
    ("minDomains", 0, "minDomains: must be at least 1"),
    ("nodeTaintsPolicy", "Sometimes", "nodeTaintsPolicy: must be Honor or Ignore"),
])
def test_bad_spread_constraints_are_named(field: str, value: object, message: str) -> None:
    constraint = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", field: value}
    with pytest.raises(InvalidInput, match=message):
        model(with_spec(pod("p"), topologySpreadConstraints=[constraint]))


def test_containers_sidecars_overhead_and_pod_level_resources() -> None:
    manifest = with_spec(
        pod("p"),
        containers=[container(requests={"cpu": "1"}, limits={"memory": "1Gi"})],
        initContainers=[container("setup", requests={"cpu": "2"}),
                        container("proxy", requests={"cpu": "100m"}, restart_policy="Always")],
        overhead={"cpu": "250m", "memory": "120Mi"},
        resources={"requests": {"cpu": "4"}, "limits": {"memory": "8Gi"}},
    )
    parsed = model(manifest)
    (main,) = parsed.containers
    assert main.requests == {"cpu": parse_quantity("1")} and main.limits == {"memory": parse_quantity("1Gi")}
    setup, proxy = parsed.init_containers
    assert not setup.is_sidecar and proxy.is_sidecar and proxy.restart_policy == "Always"
    assert parsed.overhead == {"cpu": parse_quantity("250m"), "memory": parse_quantity("120Mi")}
    assert parsed.resources.requests == {"cpu": parse_quantity("4")}
    assert parsed.resources.limits == {"memory": parse_quantity("8Gi")}
    assert model(pod("q")).resources.requests == {}
