"""The operator against the real control plane: gangs released whole, quota denials explained, queue
usage shown by kubectl, and a release interrupted after recording finished by the next operator.

Pods are created gated and labelled directly (the webhook is not involved here). Each test runs its
own operator in a background thread, with leader election on a Lease in the test's namespace.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from admission.core.labels import GATE, GROUP_LABEL, GROUP_MIN_LABEL, QUEUE_LABEL
from admission.localcluster.controlplane import ControlPlane
from admission.localcluster.nodesim import NodeSimulator
from admission.operator import Operator, OperatorSettings
from admission.operator.writer import Writer
from e2e.waiting import until

GPU_CLASS = "gpu.nvidia.com"


class RunningOperator:
    """An Operator on its own event loop in a thread; `stop` cancels it (as a killed process would stop)."""

    def __init__(self, settings: OperatorSettings) -> None:
        self.settings = settings
        self.operator: Operator | None = None
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)
        self.error: BaseException | None = None

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.operator = Operator(self.settings)
        self._task = asyncio.create_task(self.operator.run())
        self._ready.set()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        except BaseException as err:  # surfaced by the test that started it
            self.error = err

    def start(self) -> RunningOperator:
        self._thread.start()
        assert self._ready.wait(30), "operator did not start"
        return self

    def stop(self) -> None:
        if self._loop is not None and self._task is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(30)
        assert not self._thread.is_alive(), "operator did not stop"


@pytest.fixture(scope="module")
def crds(control_plane: ControlPlane) -> None:
    from e2e.test_webhook import REPO
    control_plane.kubectl("apply", "-f", str(REPO / "crds"))
    control_plane.kubectl("wait", "--for=condition=Established", "crd/localqueues.draq.io", "crd/podgroups.draq.io",
                          "crd/clusterqueues.draq.io", "crd/quotaunits.draq.io", "--timeout=60s")


def settings(control_plane: ControlPlane, namespace: str, lease: str = "draq-operator") -> OperatorSettings:
    return OperatorSettings(kubeconfig=control_plane.kubeconfig, lease_namespace=namespace, lease_name=lease,
                            lease_seconds=6.0, resync_seconds=5.0)


@pytest.fixture
def operator(control_plane: ControlPlane, crds: None, namespace: str) -> Iterator[RunningOperator]:
    running = RunningOperator(settings(control_plane, namespace)).start()
    yield running
    running.stop()
    assert running.error is None, running.error


def apply(control_plane: ControlPlane, *objects: dict[str, Any]) -> None:
    control_plane.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in objects))


def queues(control_plane: ControlPlane, namespace: str, unique: str, gpus: int) -> str:
    """A QuotaUnit counting whole NVIDIA GPUs, a ClusterQueue with `gpus` of them, a LocalQueue; its name."""
    unit, cq = f"gpus-{unique}", f"cq-{unique}"
    apply(control_plane,
          {"apiVersion": "draq.io/v1alpha1", "kind": "QuotaUnit", "metadata": {"name": unit},
           "spec": {"devices": {"deviceClassNames": [GPU_CLASS]}}},
          {"apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": cq},
           "spec": {"namespaceSelector": {}, "quotas": [{"unit": unit, "nominal": gpus}]}},
          {"apiVersion": "draq.io/v1alpha1", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": namespace},
           "spec": {"clusterQueue": cq}})
    return cq


def gang(control_plane: ControlPlane, namespace: str, group: str, nodes: list[str], gpus_each: int,
         local_queue: str = "lq", priority_class: str | None = None) -> list[str]:
    """One gated pod per node (pinned by nodeSelector), each with its own claim of `gpus_each` GPUs, of
    `priority_class` when given."""
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": f"{group}-gpus", "namespace": namespace},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": gpus_each}}]}}}}
    names = [f"{group}-{i}" for i in range(len(nodes))]
    pods = [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": name, "namespace": namespace,
                          "labels": {QUEUE_LABEL: local_queue, GROUP_LABEL: group,
                                     GROUP_MIN_LABEL: str(len(nodes))}},
             "spec": {"schedulingGates": [{"name": GATE}], "nodeSelector": {"kubernetes.io/hostname": node},
                      "containers": [{"name": "main", "image": "registry.example/cuda:12",
                                      "resources": {"claims": [{"name": "gpus"}]}}],
                      "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": f"{group}-gpus"}]}}
            for name, node in zip(names, nodes, strict=True)]
    if priority_class is not None:
        for pod in pods:
            pod["spec"]["priorityClassName"] = priority_class
    apply(control_plane, template, *pods)
    return names


def priority_class(control_plane: ControlPlane, name: str, value: int) -> str:
    """A PriorityClass (cluster-wide: its name should be unique to the test); its name."""
    apply(control_plane, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                          "value": value, "preemptionPolicy": "Never"})
    return name


def pod_group(api: Any, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = client.CustomObjectsApi(api).get_namespaced_custom_object(
            "draq.io", "v1alpha1", namespace, "podgroups", name)
        return found
    except client.ApiException as err:
        if err.status == 404:
            return None
        raise


def admitted_reason(group: dict[str, Any]) -> str | None:
    """The reason of the PodGroup's Admitted condition, if it has one yet."""
    conditions = (group.get("status") or {}).get("conditions") or []
    return next((c.get("reason") for c in conditions if c.get("type") == "Admitted"), None)


