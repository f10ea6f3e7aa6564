"""The gates and served APIs the local control plane asks for, per release."""

from __future__ import annotations

from pathlib import Path

import pytest

from admission.localcluster.controlplane import ControlPlane, gang_api


@pytest.mark.parametrize(("version", "api"), [
    ("v1.35.8", "v1alpha1"), ("v1.36.3", "v1alpha2"), ("v1.37.2", "v1beta1"), ("v1.38.0", "v1beta1")])
def test_native_gangs_ask_for_the_workload_api_each_release_serves(version: str, api: str) -> None:
    minor = int(version.split(".")[1])
    assert gang_api(minor) == api


def test_gang_gates_on_1_37_leave_out_the_removed_gang_scheduling_gate(tmp_path: Path) -> None:
    plane = ControlPlane(tmp_path, version="v1.37.2", alpha_gangs=True)
    assert plane.gates() == {"GenericWorkload": True}


def test_gang_gates_on_1_36_keep_gang_scheduling(tmp_path: Path) -> None:
    plane = ControlPlane(tmp_path, version="v1.36.3", alpha_gangs=True)
    assert plane.gates() == {"GenericWorkload": True, "GangScheduling": True}


def test_explicit_gates_win_over_the_alpha_sets(tmp_path: Path) -> None:
    plane = ControlPlane(tmp_path, version="v1.37.2", alpha_dra=True, feature_gates={"DRADeviceTaints": False})
    assert plane.gates()["DRADeviceTaints"] is False
    assert plane.gates()["DRAPartitionableDevices"] is True
