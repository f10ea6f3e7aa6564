"""NodeAffinity: the node selector and the required node affinity, together."""

from __future__ import annotations

from admission.core.models import Pod
from admission.core.nodefit import matches_node_affinity, matches_node_selector
from tests.support.builders import model, node_affinity, pod, requirement, with_spec

ZONE_A = {"zone": "a", "gpu": "h100", "cores": "64"}


def test_node_selector_needs_every_label_equal() -> None:
    assert matches_node_selector({"zone": "a"}, ZONE_A)
    assert not matches_node_selector({"zone": "a", "rack": "1"}, ZONE_A)
    assert not matches_node_selector({"zone": ""}, {})  # an empty value still needs the label
    assert matches_node_selector({}, {})


def affinity_pod(*terms: list[dict[str, object]], fields: list[list[dict[str, object]]] | None = None,
                 selector: dict[str, str] | None = None) -> Pod:
    manifest = with_spec(pod("p", node_selector=selector), affinity=node_affinity(*terms, fields=fields or []))
    parsed = model(manifest)
    assert isinstance(parsed, Pod)
    return parsed


def matches(pod: Pod, labels: dict[str, str], name: str = "n1") -> bool:
    return matches_node_affinity(pod.node_selector, pod.node_affinity, labels, name)


def test_operators() -> None:
    assert matches(affinity_pod([requirement("zone", "In", "a", "b")]), ZONE_A)
    assert not matches(affinity_pod([requirement("zone", "NotIn", "a")]), ZONE_A)
    assert matches(affinity_pod([requirement("rack", "NotIn", "1")]), ZONE_A)  # absent label: NotIn holds
    assert matches(affinity_pod([requirement("gpu", "Exists")]), ZONE_A)
    assert matches(affinity_pod([requirement("rack", "DoesNotExist")]), ZONE_A)
    assert matches(affinity_pod([requirement("cores", "Gt", "32")]), ZONE_A)
    assert not matches(affinity_pod([requirement("cores", "Lt", "32")]), ZONE_A)
    assert not matches(affinity_pod([requirement("zone", "Gt", "1")]), ZONE_A)  # not a number: no match


def test_terms_are_ored_requirements_anded() -> None:
    both = affinity_pod([requirement("zone", "In", "a"), requirement("gpu", "In", "a100")],
                        [requirement("zone", "In", "b")])
    assert not matches(both, ZONE_A)
    assert matches(both, {"zone": "b"})


def test_match_fields_select_the_node_name() -> None:
    pinned = affinity_pod(fields=[[requirement("metadata.name", "In", "n2")]])
    assert not matches(pinned, ZONE_A, "n1") and matches(pinned, ZONE_A, "n2")


def test_selector_and_affinity_must_both_match() -> None:
    both = affinity_pod([requirement("zone", "In", "a")], selector={"gpu": "a100"})
    assert not matches(both, ZONE_A)
    assert matches(both, {**ZONE_A, "gpu": "a100"})