def gated(api: Any, namespace: str, name: str) -> bool:
    pod = client.CoreV1Api(api).read_namespaced_pod(name, namespace)
    return GATE in [g.name for g in pod.spec.scheduling_gates or []]


def two_nodes(nodesim: NodeSimulator, unique: str) -> list[str]:
    nodes = [f"op-{unique}-a", f"op-{unique}-b"]
    for node in nodes:
        nodesim.add_node(node, "h100")
    return nodes


def test_gang_that_fits_is_released_together_and_bound(
        control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, namespace: str, unique: str,
        operator: RunningOperator) -> None:
    nodes = two_nodes(nodesim, unique)
    cq = queues(control_plane, namespace, unique, gpus=16)
    members = gang(control_plane, namespace, "train", nodes, gpus_each=4)

    core = client.CoreV1Api(api)
    bound = until("both members bound and running", lambda: all(
        (p := core.read_namespaced_pod(m, namespace)).status.phase == "Running" and p.spec.node_name
        for m in members), timeout=60)
    assert bound
    assert sorted(core.read_namespaced_pod(m, namespace).spec.node_name for m in members) == sorted(nodes)
    group = pod_group(api, namespace, "train")
    assert group is not None
    assert group["status"]["clusterQueue"] == cq
    assert group["status"]["charge"] == [{"unit": f"gpus-{unique}", "amount": "8"}]
    assert {p["name"]: p["node"] for p in group["status"]["plan"]["pods"]} == dict(zip(members, nodes, strict=True))
    until("the PodGroup to be Running", lambda: (pod_group(api, namespace, "train") or {})
          .get("status", {}).get("phase") == "Running", timeout=30)

    def usage_row() -> str:
        row: str = control_plane.kubectl("get", "clusterqueues", cq, "--no-headers").stdout
        return row

    # Usage and counts are asserted together: wait until the row shows both, whichever is written first.
    row = until("kubectl get clusterqueues to show usage 8/16, 0 pending and 1 admitted", usage_row,
                accept=lambda r: f"gpus-{unique} 8/16" in r and r.split()[-3:-1] == ["0", "1"], timeout=30)
    assert f"gpus-{unique} 8/16" in row and row.split()[-3:-1] == ["0", "1"]  # usage, pending, admitted


