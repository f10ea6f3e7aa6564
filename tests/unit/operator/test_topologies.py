"""The operator reads Topology objects: a ClusterQueue's groups are placed by the Topology it names, and a
Topology that is missing or does not parse stops only the groups that ask for a level of it."""

from __future__ import annotations

from typing import Any

from admission.core.cycle import Admit, WaitReason
from admission.core.models import TOPOLOGY_REQUIRED_ANNOTATION
from tests.support.builders import cluster_queue, draq_object, quota
from tests.unit.cycle.cycle_builders import gang

from .test_bad_objects import decide, only_b_waits, world

HOSTS = {"name": "host", "nodeLabel": "kubernetes.io/hostname"}


def other_queue() -> dict[str, Any]:
    manifest = cluster_queue("other", quota("gpus", 8))
    manifest["spec"]["topologyName"] = "layout"
    return manifest


def b_asks(level: str) -> list[dict[str, Any]]:
    """Group `b` (in `other`) again, its member asking for `level`."""
    objects = gang("b", 1, 1, queue="olq")
    objects[1]["metadata"]["annotations"] = {TOPOLOGY_REQUIRED_ANNOTATION: level}
    return objects


def test_a_group_is_placed_by_the_topology_its_queue_names() -> None:
    decisions = decide(world(draq_object("Topology", "layout", {"levels": [HOSTS]}), *b_asks("host"),
                             other=other_queue()))
    assert all(isinstance(d, Admit) for d in decisions.values()), decisions


def test_a_topology_that_does_not_parse_stops_only_the_groups_that_ask() -> None:
    broken = draq_object("Topology", "layout", {"levels": [{"name": "host"}]})
    only_b_waits(decide(world(broken, *b_asks("host"), other=other_queue())), WaitReason.QUEUE_INVALID,
                 "ClusterQueue other names Topology layout, which is invalid",
                 "must set exactly one of nodeLabel and deviceAttribute")


def test_a_missing_topology_stops_only_the_groups_that_ask() -> None:
    only_b_waits(decide(world(*b_asks("host"), other=other_queue())), WaitReason.QUEUE_INVALID,
                 "names Topology layout, which does not exist")
