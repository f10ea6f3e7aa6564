"""draq's rack choice against the scheduler's own topology-aware workload scheduling (KEP-5732, alpha gate
`TopologyAwareWorkloadScheduling` in 1.36 and 1.37) on the same cluster: two of the kit's H100 racks (4 nodes
x 8 GPUs), rack p with one GPU held, rack q with a CPU-heavy pod and no GPU held; a gang of two 8-GPU pods
that must share a rack.

draq (`draq simulate` on the live cluster, the gang asking `required: rack`) chooses best fit by free
devices: rack p (31 free GPUs against 32). The scheduler (a native PodGroup with
`schedulingConstraints.topology: [{key: <rack label>}]`, no draq) tries each rack, and among those where the
whole gang fits takes the one whose nodes' CPU and memory would be the most allocated (the NodeResourcesFit
placement score, MostAllocated; on 1.37 also the number of the gang's pods placed, equal here): rack q. It
does not count DRA devices. docs/topology.md, *KEP-5732*, records the comparison.

Runs only with DRAQ_KEP5732=1 (it starts a control plane of its own, on DRAQ_KEP5732_VERSIONS, default 1.37).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from admission.core.labels import GROUP_LABEL, GROUP_MIN_LABEL, MANAGED_LABEL, QUEUE_LABEL
from admission.core.models import TOPOLOGY_REQUIRED_ANNOTATION
from admission.core.native_gangs import expected, gang_object, pod_reference
from admission.core.simulate import RACK_LABEL
from admission.localcluster import build
from admission.localcluster.controlplane import ControlPlane
from admission.localcluster.nodesim import NodeSimulator
from e2e.test_operator import GPU_CLASS, apply
from e2e.waiting import until

GATE = "TopologyAwareWorkloadScheduling"
NAMESPACE = "kep"


def versions() -> list[str]:
    return [v.strip() for v in os.environ.get("DRAQ_KEP5732_VERSIONS", "1.37").split(",") if v.strip()]


@pytest.fixture(scope="module", autouse=True)
def cluster_scope_cleared() -> Iterator[None]:
    """This module never uses the session's control plane: no need to start it to clean it."""
    yield


@pytest.fixture(scope="module", params=versions())
def kep_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    if os.environ.get("DRAQ_KEP5732", "") in ("", "0", "false"):
        pytest.skip("compares with an alpha scheduler feature on a control plane of its own: set DRAQ_KEP5732=1")
    work_dir = Path(tempfile.mkdtemp(prefix="draq-e2e-kep5732-"))
    plane = ControlPlane(work_dir, version=request.param, alpha_gangs=True, feature_gates={GATE: True})
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()
        shutil.rmtree(work_dir, ignore_errors=True)


def claim_template(name: str, gpus: int) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": gpus}}]}}}}


def pod(name: str, *, template: str | None = None, node: str | None = None, cpu: str | None = None,
        labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "registry.example/cuda:12", "resources": {}}
    spec: dict[str, Any] = {"containers": [container], **(extra or {})}
    if template is not None:
        container["resources"]["claims"] = [{"name": "gpus"}]
        spec["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": template}]
    if cpu is not None:
        container["resources"]["requests"] = {"cpu": cpu, "memory": "512Gi"}
    if node is not None:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "v1", "kind": "Pod", "spec": spec,
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels or {},
                         "annotations": annotations or {}}}


def draq_objects() -> list[dict[str, Any]]:
    """The queue side and the gang as draq would see it: members asking `required: rack`."""
    return [
        {"apiVersion": "draq.io/v1alpha1", "kind": "Topology", "metadata": {"name": "racks"},
         "spec": {"levels": [{"name": "rack", "nodeLabel": RACK_LABEL}]}},
        {"apiVersion": "draq.io/v1alpha1", "kind": "QuotaUnit", "metadata": {"name": "gpus"},
         "spec": {"devices": {"deviceClassNames": [GPU_CLASS]}}},
        {"apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
         "spec": {"namespaceSelector": {}, "topologyName": "racks", "quotas": [{"unit": "gpus", "nominal": 64}]}},
        {"apiVersion": "draq.io/v1alpha1", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": NAMESPACE},
         "spec": {"clusterQueue": "cq"}},
        *(pod(f"draq-gang-{i}", template="eight",
              labels={QUEUE_LABEL: "lq", GROUP_LABEL: "draq-gang", GROUP_MIN_LABEL: "2"},
              annotations={TOPOLOGY_REQUIRED_ANNOTATION: "rack"}) for i in range(2)),
    ]


def draq_rack(plane: ControlPlane, work: Path, rack_of: dict[str, str]) -> str:
    """The rack `draq simulate` plans the gang in, reading the live cluster."""
    changes = work / "draq-gang.yaml"
    changes.write_text(yaml.safe_dump_all(draq_objects()))
    argv = [sys.executable, "-m", "admission.cli.main", "simulate", "--kubeconfig", str(plane.kubeconfig),
            "-f", str(changes), "--quiet", "-o", "json", "--expect-admitted", f"{NAMESPACE}/draq-gang"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    groups = json.loads(result.stdout)["simulation"]["groups"]
    [gang] = [g for g in groups if g["group"] == f"{NAMESPACE}/draq-gang"]
    [rack] = {rack_of[n["node"]] for n in gang["nodes"]}
    return rack


def test_draq_and_the_scheduler_choose_racks_by_different_measures(kep_plane: ControlPlane) -> None:
    plane, api = kep_plane, kep_plane.client()
    served = expected(build.resolve_version(kep_plane.version).lstrip("v"))
    assert served is not None and served.kind == "PodGroup"
    work = Path(tempfile.mkdtemp(prefix="draq-e2e-kep5732-run-"))
    core = client.CoreV1Api(api)
    with NodeSimulator(api) as sim, contextlib.ExitStack() as cleanup:
        cleanup.callback(shutil.rmtree, work, ignore_errors=True)
        sim.apply_device_classes()
        rack_of = {node: rack for rack in ("p", "q") for node in sim.add_rack(rack, "h100")}
        apply(plane, {"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": NAMESPACE, "labels": {MANAGED_LABEL: "true"}}})
        plane.wait_for_service_account(NAMESPACE)
        apply(plane, claim_template("one", 1), claim_template("eight", 8),
              pod("gpu-holder", template="one", node="p-0"), pod("cpu-heavy", cpu="64", node="q-0"))
        until("the holder and the CPU-heavy pod running", lambda: all(
            core.read_namespaced_pod(n, NAMESPACE).status.phase == "Running" for n in ("gpu-holder", "cpu-heavy")),
            timeout=60)

        assert draq_rack(plane, work, rack_of) == "p"

        gang = gang_object(served, NAMESPACE, "scheduler-gang", 2)
        gang["spec"]["schedulingConstraints"] = {"topology": [{"key": RACK_LABEL}]}
        apply(plane, gang, *(pod(f"scheduler-gang-{i}", template="eight",
                                 extra={served.pod_field: pod_reference(served, "scheduler-gang")})
                             for i in range(2)))
        bound = until("the scheduler's gang bound", lambda: [
            core.read_namespaced_pod(f"scheduler-gang-{i}", NAMESPACE).spec.node_name for i in range(2)],
            accept=all, timeout=120)
        assert {rack_of[n] for n in bound} == {"q"}, bound
