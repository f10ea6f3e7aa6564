"""`draq simulate` from files: the demo's queues and workloads on nodes of the built-in profiles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from admission.cli.main import main
from admission.core.simulate import PROFILES, node_manifest, resource_slices

REPO = Path(__file__).resolve().parents[3]
DEMO = REPO / "examples" / "demo"
BASE = ["simulate", "--snapshot", str(DEMO / "queues.yaml"), "-f", str(DEMO / "workloads.yaml"),
        "--start", "2026-11-23T12:00:00Z", "--quiet"]


def test_json_names_every_group_with_its_fate_nodes_and_charge(capsys: pytest.CaptureFixture[str]) -> None:
    status = main([*BASE, "--add-nodes", "h100=2,mi300x=1", "-o", "json", "--expect-admitted", "research/llm-finetune"])
    document = json.loads(capsys.readouterr().out)
    assert status == 0
    groups = {g["group"]: g for g in document["simulation"]["groups"]}
    finetune = groups["research/llm-finetune"]
    assert (finetune["fate"], finetune["cycle"]) == ("Admitted", 1)
    assert {n["node"] for n in finetune["nodes"]} == {"added-h100-0", "added-h100-1"}
    assert finetune["charge"] == {"gpus": "16", "nvidia-memory": "1280Gi"}
    assert groups["serving/giant"]["fate"] == "Waiting"
    assert groups["serving/giant"]["reason"] == "NeverAdmissible"


def test_expect_admitted_fails_for_a_group_that_waits(capsys: pytest.CaptureFixture[str]) -> None:
    status = main([*BASE, "--add-nodes", "mi300x=1", "--expect-admitted", "serving/giant"])
    captured = capsys.readouterr()
    assert status == 1
    assert "serving/giant is not admitted in the simulation" in captured.err
    assert "serving/giant: NeverAdmissible:" in captured.out


def test_plan_nodes_from_files(capsys: pytest.CaptureFixture[str]) -> None:
    status = main([*BASE, "--plan-nodes", "h100,mi300x", "-o", "json"])
    plan = json.loads(capsys.readouterr().out)["plan"]
    assert status == 0
    assert plan["nodes"] == {"h100": 2, "mi300x": 1} and plan["total"] == 3
    assert [g["group"] for g in plan["cannotRun"]] == ["serving/giant"]


def test_an_unknown_profile_is_an_error_naming_the_profiles(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--add-nodes", "tpu=1"]) == 2
    assert "h100" in capsys.readouterr().err


def test_a_removed_node_is_gone_with_its_devices(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--add-nodes", "h100=2", "--remove-nodes", "added-h100-1", "-o", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    groups = {g["group"]: g for g in document["simulation"]["groups"]}
    assert groups["research/llm-finetune"]["fate"] == "Waiting", "4 pods × 4 GPUs do not fit one 8-GPU node"


def test_plan_nodes_plans_whole_racks_for_groups_that_require_one(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Rack r0 of two H100 nodes, and two copies of llm-finetune (4 pods x 4 H100) that require a rack: one
    fits r0, the other gets a planned rack of two H100 nodes."""
    documents = [d for d in yaml.safe_load_all((DEMO / "queues.yaml").read_text()) if d]
    for document in documents:
        if document["kind"] == "ClusterQueue" and document["metadata"]["name"] == "research":
            document["spec"]["topologyName"] = "layout"
            document["spec"]["quotas"][0]["nominal"] = 64
            document["spec"]["quotas"][1]["nominal"] = "5Ti"
    documents.append({"apiVersion": "draq.io/v1alpha1", "kind": "Topology", "metadata": {"name": "layout"},
                      "spec": {"levels": [{"name": "rack", "nodeLabel": "example.com/rack"}]}})
    for index in range(2):
        node = node_manifest(PROFILES["h100"], f"r0-{index}")
        node["metadata"]["labels"]["example.com/rack"] = "r0"
        documents += [node, *resource_slices(PROFILES["h100"], f"r0-{index}")]
    workloads = [d for d in yaml.safe_load_all((DEMO / "workloads.yaml").read_text())
                 if d and d["metadata"]["namespace"] == "research"]
    for copy in ("a", "b"):
        for document in workloads:
            if document["kind"] == "Pod":
                pod = json.loads(json.dumps(document))
                pod["metadata"]["name"] = f"{copy}-{pod['metadata']['name']}"
                pod["metadata"]["labels"]["draq.io/pod-group"] = f"{copy}-llm-finetune"
                pod["metadata"]["annotations"]["draq.io/topology-required"] = "rack"
                documents.append(pod)
    documents.append(next(d for d in workloads if d["kind"] == "ResourceClaimTemplate"))
    snapshot = tmp_path / "cluster.yaml"
    snapshot.write_text(yaml.safe_dump_all(documents))
    status = main(["simulate", "--snapshot", str(snapshot), "--start", "2026-11-23T12:00:00Z", "--quiet",
                   "--plan-nodes", "h100"])
    out = capsys.readouterr().out
    assert status == 0
    assert ("domain plan: the waiting groups ask for rack domains, so whole racks are planned, not loose nodes: "
            "add 1 rack(s) shaped like rack r0 (2 × h100 each, 2 node(s)): 1 of 1 waiting group(s) admitted") in out


def test_a_mistyped_option_prints_the_sub_commands_usage_and_abbreviations_are_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    for wrong in (["--add-node", "h100=1"], ["--no-such-option"]):
        with pytest.raises(SystemExit) as exited:
            main([*BASE, *wrong])
        err = capsys.readouterr().err
        assert exited.value.code == 2
        assert err.startswith("usage: draq simulate ") and f"unrecognized arguments: {wrong[0]}" in err


def test_plan_nodes_says_when_the_next_group_finishes_past_the_horizon(capsys: pytest.CaptureFixture[str]) -> None:
    main([*BASE, "--plan-nodes", "h100,mi300x"])
    out = capsys.readouterr().out
    assert "stopped at the horizon (+0s): the next running group finishes at +1h" in out
    assert "after the horizon" not in out
