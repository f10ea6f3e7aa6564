"""Start-up failures name the component, the log to read and what to do, and leave nothing running."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from admission.localcluster.controlplane import ControlPlane, ControlPlaneError


def test_port_in_use_is_reported_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        plane = ControlPlane(tmp_path, apiserver_port=port)
        with pytest.raises(ControlPlaneError, match=f"port {port} for kube-apiserver .* already in use"):
            plane.start()
    assert plane.components == []


def test_component_that_exits_is_named_with_its_log_and_the_rest_is_stopped(tmp_path: Path) -> None:
    plane = ControlPlane(tmp_path, feature_gates={"NoSuchFeatureGate": True})
    with pytest.raises(ControlPlaneError) as failure:
        plane.start()
    message = str(failure.value)
    assert "kube-apiserver exited" in message
    assert str(tmp_path / "logs" / "kube-apiserver.log") in message
    assert "NoSuchFeatureGate" in message
    assert plane.components == []
