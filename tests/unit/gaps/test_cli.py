"""`draq gaps` (and `kubectl draq gaps`): files or a live listing in, table / JSON / YAML out; exit status
1 with --fail-on-gap when a gap is found, 2 for unusable input."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from admission.cli.gaps import read_cluster
from admission.cli.main import main
from admission.core.features import gates_for
from admission.core.gaps import GapKind, find_gaps, read_objects
from admission.kube.client import KubeApiError
from tests.support.builders import node, resource_quota
from tests.support.fake_api import FakeApi
from tests.unit.gaps.world import TEAM, base, device, held_claim, running_pod

EXAMPLES = Path(__file__).parents[3] / "examples" / "gaps"


def write(tmp_path: Path, *manifests: dict[str, Any], name: str = "objects.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(manifests))
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["gaps", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def outside(tmp_path: Path) -> str:
    return write(tmp_path, *base(), running_pod("x", "ops", claims={"gpu": "c"}),
                 held_claim("c", [device("gpu-0")], "ops", ["x"]))


def test_a_table_by_default_and_status_0_without_fail_on_gap(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-f", outside(tmp_path))
    assert code == 0
    assert "GAPS (2)" in out
    assert "1. gpu-memory 80Gi held outside every queue in namespace ops" in out


def test_fail_on_gap_exits_1_only_when_a_gap_is_left_after_the_filters(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = outside(tmp_path)
    assert run(capsys, "-f", objects, "--fail-on-gap")[0] == 1
    code, out, _ = run(capsys, "-f", objects, "--fail-on-gap", "--namespace", TEAM)
    assert code == 0
    assert "no gaps found" in out
    assert run(capsys, "-f", objects, "--fail-on-gap", "--kind", "DoubleOffered")[0] == 0
    assert run(capsys, "-f", write(tmp_path, *base(), name="clean.yaml"), "--fail-on-gap")[0] == 0


def test_json_and_yaml_hold_the_same_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = outside(tmp_path)
    as_json = json.loads(run(capsys, "-f", objects, "-o", "json")[1])
    as_yaml = yaml.safe_load(run(capsys, "-f", objects, "-o", "yaml")[1])
    assert as_json == as_yaml
    assert [(g["kind"], g["measure"], g["size"]) for g in as_json["gaps"]] == [
        ("OutsideQueues", "gpu-memory", "80Gi"), ("OutsideQueues", "gpus", "1")]


def test_queue_filter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = write(tmp_path, *base(), resource_quota("rq", {"gpu.deviceclass.resource.k8s.io/devices": 2}, TEAM),
                    running_pod("x", "ops", claims={"gpu": "c"}), held_claim("c", [device("gpu-0")], "ops", ["x"]))
    report = json.loads(run(capsys, "-f", objects, "-o", "json", "--queue", "cq")[1])
    assert [(g["kind"], g["size"]) for g in report["gaps"]] == [("NativeQuotaLimit", "6")]


def test_the_example_directory_shows_every_kind_of_gap(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-f", str(EXAMPLES), "-o", "json", "--fail-on-gap")
    report = json.loads(out)
    assert code == 1
    assert {g["kind"] for g in report["gaps"]} == {k.value for k in GapKind}
    assert len(report["gaps"]) == 13


def test_unusable_input_exits_2_with_a_specific_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}
    code, _, err = run(capsys, "-f", write(tmp_path, deployment))
    assert code == 2
    assert "draq gaps: error: Deployment web, field apiVersion/kind: apps/v1 Deployment is not used" in err
    assert run(capsys, "-f", write(tmp_path, deployment, node("n1"), name="mixed.yaml"), "--ignore-unknown")[0] == 0
    code, _, err = run(capsys, "-f", str(tmp_path / "missing.yaml"))
    assert (code, err.strip()) == (2, f"draq gaps: error: file {tmp_path / 'missing.yaml'}: does not exist")
    code, _, err = run(capsys, "-f", outside(tmp_path), "--kind", "Leak")
    assert code == 2 and "unknown gap kind 'Leak'" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run(capsys, "-f", str(empty))
    assert code == 2 and "holds no .yaml, .yml or .json file" in err


def test_a_live_listing_reads_every_kind_and_names_what_is_not_served() -> None:
    api = FakeApi()
    api.add(*[m for m in base() if m["kind"] not in ("QuotaUnit", "ClusterQueue", "LocalQueue")],
            running_pod("x", "ops", claims={"gpu": "c"}), held_claim("c", [device("gpu-0")], "ops", ["x"]))

    def not_served(method: str, path: str) -> KubeApiError | None:
        if path == "/version" or "draq.io" in path:
            return KubeApiError(method, path, 404, "the server could not find the requested resource")
        return None

    api.fail = not_served
    listing = asyncio.run(read_cluster(api))
    assert listing.release is None
    assert listing.missing == ["clusterqueues.draq.io", "localqueues.draq.io", "quotaunits.draq.io",
                               "podgroups.draq.io"]
    assert {m["kind"] for m in listing.manifests} == {"DeviceClass", "Node", "ResourceSlice", "Pod", "ResourceClaim"}
    report = find_gaps(read_objects(listing.manifests, gates_for(), strict=False))
    assert report.gaps == ()  # no unit known: nothing to measure a gap in
    assert report.accounts == ()


def test_devices_allowed_off_queue_are_a_gap_of_their_own(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-f", str(EXAMPLES), "-o", "json", "--kind", "AllowedOffQueue")
    allowed = json.loads(out)["gaps"]
    assert code == 0 and {g["namespace"] for g in allowed} == {"serving"}
    assert all("(draq.io/device-policy=allow)" in g["message"] for g in allowed)
