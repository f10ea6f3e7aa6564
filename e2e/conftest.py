"""Fixtures for tests against the real local control plane (built from the Kubernetes Go modules).

The control plane starts once per test session and stops at the end. Its work directory (PKI,
etcd data, one log per component) is removed after a green run and kept, with its path printed,
when any test failed. `DRAQ_KUBERNETES_VERSION=1.34` selects the compatibility release and
`DRAQ_ALPHA_DRA=1` turns on the alpha DRA feature gates in every component.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from admission.localcluster.controlplane import ControlPlane
from admission.localcluster.nodesim import NodeSimulator
from admission.webhook.configurations import MUTATING_NAME, VALIDATING_NAME

_failed: list[str] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        _failed.append(item.nodeid)


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    work_dir = Path(tempfile.mkdtemp(prefix="draq-e2e-"))
    plane = ControlPlane(work_dir, version=os.environ.get("DRAQ_KUBERNETES_VERSION") or None,
                         alpha_dra=os.environ.get("DRAQ_ALPHA_DRA", "") not in ("", "0", "false"))
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()
        if _failed:
            print(f"\ncontrol-plane logs kept in {plane.logs_dir} (failed: {len(_failed)} tests)")
        else:
            shutil.rmtree(work_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def api(control_plane: ControlPlane) -> Any:
    return control_plane.client()


@pytest.fixture(scope="session")
def nodesim(api: Any) -> Iterator[NodeSimulator]:
    sim = NodeSimulator(api)
    sim.apply_device_classes()
    sim.start()
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture(scope="module", autouse=True)
def cluster_scope_cleared(control_plane: ControlPlane) -> Iterator[None]:
    """Remove draq's cluster-scoped objects after each module.

    QuotaUnits and ClusterQueues are cluster-wide: one a module leaves behind would charge (or
    limit) the next module's claims, so every module starts with none of them. The webhook
    configurations a module's draq published go too: they would send the next module's pods to a
    webhook that is no longer there.
    """
    yield
    control_plane.kubectl("delete", "quotaunits.draq.io,clusterqueues.draq.io", "--all", "--ignore-not-found",
                          "--wait=false", check=False)
    control_plane.kubectl("delete", f"mutatingwebhookconfigurations/{MUTATING_NAME}",
                          f"validatingwebhookconfigurations/{VALIDATING_NAME}", "--ignore-not-found", check=False)


@pytest.fixture
def namespace(control_plane: ControlPlane) -> Iterator[str]:
    """A fresh namespace whose default ServiceAccount exists (pods can be created at once)."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    control_plane.kubectl("create", "namespace", name)
    control_plane.wait_for_service_account(name)
    yield name
    control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:6]
