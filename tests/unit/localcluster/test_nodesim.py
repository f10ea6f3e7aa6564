"""The node simulator starts a pod once, and never takes a finished pod back to Running."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from admission.localcluster.nodesim import NodeSimulator


class FakeCore:
    """The pod status patches the simulator sends; a JSON patch whose `test` of the phase fails is refused
    with 422, as the API server does."""

    def __init__(self, phase: str, away: int = 0) -> None:
        self.phase = phase
        self.away = away  # how many requests find the API server away
        self.patches: list[Any] = []

    def patch_namespaced_pod_status(self, name: str, namespace: str, body: Any) -> None:
        if self.away:
            self.away -= 1
            raise ConnectionRefusedError("the API server is restarting")
        self.patches.append(body)
        tests = [op for op in body if op["op"] == "test"] if isinstance(body, list) else []
        if any(op["path"] == "/status/phase" and op["value"] != self.phase for op in tests):
            raise ApiException(status=422, reason="the test operation failed")
        self.phase = next(op["value"] for op in body if op["path"] == "/status/phase" and op["op"] == "replace")


def pending_pod(uid: str = "u1") -> Any:
    return SimpleNamespace(
        metadata=SimpleNamespace(namespace="ns", name="p", uid=uid, deletion_timestamp=None, annotations={}),
        spec=SimpleNamespace(node_name="n1", containers=[SimpleNamespace(name="main", image="img")]),
        status=SimpleNamespace(phase="Pending"))


def simulator(core: FakeCore) -> NodeSimulator:
    sim = NodeSimulator(api_client=None)  # type: ignore[arg-type]
    sim.core = core  # type: ignore[assignment]
    sim.nodes.add("n1")
    return sim


def test_a_pod_is_started_once_however_often_the_watch_shows_it_pending() -> None:
    core = FakeCore("Pending")
    sim = simulator(core)
    sim._handle(pending_pod())
    sim._handle(pending_pod())  # an older version of the same pod, delivered again
    assert core.phase == "Running"
    assert len(core.patches) == 1


def test_a_finished_pod_is_not_taken_back_to_running() -> None:
    core = FakeCore("Succeeded")  # the pod ended before the simulator saw this Pending version of it
    sim = simulator(core)
    sim._handle(pending_pod())
    assert core.phase == "Succeeded"
    assert core.patches[0][0] == {"op": "test", "path": "/status/phase", "value": "Pending"}


def test_a_start_the_api_server_did_not_take_is_tried_again() -> None:
    core = FakeCore("Pending", away=1)
    sim = simulator(core)
    with pytest.raises(ConnectionRefusedError):  # the watch loop lists again and retries
        sim._handle(pending_pod())
    sim._handle(pending_pod())
    assert core.phase == "Running"
