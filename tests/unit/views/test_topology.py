"""`draq topology`: per domain of each Topology level, free devices, the largest gang of whole-node pods and
the stranded devices, from listed objects and read through the API (the in-memory fake)."""

from __future__ import annotations

import asyncio
from typing import Any

from admission.cli import topology as topology_cli
from admission.core.views import render_topology, topology_report
from tests.support import builders as b
from tests.support.fake_api import FakeApi
from tests.unit.cycle.cycle_builders import GATES, NS

RACK = "example.com/rack"
LAYOUT = b.draq_object("Topology", "layout", {"levels": [{"name": "rack", "nodeLabel": RACK}]})


def rack_node(name: str, rack: str) -> list[dict[str, Any]]:
    return [b.node(name, {RACK: rack}), b.resource_slice(name, *(b.device(f"gpu-{i}") for i in range(8)),
                                                         name=f"{name}-gpus")]


def cluster() -> list[dict[str, Any]]:
    """Racks a (two nodes, one GPU held on a0) and b (one node)."""
    held = b.claim("one", b.exactly("gpus", count=1), namespace=NS,
                   allocation=b.holding(f"{b.DRIVER}/a0/gpu-0", request="gpus"))
    return [*rack_node("a0", "a"), *rack_node("a1", "a"), *rack_node("b0", "b"), held, LAYOUT]


def test_each_rack_shows_its_free_devices_largest_gang_and_stranded_devices() -> None:
    text = render_topology(topology_report(cluster(), GATES))
    lines = text.splitlines()
    assert lines[0].split() == ["TOPOLOGY", "LEVEL", "DOMAIN", "NODES", "DEVICES", "FREE", "LARGEST", "GANG",
                                "STRANDED"]
    assert lines[1].split() == ["layout", "rack", "a", "2", "16", "15", "1", "x", "8", "7"]
    assert lines[2].split() == ["layout", "rack", "b", "1", "8", "8", "1", "x", "8", "0"]


def test_a_topology_that_does_not_parse_or_does_not_exist_is_named() -> None:
    broken = b.draq_object("Topology", "broken", {"levels": [{"name": "rack"}]})
    report = topology_report([*cluster(), broken], GATES, only=["broken", "absent"])
    assert report.domains == ()
    assert report.notes[0].startswith("broken: does not parse: ") and "exactly one of nodeLabel" in report.notes[0]
    assert report.notes[1] == "absent: no such Topology"


def test_topology_reads_through_the_api() -> None:
    fake = FakeApi()
    fake.add(*cluster())
    report = asyncio.run(topology_cli.read_topology(fake))
    assert [(d.domain, d.free, d.largest_gang) for d in report.domains] == [("a", 15, 1), ("b", 8, 1)]
    assert report.to_dict()["domains"][0]["stranded"] == 7
