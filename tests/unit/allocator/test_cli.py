"""`draq allocate`: JSON answers, explained text, and exit status 2 only for unusable input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from admission.cli.main import main
from admission.core import features
from tests.support.builders import DRIVER, claim, device_class, exactly, holding, node
from tests.unit.allocator.builders import gpus


def write(tmp_path: Path, *manifests: dict[str, Any]) -> str:
    path = tmp_path / "objects.yaml"
    path.write_text(yaml.safe_dump_all(manifests))
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["allocate", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_answer_for_a_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = write(tmp_path, node("n1"), device_class(), gpus("n1", 2), claim("c", exactly(count=2)))
    code, out, _ = run(capsys, "-f", objects, "--node", "n1", "--claims", "c", "-o", "json")
    answer = json.loads(out)
    assert code == 0
    assert answer["allocatable"] is True and answer["error"] is None
    assert sorted(answer["devices"]["c"]["gpu"]) == [f"{DRIVER}/n1/gpu-0", f"{DRIVER}/n1/gpu-1"]
    assert answer["nodeSelector"]["c"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n1"]


def test_text_answer_explains_a_no(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = write(tmp_path, node("n1"), device_class(), gpus("n1", 2), claim("c", exactly(count=2)),
                    claim("old", allocation=holding(f"{DRIVER}/n1/gpu-0")))
    code, out, _ = run(capsys, "-f", objects, "--node", "n1", "--claims", "default/c")
    assert code == 0
    assert out.startswith("no: default/c cannot be allocated together on node n1")
    assert "2 matched the selectors, 1 free (1 in use)" in out


def test_an_allocator_error_is_an_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = write(tmp_path, node("n1"), device_class(expression="nope"), gpus("n1", 1), claim("c"))
    code, out, _ = run(capsys, "-f", objects, "--node", "n1", "--claims", "c", "-o", "json")
    answer = json.loads(out)
    assert code == 0 and answer["allocatable"] is False
    assert "CEL compile error" in answer["error"]


def test_a_missing_class_is_named_in_json_and_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = write(tmp_path, node("n1"), device_class(), gpus("n1", 1), claim("c", exactly(device_class="nic")))
    base = ["-f", objects, "--node", "n1", "--claims", "c"]
    code, out, _ = run(capsys, *base, "-o", "json")
    answer = json.loads(out)
    assert code == 0 and answer["allocatable"] is False and answer["missingDeviceClass"] == "nic"
    assert "claim default/c, request gpu: could not retrieve device class nic" in answer["error"]
    code, out, _ = run(capsys, *base)
    assert code == 0 and out.startswith("no: c cannot be allocated on any node: device class nic does not exist")


def test_gates_and_version_flags_change_the_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = write(tmp_path, node("n1"), device_class(), gpus("n1", 1), claim("c", exactly(adminAccess=True)))
    base = ["-f", objects, "--node", "n1", "--claims", "c", "-o", "json"]
    assert json.loads(run(capsys, *base, "--kubernetes-version", "1.35")[1])["allocatable"] is True
    off = json.loads(run(capsys, *base, "--feature-gates", "DRAAdminAccess=false")[1])
    assert "admin access is requested" in off["error"]


@pytest.mark.parametrize(("argv", "message"), [
    (["--node", "n1", "--claims", "c", "-f", "/does/not/exist"], "does not exist"),
    (["--node", "n9", "--claims", "c"], "node n9"),
    (["--node", "n1", "--claims", "other"], "ResourceClaim default/other"),
    (["--node", "n1", "--claims", "c", "--feature-gates", "Bogus=true"], "unknown DRA feature gate"),
])
def test_unusable_input_exits_2_with_a_clear_message(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     argv: list[str], message: str) -> None:
    objects = write(tmp_path, node("n1"), device_class(), gpus("n1", 1), claim("c"))
    code, _, err = run(capsys, "-f", objects, *argv)
    assert code == 2 and message in err and "Traceback" not in err


def test_malformed_yaml_names_the_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Node\nmetadata: [oops\n")
    code, _, err = run(capsys, "-f", str(bad), "--node", "n1", "--claims", "c")
    assert code == 2 and "bad.yaml" in err and "line" in err


def test_1_37_answers_name_what_is_not_modelled(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    objects = write(tmp_path, node("n1"), device_class(), gpus("n1", 1), claim("c"))
    base = ["-f", objects, "--node", "n1", "--claims", "c", "--kubernetes-version", "1.37"]
    answer = json.loads(run(capsys, *base, "-o", "json")[1])
    assert answer["allocatable"] is True
    assert answer["notModelled"] == []  # the 1.37 defaults (DRAFractionalCapacityRange on) are all modelled
    derived = run(capsys, *base, "--feature-gates", "DRADerivedAttributes=true", "-o", "json")[1]
    assert json.loads(derived)["notModelled"] == []  # modelled too
    monkeypatch.setitem(features.UNMODELLED_GATES, "DRAListTypeAttributes", "lists are not compared")
    text = run(capsys, *base, "--feature-gates", "DRAFractionalCapacityRange=false,DRAListTypeAttributes=true")[1]
    assert text.startswith("yes: c can be allocated")
    assert "not modelled: DRAListTypeAttributes is on (1.37)" in text
    assert json.loads(run(capsys, *base[:-2], "-o", "json")[1])["notModelled"] == []


def test_turning_off_a_locked_gate_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = write(tmp_path, node("n1"), device_class(), gpus("n1", 1), claim("c"))
    code, _, err = run(capsys, "-f", objects, "--node", "n1", "--claims", "c", "--kubernetes-version", "1.37",
                       "--feature-gates", "DRAPrioritizedList=false")
    assert code == 2 and "DRAPrioritizedList" in err and "locked to true in 1.37" in err
