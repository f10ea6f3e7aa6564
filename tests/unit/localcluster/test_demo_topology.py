"""`draq demo --topology`: its manifests, simulated on the racks the demo's nodes publish, put the inference pods
on their pinned nodes of rack nvl72-a and the rack-required gang whole in rack nvl72-b, because of the
fragmentation: without the inference pods the gang takes nvl72-a (racks tie on free devices, then go by name)."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from admission.cli import demo
from admission.cli.main import main
from admission.core.simulate import RACK_PROFILES, device_classes, node_manifest, rack_nodes, resource_slices

QUEUES, HOLDERS, GANG = (demo.TOPOLOGY_MANIFESTS / name for name in ("queues.yaml", "holders.yaml", "gang.yaml"))


def racks_file(tmp_path: Path) -> Path:
    objects: list[dict[str, Any]] = list(device_classes())
    for rack in demo.TOPOLOGY_RACKS:
        for node in rack_nodes(RACK_PROFILES["nvl72"], rack, demo.TOPOLOGY_BLOCK):
            objects.append(node_manifest(node.profile, node.name, location=node.location))
            objects += resource_slices(node.profile, node.name, location=node.location)
    path = tmp_path / "racks.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return path


def nodes_of_groups(tmp_path: Path, *workloads: Path) -> dict[str, set[str]]:
    argv = ["simulate", "--snapshot", str(racks_file(tmp_path)), "--snapshot", str(QUEUES),
            *(arg for path in workloads for arg in ("-f", str(path))),
            "--start", "2026-11-23T12:00:00Z", "--quiet", "-o", "json"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    groups = json.loads(out.getvalue())["simulation"]["groups"]
    assert all(g["fate"] == "Admitted" for g in groups), groups
    return {g["group"]: {n["node"] for n in g["nodes"]} for g in groups}


def test_the_gang_lands_whole_in_the_rack_that_is_not_fragmented(tmp_path: Path) -> None:
    placed = nodes_of_groups(tmp_path, HOLDERS, GANG)
    holders = {f"llm/inference-{i}": {f"nvl72-a-{n}"} for i, n in enumerate((1, 4, 7, 10, 13, 16))}
    assert {k: v for k, v in placed.items() if k != "llm/pretrain"} == holders
    gang = placed["llm/pretrain"]
    assert len(gang) == 14 and all(node.startswith("nvl72-b-") for node in gang), gang


def test_without_the_fragmenting_pods_the_gang_takes_the_first_rack(tmp_path: Path) -> None:
    [(group, gang)] = nodes_of_groups(tmp_path, GANG).items()
    assert group == "llm/pretrain"
    assert len(gang) == 14 and all(node.startswith("nvl72-a-") for node in gang), gang


def test_topology_is_an_option_and_replaces_the_default_nodes() -> None:
    parser = argparse.ArgumentParser()
    demo.configure(parser)
    args = parser.parse_args(["--topology", "--once"])
    assert args.topology and args.nodes is None
    with pytest.raises(demo.DemoError, match="PROFILE=COUNT"):
        demo.parse_layout("gb200=1")  # rack-only profile: racks come with --topology
