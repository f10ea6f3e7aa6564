"""Simulated racks: an NVL72-like rack is 18 GB200-like nodes of 4 GPUs in one NVLink clique, published as a
node label and as a device attribute that draq's Topology levels read; H100 racks carry block and rack labels."""

from __future__ import annotations

from typing import Any

from admission.core.simulate import profiles
from admission.core.views import topology_report
from tests.support import builders as b
from tests.unit.cycle.cycle_builders import GATES

ATTRIBUTE = f"{profiles.NVIDIA}/{profiles.CLIQUE_ATTRIBUTE}"


def published(rack: profiles.RackProfile, name: str, block: str | None = None) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for node in profiles.rack_nodes(rack, name, block):
        objects.append(profiles.node_manifest(node.profile, node.name, location=node.location))
        objects += profiles.resource_slices(node.profile, node.name, location=node.location)
    return objects


def gpus(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for o in objects if o["kind"] == "ResourceSlice" for d in o["spec"].get("devices", [])]


def test_an_nvl72_rack_is_18_nodes_of_4_gpus_in_one_clique_shown_as_label_and_attribute() -> None:
    objects = published(profiles.RACK_PROFILES["nvl72"], "nvl-a", block="b0")
    nodes = [o for o in objects if o["kind"] == "Node"]
    assert [n["metadata"]["name"] for n in nodes] == [f"nvl-a-{i}" for i in range(18)]
    cliques = {n["metadata"]["labels"][profiles.CLIQUE_LABEL] for n in nodes}
    assert len(cliques) == 1
    [clique] = cliques
    uuid, _, clique_id = clique.rpartition(".")
    assert len(uuid) == 36 and clique_id == "0"
    assert {(n["metadata"]["labels"][profiles.RACK_LABEL], n["metadata"]["labels"][profiles.BLOCK_LABEL])
            for n in nodes} == {("nvl-a", "b0")}
    devices = gpus(objects)
    assert len(devices) == 72
    assert {d["attributes"][profiles.CLIQUE_ATTRIBUTE]["string"] for d in devices} == {clique}
    assert {d["attributes"]["productName"]["string"] for d in devices} == {"NVIDIA GB200"}


def test_racks_of_different_names_are_different_cliques() -> None:
    first, second = (published(profiles.RACK_PROFILES["nvl72"], name) for name in ("nvl-a", "nvl-b"))
    values = [{d["attributes"][profiles.CLIQUE_ATTRIBUTE]["string"] for d in gpus(o)} for o in (first, second)]
    assert len(values[0] | values[1]) == 2


def test_partitions_of_an_nvl72_gpu_carry_its_clique() -> None:
    [node] = profiles.rack_nodes(profiles.RACK_PROFILES["nvl72"], "nvl-a")[:1]
    slices = profiles.resource_slices(node.profile, node.name, partitions=True, location=node.location)
    migs = [d for d in gpus(slices) if d["attributes"]["type"]["string"] == "mig"]
    assert len(migs) == 4 * 9
    assert {d["attributes"][profiles.CLIQUE_ATTRIBUTE]["string"] for d in migs} == {node.location.clique}


def test_h100_racks_carry_block_and_rack_labels_and_no_clique() -> None:
    objects = published(profiles.RACK_PROFILES["h100"], "r7", block="b1")
    nodes = [o for o in objects if o["kind"] == "Node"]
    assert len(nodes) == 4
    labels = nodes[0]["metadata"]["labels"]
    assert labels[profiles.RACK_LABEL] == "r7" and labels[profiles.BLOCK_LABEL] == "b1"
    assert profiles.CLIQUE_LABEL not in labels
    assert len(gpus(objects)) == 32
    assert not any(profiles.CLIQUE_ATTRIBUTE in d["attributes"] for d in gpus(objects))


def test_a_node_without_a_location_is_published_as_before() -> None:
    h100 = profiles.PROFILES["h100"]
    node = profiles.node_manifest(h100, "n")
    assert not {profiles.RACK_LABEL, profiles.BLOCK_LABEL, profiles.CLIQUE_LABEL} & set(node["metadata"]["labels"])
    assert profiles.node_manifest(h100, "n", location=profiles.Location()) == node
    [plain] = profiles.resource_slices(h100, "n")
    assert all(profiles.CLIQUE_ATTRIBUTE not in d["attributes"] for d in plain["spec"]["devices"])
    assert "gb200" not in profiles.PROFILES  # rack-only: `--nodes` lists and random scenarios stay as they were


def test_topology_levels_see_each_rack_as_one_domain_by_label_and_by_device_attribute() -> None:
    layout = b.draq_object("Topology", "nvl", {"levels": [
        {"name": "rack", "nodeLabel": profiles.RACK_LABEL},
        {"name": "clique-label", "nodeLabel": profiles.CLIQUE_LABEL},
        {"name": "clique", "deviceAttribute": ATTRIBUTE}]})
    nvl72 = profiles.RACK_PROFILES["nvl72"]
    report = topology_report([*published(nvl72, "nvl-a"), *published(nvl72, "nvl-b"), layout], GATES)
    rows = [(d.level, d.nodes, d.devices, d.free, d.largest_gang) for d in report.domains]
    assert rows == [(level, 18, 72, 72, 18) for level in ("rack", "rack", "clique-label", "clique-label",
                                                           "clique", "clique")]
    assert [d.domain for d in report.domains][:2] == ["nvl-a", "nvl-b"]