def test_gang_over_quota_stays_gated_with_a_reason(
        control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, namespace: str, unique: str,
        operator: RunningOperator) -> None:
    """A gang larger than its queue can ever hold waits as NeverAdmissible, and says so where people look:
    the PodGroup, each member's condition draq.io/Admitted (through pods/status) and an Event on a member."""
    nodes = two_nodes(nodesim, unique)
    cq = queues(control_plane, namespace, unique, gpus=4)
    members = gang(control_plane, namespace, "big", nodes, gpus_each=4)

    # The first message may still be "1 of 2 members exist": wait for the verdict itself.
    group = until("the PodGroup to wait with reason NeverAdmissible", lambda: pod_group(api, namespace, "big"),
                  accept=lambda g: admitted_reason(g) == "NeverAdmissible", timeout=30)
    status = group["status"]
    assert status["phase"] == "Pending"
    assert f"gpus-{unique} 8" in status["message"] and f"more than ClusterQueue {cq} can ever hold" in status["message"]
    assert "raise the queue's nominal quota or borrowing limit" in status["message"]
    [condition] = status["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == ("Admitted", "False", "NeverAdmissible")
    assert all(gated(api, namespace, m) for m in members)
    core = client.CoreV1Api(api)

    def member_conditions() -> list[Any]:
        return [next((c for c in core.read_namespaced_pod(m, namespace).status.conditions or []
                      if c.type == "draq.io/Admitted"), None) for m in members]

    told = until("each member to carry draq.io/Admitted=False", member_conditions,
                 accept=lambda found: all(c is not None for c in found), timeout=30)
    for said in told:
        assert (said.status, said.reason) == ("False", "NeverAdmissible")
        assert said.message.startswith(status["message"][:80])
        assert said.message.endswith(f"(details: draq why {namespace}/big)")
    described = control_plane.kubectl("describe", "pod", members[0], "-n", namespace).stdout
    assert "draq.io/Admitted" in described
    events = until("a Warning event on the PodGroup", lambda: [
        e for e in core.list_namespaced_event(namespace).items
        if e.involved_object.name == "big" and e.reason == "NeverAdmissible"], timeout=30)
    assert events[0].type == "Warning"
    on_member = until("a Warning event on one member", lambda: [
        e for e in core.list_namespaced_event(namespace).items
        if e.involved_object.kind == "Pod" and e.involved_object.name in members and e.reason == "NeverAdmissible"],
                      timeout=30)
    assert len(on_member) == 1 and "draq why" in on_member[0].message

    def pending_groups() -> int | None:
        queue: dict[str, Any] = client.CustomObjectsApi(api).get_cluster_custom_object(
            "draq.io", "v1alpha1", "clusterqueues", cq)
        count: int | None = queue.get("status", {}).get("pendingGroups")
        return count

    pending = until("the ClusterQueue to count exactly 1 pending group", pending_groups,
                    accept=lambda n: n == 1, timeout=30)
    assert pending == 1


def test_release_interrupted_after_recording_is_finished_after_restart(
        control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, namespace: str, unique: str,
        crds: None, monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = two_nodes(nodesim, unique)
    queues(control_plane, namespace, unique, gpus=16)
    recorded = threading.Event()

    async def killed_before_ungating(self: Writer, namespace: str, name: str, cached: Any,
                                     node: str | None = None) -> bool:
        recorded.set()
        await asyncio.Event().wait()  # never returns: the process "dies" here
        return False

    with monkeypatch.context() as patched:
        patched.setattr(Writer, "ungate", killed_before_ungating)
        first = RunningOperator(settings(control_plane, namespace)).start()
        members = gang(control_plane, namespace, "resume", nodes, gpus_each=2)
        assert recorded.wait(60), "the first operator never got to removing gates"
        first.stop()
    group = pod_group(api, namespace, "resume")
    assert group is not None and group["status"]["phase"] == "Admitted"
    assert all(gated(api, namespace, m) for m in members), "nothing may be released before the restart"

    second = RunningOperator(settings(control_plane, namespace)).start()
    try:
        until("every member released by the new operator", lambda: not any(
            gated(api, namespace, m) for m in members), timeout=60)
        until("both members running", lambda: all(
            client.CoreV1Api(api).read_namespaced_pod(m, namespace).status.phase == "Running"
            for m in members), timeout=60)
    finally:
        second.stop()
    assert second.error is None, second.error
