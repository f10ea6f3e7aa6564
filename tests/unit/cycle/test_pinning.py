"""Pinning a released member to its planned node narrows its required node affinity, never widens it."""

from __future__ import annotations

from admission.core.cycle.pinning import pin_requirement, pinned_affinity
from tests.support.affinity import pinned_node


def test_a_pod_without_affinity_gets_one_term_naming_the_node() -> None:
    pinned = pinned_affinity(None, "gpu-3")
    terms = pinned["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-3"]}]}]
    assert pinned_node(pinned) == "gpu-3"


def test_every_existing_term_is_narrowed_and_nothing_else_changes() -> None:
    zone = {"key": "zone", "operator": "In", "values": ["a", "b"]}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [zone]}, {"matchExpressions": [{"key": "big", "operator": "Exists"}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {}}],
        },
        "podAntiAffinity": {"x": 1},
    }
    pinned = pinned_affinity(affinity, "gpu-3")
    terms = pinned["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [t["matchExpressions"] for t in terms] == [[zone], [{"key": "big", "operator": "Exists"}]]
    assert all(t["matchFields"] == [pin_requirement("gpu-3")] for t in terms)
    preferred = pinned["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred == [{"weight": 1, "preference": {}}]
    assert pinned["podAntiAffinity"] == {"x": 1}
    assert "matchFields" not in affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]  # the input is not changed


def test_pinning_twice_to_the_same_node_adds_nothing() -> None:
    once = pinned_affinity(None, "n")
    assert pinned_affinity(once, "n") == once
    assert pinned_node({}) is None
