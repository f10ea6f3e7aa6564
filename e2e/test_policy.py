"""The webhook's pod CREATE policy on the real API server: devices outside queues, owners that are verified
before they exempt a pod, and the cap on pending groups per LocalQueue.

`draq webhook` runs as a process with `--exempt-owner-kind DaemonSet --max-pending-groups 2` (and the
default device policy, require-queue).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from admission.core.labels import DEFAULT_DRAQ_USER
from admission.localcluster.controlplane import ControlPlane, free_port
from e2e.test_webhook import (
    GATE,
    REPO,
    Webhook,
    _grant_draq_pod_rights,
    _queues,
    _retry_apply,
    apply,
    create,
    gates_of,
    get,
    local_queue,
    new_namespace,
    pod,
)
from e2e.waiting import until

CAP = 2


@pytest.fixture(scope="module")
def webhook(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webhook]:
    control_plane.kubectl("apply", "-f", str(REPO / "crds"))
    control_plane.kubectl("wait", "--for=condition=Established", "crd/localqueues.draq.io",
                          "crd/clusterqueues.draq.io", "crd/quotaunits.draq.io", "crd/podgroups.draq.io",
                          "--timeout=60s")
    apply(control_plane, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "draq-system"}})
    _grant_draq_pod_rights(control_plane)
    port = free_port()
    log = tmp_path_factory.mktemp("policy") / "webhook.log"
    argv = [sys.executable, "-m", "admission.cli.main", "webhook", "--kubeconfig", str(control_plane.kubeconfig),
            "--host", "127.0.0.1", "--port", str(port), "--url", f"https://127.0.0.1:{port}",
            "--resync-seconds", "1", "--exempt-owner-kind", "DaemonSet", "--max-pending-groups", str(CAP)]
    with log.open("wb") as sink:
        process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, cwd=REPO,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
    hook = Webhook(process, port, log, uuid.uuid4().hex[:6])
    try:
        until("the webhook configurations", lambda: process.poll() is None and control_plane.kubectl(
            "get", "validatingwebhookconfiguration/draq-validating", check=False).returncode == 0, timeout=60)
        assert process.poll() is None, hook.log_tail()
        _queues(control_plane, hook.suffix)
        yield hook
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
        control_plane.kubectl("delete", "mutatingwebhookconfiguration/draq-mutating",
                              "validatingwebhookconfiguration/draq-validating", "--ignore-not-found", check=False)


def namespace_with_queue(control_plane: ControlPlane, webhook: Webhook, labels: dict[str, str]) -> str:
    ns = new_namespace(control_plane, labels)
    _retry_apply(control_plane, local_queue("gpu", ns, f"cq-{webhook.suffix}"))
    return ns


def gpu_pod(name: str, labels: dict[str, str] | None = None, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    """A pod with a DRA claim of four GPUs (from a template) and a device-plugin GPU request."""
    obj = pod(name, labels)
    obj["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "four-gpus"}]
    obj["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpus"}],
                                                 "limits": {"nvidia.com/gpu": "1"}}
    if owner is not None:
        obj["metadata"]["ownerReferences"] = [owner]
    return obj


def daemon_set(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"nodeSelector": {"draq.io/e2e-no-such-node": "true"},
                                           "containers": [{"name": "main", "image": "registry.example/agent:1"}]}}}}


def owner_ref(name: str, uid: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name, "uid": uid, "controller": True}


def test_a_gpu_pod_without_a_queue_is_refused_where_a_queue_is_required(
        control_plane: ControlPlane, webhook: Webhook) -> None:
    ns = namespace_with_queue(control_plane, webhook, {"draq.io/managed": "true"})
    admitted = create(control_plane, pod("plain-0", {"draq.io/queue": "gpu"}), "-n", ns)
    assert admitted.returncode == 0, admitted.stderr
    result = create(control_plane, gpu_pod("rogue"), "-n", ns)
    assert result.returncode != 0
    assert (f"Pod {ns}/rogue: namespace '{ns}' requires pods that use devices to go through a draq queue (the "
            "webhook's default for managed namespaces), and this pod uses ResourceClaims in spec.resourceClaims "
            "(gpus); nvidia.com/gpu in container main but names no queue") in result.stderr
    assert "Add the label draq.io/queue naming a LocalQueue" in result.stderr
    assert control_plane.kubectl("get", "pod", "rogue", "-n", ns, check=False).returncode != 0
    # A pod without devices still runs outside queues; the queued pod is untouched.
    assert create(control_plane, pod("no-devices"), "-n", ns).returncode == 0
    assert gates_of(get(control_plane, "pod", "plain-0", "-n", ns)) == [GATE]
    allowed = new_namespace(control_plane, {"draq.io/managed": "true", "draq.io/device-policy": "allow"})
    off_queue = create(control_plane, gpu_pod("server"), "-n", allowed)
    assert off_queue.returncode == 0, off_queue.stderr
    assert gates_of(json.loads(off_queue.stdout)) == []


def test_a_made_up_daemonset_owner_exempts_nothing(control_plane: ControlPlane, webhook: Webhook) -> None:
    queued = namespace_with_queue(control_plane, webhook, {"draq.io/default-queue": "gpu"})
    forged = create(control_plane, gpu_pod("forged", owner=owner_ref("agent", str(uuid.uuid4()))), "-n", queued)
    assert forged.returncode == 0, forged.stderr
    assert gates_of(json.loads(forged.stdout)) == [GATE]
    assert json.loads(forged.stdout)["metadata"]["labels"]["draq.io/queue"] == "gpu"
    assert (f"its owner DaemonSet {queued}/agent does not exist or could not be read, so it exempts the pod "
            "from nothing") in forged.stderr
    strict = new_namespace(control_plane, {"draq.io/managed": "true"})
    refused = create(control_plane, gpu_pod("forged", owner=owner_ref("agent", str(uuid.uuid4()))), "-n", strict)
    assert refused.returncode != 0
    assert (f"It is not exempt by its owner: its owner DaemonSet {strict}/agent does not exist or could not be "
            "read") in refused.stderr


def test_a_real_daemonset_owner_exempts_only_with_its_uid(control_plane: ControlPlane, webhook: Webhook) -> None:
    strict = new_namespace(control_plane, {"draq.io/managed": "true"})
    created = control_plane.kubectl("create", "-f", "-", "-o", "json", "-n", strict,
                                    input=json.dumps(daemon_set("agent")))
    uid = json.loads(created.stdout)["metadata"]["uid"]
    wrong = create(control_plane, gpu_pod("wrong-uid", owner=owner_ref("agent", str(uuid.uuid4()))), "-n", strict)
    assert wrong.returncode != 0
    assert f"names DaemonSet {strict}/agent with uid" in wrong.stderr and f"has uid {uid}" in wrong.stderr
    exempt = create(control_plane, gpu_pod("agent-pod", owner=owner_ref("agent", uid)), "-n", strict)
    assert exempt.returncode == 0, exempt.stderr
    assert gates_of(json.loads(exempt.stdout)) == []


def pod_group(name: str, ns: str) -> dict[str, Any]:
    return {"apiVersion": "draq.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": name, "namespace": ns},
            "spec": {"minMember": 1, "queue": "gpu"}}


def test_a_pod_past_the_pending_cap_is_refused(control_plane: ControlPlane, webhook: Webhook) -> None:
    ns = namespace_with_queue(control_plane, webhook, {"draq.io/managed": "true"})
    apply(control_plane, pod_group("running", ns))
    # Only draq writes PodGroup status (the webhook refuses anyone else): written as draq's ServiceAccount.
    control_plane.kubectl("patch", "podgroup.draq.io/running", "-n", ns, "--subresource=status", "--type=merge",
                          "-p", json.dumps({"status": {"phase": "Running"}}), f"--as={DEFAULT_DRAQ_USER}")
    for index in range(CAP):
        apply(control_plane, pod_group(f"waiting-{index}", ns))

    def refused() -> subprocess.CompletedProcess[str]:
        return create(control_plane, pod("one-more", {"draq.io/queue": "gpu"}), "-n", ns)

    until("the webhook to see the pending PodGroups", lambda: refused().returncode != 0, timeout=10)
    result = refused()
    assert (f"Pod {ns}/one-more would start group 'one-more' in LocalQueue {ns}/gpu, which already holds "
            f"{CAP} pending groups, at or over its cap of {CAP} (the webhook's default, as the queue sets no "
            "spec.maxPendingGroups)") in result.stderr
    # Members of groups that exist, pending or running, pass; the running group is untouched.
    for group in ("running", "waiting-0"):
        member = create(control_plane, pod(f"{group}-member", {"draq.io/queue": "gpu", "draq.io/pod-group": group}),
                        "-n", ns)
        assert member.returncode == 0, member.stderr
    assert get(control_plane, "podgroup.draq.io", "running", "-n", ns)["status"]["phase"] == "Running"
    # The queue's own cap wins over the webhook's default.
    control_plane.kubectl("patch", "localqueue.draq.io/gpu", "-n", ns, "--type=merge",
                          "-p", json.dumps({"spec": {"maxPendingGroups": CAP + 1}}))
    until("the raised cap", lambda: refused().returncode == 0, timeout=10)
