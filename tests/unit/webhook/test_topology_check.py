"""A pod's topology request checked at creation: a level its ClusterQueue's Topology lacks, a queue that names
no Topology, or a malformed request is refused with what to write instead; a Topology the webhook does not
know, or cannot parse, lets the pod through with a warning."""

from __future__ import annotations

from typing import Any

from admission.core.labels import GATE
from admission.core.models import TOPOLOGY_PREFERRED_ANNOTATION, TOPOLOGY_REQUIRED_ANNOTATION
from admission.core.review import validate
from tests.support.builders import draq_object

from .builders import POD, FakeLookups, cluster, pod, request
from .test_validation import GATED, POLICY


def asking(annotations: dict[str, str]) -> dict[str, Any]:
    obj = pod("x", labels=GATED, gates=[GATE])
    obj["metadata"]["annotations"] = annotations
    return obj


def with_topology(levels: list[dict[str, str]] | None = None, name: str = "layout") -> FakeLookups:
    lookups = cluster()
    lookups.cluster_queues["cq"]["spec"]["topologyName"] = name
    if levels is not None:
        lookups.topologies[name] = draq_object("Topology", name, {"levels": levels})
    return lookups


RACKS = [{"name": "block", "nodeLabel": "example.com/block"}, {"name": "rack", "nodeLabel": "example.com/rack"}]


def test_a_level_of_the_queues_topology_is_allowed() -> None:
    decision = validate(request(POD, asking({TOPOLOGY_REQUIRED_ANNOTATION: "rack"})), with_topology(RACKS), POLICY)
    assert decision.allowed and not decision.warnings


def test_a_level_the_topology_lacks_is_refused_naming_its_levels() -> None:
    decision = validate(request(POD, asking({TOPOLOGY_PREFERRED_ANNOTATION: "zone"})), with_topology(RACKS), POLICY)
    assert not decision.allowed and decision.code == 422
    assert ("it asks for topology preferred: zone, but Topology layout (of ClusterQueue cq) has no level 'zone'; "
            "its levels: block, rack. Name one of them in the annotation") in decision.message


def test_a_queue_without_a_topology_refuses_a_request() -> None:
    decision = validate(request(POD, asking({TOPOLOGY_REQUIRED_ANNOTATION: "rack"})), cluster(), POLICY)
    assert not decision.allowed
    assert "but ClusterQueue cq names no Topology (spec.topologyName)" in decision.message


def test_both_annotations_are_refused() -> None:
    both = {TOPOLOGY_REQUIRED_ANNOTATION: "rack", TOPOLOGY_PREFERRED_ANNOTATION: "rack"}
    decision = validate(request(POD, asking(both)), with_topology(RACKS), POLICY)
    assert not decision.allowed and "are both set; keep one" in decision.message


def test_an_unknown_or_invalid_topology_lets_the_pod_through_with_a_warning() -> None:
    missing = validate(request(POD, asking({TOPOLOGY_REQUIRED_ANNOTATION: "rack"})), with_topology(None), POLICY)
    assert missing.allowed and "Topology layout (of ClusterQueue cq) does not exist" in missing.warnings[0]
    broken = validate(request(POD, asking({TOPOLOGY_REQUIRED_ANNOTATION: "rack"})),
                      with_topology([{"name": "rack"}]), POLICY)
    assert broken.allowed and "is invalid" in broken.warnings[0] and "exactly one of nodeLabel" in broken.warnings[0]


def test_a_pod_without_a_request_is_not_checked() -> None:
    assert validate(request(POD, asking({})), cluster(), POLICY).allowed
