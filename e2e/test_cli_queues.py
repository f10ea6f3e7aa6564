"""`draq run` under kopf, and `kubectl draq queues` / `kubectl draq why`, on the real control plane.

`draq run` runs as a process (kopf's runtime, leader election on a Lease of the test's namespace). Two
ClusterQueues share a cohort: queue A admits two gangs and borrows 4 GPUs from B, so B's own gang waits
for quota. `draq queues` shows the usage, the borrowing and the room each queue has left; `draq why`
answers in the words of the waiting group's condition, for the group and for one of its pods. Raising
B's quota is acknowledged by kopf's handler (a Reconfigured Event) and the group is admitted. kopf never
writes its annotations or finalizers on any object, and SIGTERM ends the process with the Lease given up.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from admission.cli.main import main
from admission.localcluster.controlplane import ControlPlane
from admission.localcluster.nodesim import NodeSimulator
from e2e.test_operator import GPU_CLASS, apply, crds, gang, pod_group
from e2e.waiting import until

__all__ = ["crds"]  # the fixture, imported for this module

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class World:
    unique: str
    namespace: str
    unit: str
    lender: str  # ClusterQueue B
    borrower: str  # ClusterQueue A
    nodes: tuple[str, ...]


@pytest.fixture(scope="module")
def world(control_plane: ControlPlane, nodesim: NodeSimulator, crds: None) -> Iterator[World]:
    unique = os.urandom(3).hex()
    w = World(unique, f"cli-{unique}", f"gpus-{unique}", f"b-{unique}", f"a-{unique}",
              tuple(f"cli-{unique}-{i}" for i in range(4)))
    control_plane.kubectl("create", "namespace", w.namespace)
    control_plane.wait_for_service_account(w.namespace)
    for node in w.nodes:
        nodesim.add_node(node, "h100")
    cohort = f"pool-{unique}"
    apply(control_plane,
          {"apiVersion": "draq.io/v1alpha1", "kind": "QuotaUnit", "metadata": {"name": w.unit},
           "spec": {"devices": {"deviceClassNames": [GPU_CLASS]}}},
          *({"apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": cq},
             "spec": {"namespaceSelector": {}, "cohort": cohort, "quotas": [{"unit": w.unit, "nominal": 8}]}}
            for cq in (w.borrower, w.lender)),
          *({"apiVersion": "draq.io/v1alpha1", "kind": "LocalQueue", "metadata": {"name": lq, "namespace": w.namespace},
             "spec": {"clusterQueue": cq}} for lq, cq in (("lq", w.borrower), ("lq-b", w.lender))))
    yield w
    control_plane.kubectl("delete", "namespace", w.namespace, "--wait=false", check=False)


@pytest.fixture(scope="module")
def draq(control_plane: ControlPlane, world: World, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    log = tmp_path_factory.mktemp("draq") / "draq.log"
    argv = [sys.executable, "-m", "admission.cli.main", "run", "--kubeconfig", str(control_plane.kubeconfig),
            "--namespace", world.namespace, "--identity", "draq-cli", "--no-webhook", "--metrics-port", "0",
            "--lease-seconds", "6", "--debounce", "0.05"]
    with log.open("wb") as sink:
        process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, cwd=REPO,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
    until("draq run to lead", lambda: process.poll() is not None or "leading as draq-cli" in log.read_text(),
          timeout=60)
    assert process.poll() is None, log.read_text()[-3000:]
    yield process, log
    if process.poll() is None:
        process.kill()
        process.wait(10)


def draq_cli(capsys: pytest.CaptureFixture[str], control_plane: ControlPlane, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main([argv[0], "--kubeconfig", str(control_plane.kubeconfig), *argv[1:]])
    return code, capsys.readouterr().out


def queues_json(capsys: pytest.CaptureFixture[str], control_plane: ControlPlane, w: World) -> dict[str, Any]:
    code, out = draq_cli(capsys, control_plane, "queues", w.borrower, w.lender, "-o", "json")
    assert code == 0
    return {q["name"]: q for q in json.loads(out)["clusterQueues"]}


def phase(api: Any, namespace: str, name: str) -> str:
    return str(((pod_group(api, namespace, name) or {}).get("status") or {}).get("phase") or "")


def test_queues_and_why_on_a_cohort(control_plane: ControlPlane, api: Any, world: World, draq: Any,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    w, ns = world, world.namespace
    gang(control_plane, ns, "fits", list(w.nodes[:2]), gpus_each=4)
    gang(control_plane, ns, "borrows", list(w.nodes[:2]), gpus_each=2)
    for group in ("fits", "borrows"):
        until(f"{group} to run", lambda g=group: phase(api, ns, g) == "Running", timeout=90)
    big = gang(control_plane, ns, "big", list(w.nodes[2:]), 4, local_queue="lq-b")
    waiting = until("big to wait for quota", lambda: pod_group(api, ns, "big"),
                    accept=lambda g: any(c.get("reason") == "QuotaExceeded"
                                         for c in (g.get("status") or {}).get("conditions") or []), timeout=60)
    condition = next(c for c in waiting["status"]["conditions"] if c["type"] == "Admitted")

    found = until("the queues' status to be written", lambda: queues_json(capsys, control_plane, w),
                  accept=lambda q: q[w.lender]["pendingGroups"] == 1, timeout=30)
    a, b = found[w.borrower], found[w.lender]
    assert (a["cohort"], a["admittedGroups"], a["active"]) == (f"pool-{w.unique}", 2, "True")
    assert {k: a["units"][0][k] for k in ("nominal", "used", "reserved", "borrowed", "available")} == {
        "nominal": "8", "used": "12", "reserved": "0", "borrowed": "4", "available": "4"}
    assert {k: b["units"][0][k] for k in ("used", "borrowed", "available")} == {"used": "0", "borrowed": "0",
                                                                                "available": "4"}
    code, table = draq_cli(capsys, control_plane, "queues", w.borrower, w.lender)
    assert code == 0
    assert table.splitlines()[1].split() == [w.borrower, f"pool-{w.unique}", "True", "0", "2", w.unit, "8", "12",
                                             "0", "4", "4", "unlimited", "unlimited"]

    code, said = draq_cli(capsys, control_plane, "why", "big", "-n", ns)
    assert code == 0
    assert said.strip() == f"{ns}/big waits (QuotaExceeded since {condition['lastTransitionTime']}): " \
                           f"{condition['message']}"
    assert f"unit {w.unit}: 0 in use of nominal 8, needs 8, only 4 available" in said
    code, said = draq_cli(capsys, control_plane, "why", f"pod/{big[0]}", "-n", ns, "-o", "json", "--fail-if-waiting")
    answer = json.loads(said)
    assert code == 1 and answer["group"] == f"{ns}/big" and answer["pod"] == big[0]
    assert answer["message"] == condition["message"]

    control_plane.kubectl("patch", "clusterqueue", w.lender, "--type=merge",
                          "-p", json.dumps({"spec": {"quotas": [{"unit": w.unit, "nominal": 16}]}}))
    events = until("kopf's Reconfigured Event on the ClusterQueue", lambda: [
        e for e in client.CoreV1Api(api).list_namespaced_event("default").items
        if e.involved_object.name == w.lender and e.reason == "Reconfigured"], timeout=30)
    assert events[0].message.startswith("ClusterQueue spec generation 2 seen by draq (draq-cli)")
    until("big to be admitted", lambda: phase(api, ns, "big") in ("Admitted", "Running"), timeout=60)
    code, said = draq_cli(capsys, control_plane, "why", "big", "-n", ns)
    assert said.startswith(f"{ns}/big does not wait: phase ") and f"admitted to ClusterQueue {w.lender}" in said


def test_kopf_writes_nothing_and_sigterm_gives_the_lease_up(control_plane: ControlPlane, api: Any, world: World,
                                                          draq: Any) -> None:
    process, log = draq
    ns = world.namespace
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    objects = [p.metadata.to_dict() for p in core.list_namespaced_pod(ns).items]
    objects += [c["metadata"] for c in custom.list_namespaced_custom_object(
        "resource.k8s.io", "v1", ns, "resourceclaims")["items"]]
    objects += [g["metadata"] for g in custom.list_namespaced_custom_object("draq.io", "v1alpha1", ns,
                                                                            "podgroups")["items"]]
    objects += [q["metadata"] for q in custom.list_cluster_custom_object("draq.io", "v1alpha1",
                                                                         "clusterqueues")["items"]]
    assert len(objects) > 8
    kopf_marks = [(m.get("name"), key) for m in objects
                  for key in [*(m.get("annotations") or {}), *(m.get("finalizers") or [])] if "kopf" in key]
    assert kopf_marks == []

    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0, log.read_text()[-3000:]
    lease = client.CoordinationV1Api(api).read_namespaced_lease("draq-operator", ns)
    assert not lease.spec.holder_identity
    assert "released the Lease" in log.read_text()
