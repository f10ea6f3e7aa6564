"""`draq gaps` against the real control plane: simulated nodes offering GPUs through ResourceSlices, one of
them also through a device plugin; native ResourceQuotas counted by the real quota controller; pods
placed by the real scheduler. Every planted gap is found, with its size, and nothing else in the test's
namespaces and nodes. Then the operator fills the QuotaUnit and ClusterQueue status columns.

The test's nodes are tainted so that no other test's pod lands on them, and its claims use a DeviceClass
of its own (its nodes' GPUs only), so other tests' units and devices stay out of its numbers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from admission.cli.main import main
from admission.core.labels import API_VERSION, GATE, GROUP_LABEL, QUEUE_LABEL
from admission.core.simulate.profiles import NVIDIA
from admission.localcluster.controlplane import ControlPlane
from admission.localcluster.nodesim import NodeSimulator
from e2e.test_operator import RunningOperator, apply, crds, settings
from e2e.waiting import until

__all__ = ["crds"]  # the fixture, imported for this module

TAINT = "draq.io/gaps-test"
REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class World:
    unique: str
    team: str  # namespace with a LocalQueue
    sandbox: str  # namespace draq does not manage
    dra_node: str  # GPUs through ResourceSlices only
    both_node: str  # GPUs through ResourceSlices and a device plugin (nvidia.com/gpu: 8)
    device_class: str
    unit: str
    cluster_queue: str

    @property
    def extended(self) -> str:
        return f"gaps-{self.unique}.example.com/gpu"  # served through DRA by class `<device_class>-er`


@pytest.fixture(scope="module")
def world(control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, crds: None) -> Iterator[World]:
    unique = os.urandom(3).hex()
    w = World(unique, f"gaps-{unique}-team", f"gaps-{unique}-sandbox", f"gaps-{unique}-a", f"gaps-{unique}-b",
              f"gaps-{unique}.nvidia.com", f"gpus-{unique}", f"cq-gaps-{unique}")
    core = client.CoreV1Api(api)
    nodesim.add_node(w.dra_node, "h100")
    nodesim.add_node(w.both_node, "h100", device_plugin=True)
    for node in (w.dra_node, w.both_node):
        core.patch_node(node, {"spec": {"taints": [{"key": TAINT, "value": unique, "effect": "NoSchedule"}]}})
    for namespace in (w.team, w.sandbox):
        control_plane.kubectl("create", "namespace", namespace)
        control_plane.wait_for_service_account(namespace)
    selector = (f'device.driver == "{NVIDIA}" && device.attributes["{NVIDIA}"].type == "gpu" && '
                f'device.attributes["{NVIDIA}"].nvlinkDomain.startsWith("gaps-{unique}-")')
    apply(control_plane,
          device_class(w.device_class, selector), device_class(f"{w.device_class}-er", selector, w.extended),
          {"apiVersion": API_VERSION, "kind": "QuotaUnit", "metadata": {"name": w.unit},
           "spec": {"devices": {"deviceClassNames": [w.device_class]},
                    "extendedResources": [{"name": "nvidia.com/gpu"}, {"name": w.extended}]}},
          {"apiVersion": API_VERSION, "kind": "ClusterQueue", "metadata": {"name": w.cluster_queue},
           "spec": {"namespaceSelector": {}, "quotas": [{"unit": w.unit, "nominal": 16}]}},
          {"apiVersion": API_VERSION, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": w.team},
           "spec": {"clusterQueue": w.cluster_queue}})
    yield w
    for namespace in (w.team, w.sandbox):
        control_plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def device_class(name: str, selector: str, extended: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": selector}}]}
    if extended:
        spec["extendedResourceName"] = extended
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def pod(w: World, name: str, namespace: str, *, node: str | None = None, gpus: int = 0,
        requests: dict[str, str] | None = None, group: str | None = None, gated: bool = False) -> list[dict[str, Any]]:
    """A pod (and, with `gpus`, its claim template of that many GPUs of the test's class)."""
    objects: list[dict[str, Any]] = []
    container: dict[str, Any] = {"name": "main", "image": "registry.example/job:1"}
    spec: dict[str, Any] = {"containers": [container], "tolerations": [{"key": TAINT, "operator": "Exists"}]}
    if gpus:
        objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                        "metadata": {"name": f"{name}-gpus", "namespace": namespace},
                        "spec": {"spec": {"devices": {"requests": [
                            {"name": "gpu", "exactly": {"deviceClassName": w.device_class, "count": gpus}}]}}}})
        spec["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": f"{name}-gpus"}]
        container["resources"] = {"claims": [{"name": "gpus"}]}
    if requests:
        container["resources"] = {"requests": requests, "limits": requests}
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    if gated:
        spec["schedulingGates"] = [{"name": GATE}]
    labels = {QUEUE_LABEL: "lq", GROUP_LABEL: group} if group else {}
    objects.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace,
                                                                     "labels": labels}, "spec": spec})
    return objects


