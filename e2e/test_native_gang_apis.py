"""Native gangs through `draq run` (webhook and operator) on each release's gang API, and the refusal of a
pod that names a gang of an API the cluster does not serve.

With DRAQ_ALPHA_GANGS=1 a control plane with native gangs on (one per release in DRAQ_GANG_VERSIONS, else
the default release) takes a group of two pods created without any gang field: the webhook sets the
served API's field (`spec.workloadRef` on 1.35, `spec.schedulingGroup` on 1.36 and 1.37), the operator
creates the Workload or PodGroup before it releases them, and the scheduler binds both. On the session's
control plane (gang APIs off) a pod naming a gang is refused with the reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from admission.core.labels import GROUP_LABEL, GROUP_MIN_LABEL, MANAGED_LABEL, QUEUE_LABEL
from admission.core.native_gangs import GANG_APIS, gang_name, pod_reference
from admission.localcluster.controlplane import ControlPlane, ControlPlaneError, gang_api
from admission.localcluster.nodesim import NodeSimulator
from e2e.draq_process import DraqProcess
from e2e.test_gang_differential import gang_versions
from e2e.test_metrics import service_account_kubeconfig, start_draq
from e2e.test_operator import GPU_CLASS, apply, crds, queues
from e2e.waiting import until

__all__ = ["crds"]


def template(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": 1}}]}}}}


def pod(namespace: str, name: str, group: str, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {QUEUE_LABEL: "lq", GROUP_LABEL: group, GROUP_MIN_LABEL: "2"}},
            "spec": {"containers": [{"name": "main", "image": "registry.example/cuda:12",
                                     "resources": {"claims": [{"name": "gpu"}]}}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}], **(spec or {})}}


def started(plane: ControlPlane, work: Path) -> DraqProcess:
    """`draq run` on the plane as draq's ServiceAccount (only it may release pods); its log's tail in the
    failure when it does not become ready."""
    log = work / "draq.log"
    try:
        return start_draq(service_account_kubeconfig(plane, work), log)
    except AssertionError as err:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:]) if log.exists() else "(no log)"
        raise AssertionError(f"{err}\ndraq's log:\n{tail}") from None


def managed_namespace(plane: ControlPlane, unique: str) -> str:
    namespace = f"nga-{unique}"
    apply(plane, {"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": namespace, "labels": {MANAGED_LABEL: "true"}}})
    plane.wait_for_service_account(namespace)
    apply(plane, template(namespace))
    queues(plane, namespace, unique, gpus=8)
    return namespace


@pytest.fixture(scope="module", params=gang_versions(), ids=lambda v: v or "default")
def gang_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    if os.environ.get("DRAQ_ALPHA_GANGS", "") in ("", "0", "false"):
        pytest.skip("native gang scheduling is alpha/beta: set DRAQ_ALPHA_GANGS=1 (make e2e-gangs does)")
    from e2e.test_webhook import REPO

    work_dir = Path(tempfile.mkdtemp(prefix="draq-e2e-gang-apis-"))
    plane = ControlPlane(work_dir, version=request.param, alpha_gangs=True)
    plane.start()
    try:
        plane.kubectl("apply", "-f", str(REPO / "crds"))
        plane.kubectl("wait", "--for=condition=Established", "crd/podgroups.draq.io", "--timeout=60s")
        yield plane
    finally:
        plane.stop()
        shutil.rmtree(work_dir, ignore_errors=True)


def test_the_webhook_sets_the_served_apis_field_and_the_operator_makes_the_gang(
        gang_plane: ControlPlane, unique: str) -> None:
    served = next(g for g in GANG_APIS if g.version == gang_api(gang_plane.minor()))
    api = gang_plane.client()
    work = Path(tempfile.mkdtemp(prefix="draq-e2e-gang-apis-run-"))
    with NodeSimulator(api) as sim, _removed(work):
        sim.apply_device_classes()
        sim.add_node(f"nga-{unique}", "h100")
        namespace = managed_namespace(gang_plane, unique)
        draq = started(gang_plane, work)
        try:
            apply(gang_plane, *(pod(namespace, f"m-{i}", "pair") for i in range(2)))
            core = client.CoreV1Api(api)
            pods = until("both members bound",
                         lambda: [core.read_namespaced_pod(f"m-{i}", namespace) for i in range(2)],
                         accept=lambda ps: all(p.spec.node_name for p in ps), timeout=120)
            for member in pods:
                # Read as stored: the client's PodSpec model knows only the newest release's gang field.
                stored = json.loads(gang_plane.kubectl("get", "pod", member.metadata.name, "-n", namespace,
                                                       "-o", "json").stdout)
                field = stored["spec"].get(served.pod_field)
                assert field == pod_reference(served, "pair"), (served.pod_field, field)
            made = client.CustomObjectsApi(api).get_namespaced_custom_object(
                "scheduling.k8s.io", served.version, namespace, served.plural, gang_name("pair"))
            assert made["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "draq"}
            assert f"native gangs on: {served.describe()}" in draq.log.read_text()
        finally:
            draq.stop()


def test_a_pod_naming_a_gang_the_cluster_does_not_serve_is_refused(
        control_plane: ControlPlane, crds: None, unique: str) -> None:
    if control_plane.alpha_gangs:
        pytest.skip("the session's control plane serves a gang API")
    # The field the release's Pod type has (1.36 removed workloadRef): the webhook sees it, the gates are off.
    minor = control_plane.minor()
    field = {"workloadRef": {"name": "mine", "podGroup": "workers"}} if minor < 36 else \
        {"schedulingGroup": {"podGroupName": "mine"}}
    work = Path(tempfile.mkdtemp(prefix="draq-e2e-gang-apis-off-"))
    namespace = managed_namespace(control_plane, unique)
    with _removed(work):
        refused_by_draq(control_plane, namespace, field, work)


def refused_by_draq(control_plane: ControlPlane, namespace: str, field: dict[str, Any], work: Path) -> None:
    draq = started(control_plane, work)
    try:
        with pytest.raises(ControlPlaneError) as refused:
            apply(control_plane, pod(namespace, "named", "mine", field))
        assert f"spec.{next(iter(field))} names a native gang of scheduling.k8s.io/" in str(refused.value)
        assert "which this cluster does not serve" in str(refused.value)
        assert "native gangs off: " in draq.log.read_text()
    finally:
        draq.stop()


@contextlib.contextmanager
def _removed(directory: Path) -> Iterator[None]:
    try:
        yield
    finally:
        shutil.rmtree(directory, ignore_errors=True)