def gaps_report(control_plane: ControlPlane, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    capsys.readouterr()
    code = main(["gaps", "--kubeconfig", str(control_plane.kubeconfig), "-o", "json", *args])
    return code, json.loads(capsys.readouterr().out)


def ours(w: World, report: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(kind, where, measure, size) of the gaps in the test's namespaces and on its nodes."""
    mine = {w.team, w.sandbox, w.dra_node, w.both_node}
    return sorted((g["kind"], g["namespace"] or g["node"], g["measure"], g["size"]) for g in report["gaps"]
                  if g["namespace"] in mine or g["node"] in mine)


def running(api: Any, namespace: str, name: str) -> bool:
    found = client.CoreV1Api(api).read_namespaced_pod(name, namespace)
    return bool(found.spec.node_name) and found.status.phase == "Running"


def test_every_planted_gap_is_found_and_nothing_else(
        control_plane: ControlPlane, api: Any, world: World, capsys: pytest.CaptureFixture[str]) -> None:
    w = world
    via_dra = "DRAExtendedResource" in control_plane.gates()
    apply(control_plane,
          # Native quota: 4 nvidia.com/gpu (the queue gives the namespace 16: NativeQuotaLimit 12), and the
          # class's devices (16: no gap); the quota controller keeps status.used.
          {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus", "namespace": w.team},
           "spec": {"hard": {"requests.nvidia.com/gpu": "4", f"{w.device_class}.deviceclass.resource.k8s.io/devices":
                             "16"}}},
          # ChargeDiffers: the group was recorded with 1 GPU, its member's claim holds 2.
          {"apiVersion": API_VERSION, "kind": "PodGroup", "metadata": {"name": "train", "namespace": w.team},
           "spec": {"minMember": 1, "queue": "lq"}},
          *pod(w, "train-0", w.team, node=w.dra_node, gpus=2, group="train"),
          # BypassedAdmission: a pod of the queue that nobody admitted (no gate: the webhook was bypassed).
          *pod(w, "rogue", w.team, node=w.dra_node, gpus=1, group="rogue"),
          # NativeQuotaCounts: gated, holds nothing, counted 2 by the ResourceQuota.
          *pod(w, "waiting-gpu", w.team, requests={"nvidia.com/gpu": "2"}, group="waiting-gpu", gated=True),
          # UncountedExtendedResource: no unit counts example.com/fpga.
          *pod(w, "waiting-fpga", w.team, requests={"example.com/fpga": "1"}, group="waiting-fpga", gated=True),
          # OutsideQueues: 1 DRA GPU and 2 device-plugin GPUs in a namespace draq does not manage.
          *pod(w, "notebook", w.sandbox, node=w.dra_node, gpus=1),
          *pod(w, "legacy", w.sandbox, node=w.both_node, requests={"nvidia.com/gpu": "2"}))
    custom = client.CustomObjectsApi(api)
    custom.patch_namespaced_custom_object_status("draq.io", "v1alpha1", w.team, "podgroups", "train", {"status": {
        "phase": "Running", "clusterQueue": w.cluster_queue, "charge": [{"unit": w.unit, "amount": "1"}],
        "plan": {"pods": [{"name": "train-0", "node": w.dra_node}]}}})
    if via_dra:  # the scheduler serves the extended resource with a claim of class <class>-er (KEP 5004)
        apply(control_plane, *pod(w, "inference", w.team, node=w.dra_node, requests={w.extended: "1"},
                                  group="inference"))
    for namespace, name in [(w.team, "train-0"), (w.team, "rogue"), (w.sandbox, "notebook"), (w.sandbox, "legacy"),
                            *([(w.team, "inference")] if via_dra else [])]:
        until(f"pod {namespace}/{name} to run", lambda ns=namespace, n=name: running(api, ns, n), timeout=60)

    expected = sorted([
        ("ChargeDiffers", w.team, w.unit, "1"),
        ("BypassedAdmission", w.team, w.unit, "1"),
        ("UncountedExtendedResource", w.team, "example.com/fpga", "1"),
        ("NativeQuotaCounts", w.team, "requests.nvidia.com/gpu", "2"),
        ("NativeQuotaLimit", w.team, w.unit, "12"),
        ("OutsideQueues", w.sandbox, w.unit, "3"),
        ("DoubleOffered", w.both_node, w.unit, "8"),
        # The inference pod is in no admitted group either: its claim's devices (class <class>-er) are not
        # counted by the unit, so only the extended-resource gap shows.
        *([("ExtendedResourceViaDRA", w.team, w.unit, "1")] if via_dra else []),
    ])
    report = until("draq gaps to find exactly the planted gaps",
                   lambda: gaps_report(control_plane, capsys)[1], timeout=60,
                   accept=lambda r: ours(w, r) == expected)
    assert ours(w, report) == expected
    accounts = {(a["namespace"], a["clusterQueue"], a["unit"]): (a["held"], a["charged"]) for a in report["accounts"]}
    assert accounts[(w.team, w.cluster_queue, w.unit)] == ("3", "1")  # train-0's 2 and rogue's 1, charged 1
    assert accounts[(w.sandbox, "", w.unit)] == ("3", "0")
    native = [n for n in report["nativeQuota"] if n["namespace"] == w.team]
    assert {(n["resource"], n["hard"], n["used"], n["held"], n["usedFrom"]) for n in native} == {
        ("requests.nvidia.com/gpu", "4", "2", "0", "status"),
        (f"{w.device_class}.deviceclass.resource.k8s.io/devices", "16", "3", "3", "status")}

    code, filtered = gaps_report(control_plane, capsys, "--namespace", w.sandbox, "--fail-on-gap")
    assert code == 1
    assert ours(w, filtered) == [("OutsideQueues", w.sandbox, w.unit, "3")]
    code, _ = gaps_report(control_plane, capsys, "--namespace", w.sandbox, "--kind", "ChargeDiffers", "--fail-on-gap")
    assert code == 0


def test_kubectl_draq_gaps_is_the_same_command(control_plane: ControlPlane, world: World) -> None:
    plugin = shutil.which("kubectl-draq") or str(REPO / ".venv" / "bin" / "kubectl-draq")
    env = {**os.environ, "PATH": f"{Path(plugin).parent}:{os.environ.get('PATH', '')}",
           "KUBECONFIG": str(control_plane.kubeconfig)}
    result = subprocess.run([control_plane.kubectl_path, "draq", "gaps", "--namespace", world.sandbox],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert f"held outside every queue in namespace {world.sandbox}" in result.stdout


def test_the_operator_fills_the_status_columns(control_plane: ControlPlane, world: World) -> None:
    w = world
    running_operator = RunningOperator(settings(control_plane, w.team, lease=f"gaps-{w.unique}")).start()
    try:
        # 16 GPUs of the test's class on its two nodes, and 8 nvidia.com/gpu from the device plugin.
        row = until("kubectl get quotaunits to show devices, capacity and Ready", lambda: control_plane.kubectl(
            "get", "quotaunits", w.unit, "--no-headers").stdout.split(), timeout=60,
            accept=lambda r: r[-3:-1] == ["24", "True"])
        assert row[-4:-1] == ["16", "24", "True"]
        wide = until("kubectl get clusterqueues -o wide to show Active", lambda: control_plane.kubectl(
            "get", "clusterqueues", w.cluster_queue, "-o", "wide", "--no-headers").stdout.split(), timeout=60,
            accept=lambda r: "True" in r)
        assert "True" in wide
    finally:
        running_operator.stop()
    assert running_operator.error is None, running_operator.error
