"""draq's admission webhooks called by the real API server over TLS (`draq webhook` as a process).

The webhook runs with `--url https://127.0.0.1:<port>`: it makes its CA (kept in a Secret in
draq-system), serves over TLS and writes its webhook configurations with that CA as caBundle.
The last test stops it and checks what still works: kube-system and unmanaged namespaces do,
managed pods are refused.
"""

from __future__ import annotations

import base64
import datetime as dt
import http.client
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from admission.localcluster.controlplane import ControlPlane, ControlPlaneError, free_port
from admission.webhook.certificates import issue_serving, new_ca
from e2e.waiting import until

REPO = Path(__file__).resolve().parents[1]
GATE = "draq.io/admission"
DRAQ_USER = "system:serviceaccount:draq-system:draq"
AS_DRAQ = f"--as={DRAQ_USER}"


@dataclass
class Webhook:
    process: subprocess.Popen[bytes]
    port: int
    log: Path
    suffix: str  # makes cluster-scoped names unique in a shared control plane

    def log_tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])


def apply(control_plane: ControlPlane, *objects: dict[str, Any]) -> None:
    control_plane.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in objects))


def create(control_plane: ControlPlane, obj: dict[str, Any], *flags: str) -> subprocess.CompletedProcess[str]:
    return control_plane.kubectl("create", "-f", "-", "-o", "json", *flags, input=json.dumps(obj), check=False)


def get(control_plane: ControlPlane, *args: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(control_plane.kubectl("get", *args, "-o", "json").stdout)
    return result


def namespace(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def pod(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {"containers": [{"name": "main", "image": "registry.example/app:1"}]}}


def gates_of(obj: dict[str, Any]) -> list[str]:
    return [g["name"] for g in obj["spec"].get("schedulingGates") or []]


def wait_for_service_account(control_plane: ControlPlane, ns: str) -> None:
    until(f"the default ServiceAccount of {ns}", lambda: control_plane.kubectl(
        "get", "serviceaccount", "default", "-n", ns, check=False).returncode == 0)


def new_namespace(control_plane: ControlPlane, labels: dict[str, str]) -> str:
    name = f"wh-{uuid.uuid4().hex[:8]}"
    apply(control_plane, namespace(name, labels))
    wait_for_service_account(control_plane, name)
    return name


@pytest.fixture(scope="module")
def webhook(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webhook]:
    control_plane.kubectl("apply", "-f", str(REPO / "crds"))
    control_plane.kubectl("wait", "--for=condition=Established", "crd/localqueues.draq.io",
                          "crd/clusterqueues.draq.io", "crd/quotaunits.draq.io", "--timeout=60s")
    apply(control_plane, namespace("draq-system", {}))
    _grant_draq_pod_rights(control_plane)
    port = free_port()
    log = tmp_path_factory.mktemp("webhook") / "webhook.log"
    argv = [sys.executable, "-m", "admission.cli.main", "webhook", "--kubeconfig", str(control_plane.kubeconfig),
            "--host", "127.0.0.1", "--port", str(port), "--url", f"https://127.0.0.1:{port}",
            "--resync-seconds", "1"]
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
        # Leave no configuration with failurePolicy Fail behind for the rest of the session.
        control_plane.kubectl("delete", "mutatingwebhookconfiguration/draq-mutating",
                              "validatingwebhookconfiguration/draq-validating", "--ignore-not-found", check=False)


def _grant_draq_pod_rights(control_plane: ControlPlane) -> None:
    apply(
        control_plane,
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "draq", "namespace": "draq-system"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "draq-e2e-webhook-pods"},
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "patch", "update"]},
                   {"apiGroups": ["draq.io"], "resources": ["podgroups/status"], "verbs": ["patch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "draq-e2e-webhook-pods"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "draq-e2e-webhook-pods"},
         "subjects": [{"kind": "ServiceAccount", "name": "draq", "namespace": "draq-system"}]},
    )


def _queues(control_plane: ControlPlane, suffix: str) -> None:
    apply(
        control_plane,
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": f"e2e-gpu-{suffix}"},
         "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}},
        {"apiVersion": "draq.io/v1alpha1", "kind": "QuotaUnit", "metadata": {"name": f"gpus-{suffix}"},
         "spec": {"devices": {"deviceClassNames": [f"e2e-gpu-{suffix}"]}}},
    )
    _retry_apply(control_plane, {"apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue",
                                 "metadata": {"name": f"cq-{suffix}"},
                                 "spec": {"namespaceSelector": {},
                                          "quotas": [{"unit": f"gpus-{suffix}", "nominal": 4}]}})


def _retry_apply(control_plane: ControlPlane, obj: dict[str, Any]) -> None:
    """The webhook's cache sees a just-created referent a moment later (or fetches it on a miss)."""
    until(f"{obj['kind']} {obj['metadata']['name']} to be accepted",
          lambda: create(control_plane, obj).returncode == 0 or _exists(control_plane, obj), timeout=10)


def _exists(control_plane: ControlPlane, obj: dict[str, Any]) -> bool:
    ns = obj["metadata"].get("namespace")
    args = ["get", f"{obj['kind'].lower()}.draq.io/{obj['metadata']['name']}", *(["-n", ns] if ns else [])]
    return control_plane.kubectl(*args, check=False).returncode == 0


def local_queue(name: str, ns: str, cluster_queue: str) -> dict[str, Any]:
    return {"apiVersion": "draq.io/v1alpha1", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": ns}, "spec": {"clusterQueue": cluster_queue}}


@pytest.fixture
def managed(control_plane: ControlPlane, webhook: Webhook) -> Iterator[str]:
    """A namespace with `draq.io/managed: "true"` and LocalQueue `gpu`."""
    ns = new_namespace(control_plane, {"draq.io/managed": "true"})
    _retry_apply(control_plane, local_queue("gpu", ns, f"cq-{webhook.suffix}"))
    yield ns
    control_plane.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def test_managed_pod_is_gated_and_labelled(control_plane: ControlPlane, managed: str) -> None:
    result = create(control_plane, {**pod("train-0", {"draq.io/queue": "gpu"})}, "-n", managed)
    assert result.returncode == 0, result.stderr
    created = json.loads(result.stdout)
    assert gates_of(created) == [GATE]
    labels = created["metadata"]["labels"]
    assert labels["draq.io/queue"] == "gpu"
    assert labels["draq.io/pod-group"] == "train-0" and labels["draq.io/group-min"] == "1"
    assert gates_of(get(control_plane, "pod", "train-0", "-n", managed)) == [GATE]


def test_pods_without_a_queue_and_unmanaged_namespaces_are_untouched(
        control_plane: ControlPlane, managed: str, webhook: Webhook) -> None:
    plain = new_namespace(control_plane, {})
    try:
        for ns, obj in ((managed, pod("no-queue")), (plain, pod("unlabelled", {"app": "web"}))):
            result = create(control_plane, obj, "-n", ns)
            assert result.returncode == 0, result.stderr
            created = json.loads(result.stdout)
            assert gates_of(created) == []
            assert "draq.io/pod-group" not in (created["metadata"].get("labels") or {})
    finally:
        control_plane.kubectl("delete", "namespace", plain, "--wait=false", check=False)


def test_a_queue_outside_managed_namespaces_is_refused_never_run_unmanaged(
        control_plane: ControlPlane, webhook: Webhook) -> None:
    """No silent bypass: a pod or a Job that names a draq queue in a namespace without draq's labels."""
    plain = new_namespace(control_plane, {})
    try:
        refused = create(control_plane, pod("labelled", {"draq.io/queue": "gpu"}), "-n", plain)
        assert refused.returncode != 0
        assert f"Pod {plain}/labelled names draq queue 'gpu'" in refused.stderr
        assert f"kubectl label namespace {plain} draq.io/managed=true" in refused.stderr
        with pytest.raises(ControlPlaneError):
            control_plane.kubectl("get", "pod", "labelled", "-n", plain)
        job = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": "train", "labels": {"draq.io/queue": "gpu"}},
               "spec": {"template": {"spec": {"restartPolicy": "Never",
                                              "containers": [{"name": "c", "image": "busybox"}]}}}}
        refused_job = create(control_plane, job, "-n", plain)
        assert refused_job.returncode != 0 and f"Job {plain}/train names draq queue 'gpu'" in refused_job.stderr
    finally:
        control_plane.kubectl("delete", "namespace", plain, "--wait=false", check=False)


def test_default_queue_namespace_gates_every_pod(control_plane: ControlPlane, webhook: Webhook) -> None:
    ns = new_namespace(control_plane, {"draq.io/default-queue": "batch"})
    try:
        _retry_apply(control_plane, local_queue("batch", ns, f"cq-{webhook.suffix}"))
        result = create(control_plane, pod("worker"), "-n", ns)
        assert result.returncode == 0, result.stderr
        created = json.loads(result.stdout)
        assert gates_of(created) == [GATE] and created["metadata"]["labels"]["draq.io/queue"] == "batch"
    finally:
        control_plane.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def test_a_namespace_labelled_before_its_local_queue_blames_the_namespace_label(
        control_plane: ControlPlane, webhook: Webhook) -> None:
    ns = new_namespace(control_plane, {"draq.io/default-queue": "later"})
    try:
        result = create(control_plane, pod("nginx"), "-n", ns)  # a plain pod: no label, no device
        assert result.returncode != 0
        assert f"namespace '{ns}' has the label draq.io/default-queue=later" in result.stderr
        assert f"kubectl label namespace {ns} draq.io/default-queue-" in result.stderr
        assert "(from label draq.io/queue)" not in result.stderr
        _retry_apply(control_plane, local_queue("later", ns, f"cq-{webhook.suffix}"))
        created = until("the pod accepted once its LocalQueue exists",
                        lambda: create(control_plane, pod("nginx"), "-n", ns),
                        accept=lambda r: r.returncode == 0, timeout=10)
        assert gates_of(json.loads(created.stdout)) == [GATE]
    finally:
        control_plane.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def test_job_pods_form_a_group_named_after_the_job(control_plane: ControlPlane, managed: str) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
           "spec": {"parallelism": 3, "completions": 6, "template": {
               "metadata": {"labels": {"draq.io/queue": "gpu"}},
               "spec": {"restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "registry.example/app:1"}]}}}}
    assert create(control_plane, job, "-n", managed).returncode == 0

    def three_pods() -> list[dict[str, Any]] | None:
        items = get(control_plane, "pods", "-n", managed, "-l", "batch.kubernetes.io/job-name=train")["items"]
        return items if len(items) == 3 else None

    pods = until("the Job's three pods", three_pods, timeout=60)
    for member in pods:
        labels = member["metadata"]["labels"]
        assert labels["draq.io/pod-group"] == "train" and labels["draq.io/group-min"] == "3"
        assert gates_of(member) == [GATE]


def owned_pods(control_plane: ControlPlane, namespace: str, selector: str, count: int) -> list[dict[str, Any]]:
    def found() -> list[dict[str, Any]] | None:
        items = get(control_plane, "pods", "-n", namespace, "-l", selector)["items"]
        return items if len(items) == count else None

    return until(f"{count} pods with {selector}", found, timeout=60)


def test_a_jobs_queue_label_reaches_its_pods(control_plane: ControlPlane, managed: str) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "labelled", "labels": {"draq.io/queue": "gpu"}},
           "spec": {"parallelism": 2, "template": {"spec": {
               "restartPolicy": "Never", "containers": [{"name": "main", "image": "registry.example/app:1"}]}}}}
    assert create(control_plane, job, "-n", managed).returncode == 0
    for member in owned_pods(control_plane, managed, "batch.kubernetes.io/job-name=labelled", 2):
        labels = member["metadata"]["labels"]
        assert (labels["draq.io/queue"], labels["draq.io/pod-group"], labels["draq.io/group-min"]) == (
            "gpu", "labelled", "2")


def test_pod_naming_a_missing_queue_is_refused(control_plane: ControlPlane, managed: str) -> None:
    result = create(control_plane, pod("lost", {"draq.io/queue": "nope"}), "-n", managed)
    assert result.returncode != 0
    assert "LocalQueue 'nope'" in result.stderr and "does not exist" in result.stderr
    assert "Create it" in result.stderr


def test_only_draq_removes_the_gate(control_plane: ControlPlane, managed: str) -> None:
    assert create(control_plane, pod("gated", {"draq.io/queue": "gpu"}), "-n", managed).returncode == 0
    remove = ["patch", "pod", "gated", "-n", managed, "--type=json",
              "-p", '[{"op": "remove", "path": "/spec/schedulingGates"}]']
    refused = control_plane.kubectl(*remove, check=False)
    assert refused.returncode != 0 and f"only draq ({DRAQ_USER})" in refused.stderr
    assert gates_of(get(control_plane, "pod", "gated", "-n", managed)) == [GATE]
    control_plane.kubectl(*remove, AS_DRAQ)
    assert gates_of(get(control_plane, "pod", "gated", "-n", managed)) == []


def test_admitted_pod_keeps_its_queue_and_group(control_plane: ControlPlane, managed: str) -> None:
    assert create(control_plane, pod("admitted", {"draq.io/queue": "gpu"}), "-n", managed).returncode == 0
    control_plane.kubectl("patch", "pod", "admitted", "-n", managed, "--type=json", AS_DRAQ,
                          "-p", '[{"op": "remove", "path": "/spec/schedulingGates"}]')
    for label in ("draq.io/queue=other", "draq.io/pod-group=elsewhere", "draq.io/group-min=5"):
        refused = control_plane.kubectl("label", "pod", "admitted", "-n", managed, "--overwrite", label,
                                        check=False)
        assert refused.returncode != 0 and "cannot change" in refused.stderr, label
    control_plane.kubectl("label", "pod", "admitted", "-n", managed, "team=ml")  # other labels are fine


def test_local_queue_naming_a_missing_cluster_queue_is_refused(control_plane: ControlPlane, managed: str) -> None:
    result = create(control_plane, local_queue("orphan", managed, "no-such-cluster-queue"))
    assert result.returncode != 0
    assert "ClusterQueue 'no-such-cluster-queue' does not exist" in result.stderr


def test_local_queue_naming_a_cluster_queue_without_namespace_selector_is_refused(
        control_plane: ControlPlane, webhook: Webhook, managed: str) -> None:
    closed = f"closed-{webhook.suffix}"
    _retry_apply(control_plane, {"apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": closed},
                                 "spec": {"quotas": [{"unit": f"gpus-{webhook.suffix}", "nominal": 4}]}})
    refused = until("the webhook to know the closed ClusterQueue", lambda: create(
        control_plane, local_queue("closed", managed, closed)), accept=lambda r: "does not exist" not in r.stderr,
        timeout=10)
    assert refused.returncode != 0
    assert (f"ClusterQueue '{closed}' has no spec.namespaceSelector, so it serves no namespace. Its administrator "
            "sets a namespaceSelector that matches this namespace (or {} for every namespace), or point to another "
            "ClusterQueue") in refused.stderr


def test_cluster_queue_quoting_a_missing_quota_unit_is_accepted_with_a_warning(control_plane: ControlPlane,
                                                                               webhook: Webhook) -> None:
    cluster_queue = {"apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue",
                     "metadata": {"name": f"early-{webhook.suffix}"},
                     "spec": {"namespaceSelector": {}, "quotas": [{"unit": f"missing-{webhook.suffix}", "nominal": 1}]}}
    result = create(control_plane, cluster_queue)
    try:
        assert result.returncode == 0, result.stderr
        assert f"QuotaUnit 'missing-{webhook.suffix}' does not exist yet" in result.stderr
    finally:
        control_plane.kubectl("delete", f"clusterqueue/early-{webhook.suffix}", "--ignore-not-found", check=False)


def gpu_claim(name: str, suffix: str, count: int, selector: str | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": f"e2e-gpu-{suffix}", "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "labels": {"draq.io/queue": "gpu"}},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}


def test_claims_are_checked_against_selectors_and_quota(
        control_plane: ControlPlane, managed: str, webhook: Webhook) -> None:
    fits = create(control_plane, gpu_claim("fits", webhook.suffix, 4), "-n", managed)
    assert fits.returncode == 0, fits.stderr
    too_big = create(control_plane, gpu_claim("too-big", webhook.suffix, 8), "-n", managed)
    assert too_big.returncode != 0
    assert "could never be admitted" in too_big.stderr and "asks for 8" in too_big.stderr
    assert "at most 4" in too_big.stderr
    # Valid for the API server (it only checks CEL syntax up to a cost), but not a boolean selector.
    broken = create(control_plane, gpu_claim("broken", webhook.suffix, 1, selector='device.driver + "x"'),
                    "-n", managed)
    assert broken.returncode != 0
    assert "selectors[0].cel.expression" in broken.stderr


def test_a_job_whose_pods_together_exceed_the_queue_is_refused_at_creation(
        control_plane: ControlPlane, managed: str, webhook: Webhook) -> None:
    """Each pod's claim fits the queue (2 of 4 GPUs); three pods at once never do."""
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "two-gpus"},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                    "deviceClassName": f"e2e-gpu-{webhook.suffix}", "count": 2}}]}}}}
    assert create(control_plane, template, "-n", managed).returncode == 0

    def job(name: str, parallelism: int) -> dict[str, Any]:
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": {"draq.io/queue": "gpu"}},
                "spec": {"parallelism": parallelism, "completions": parallelism, "template": {
                    "metadata": {"labels": {"draq.io/queue": "gpu"}},
                    "spec": {"restartPolicy": "Never", "resourceClaims": [{"name": "g",
                                                                             "resourceClaimTemplateName": "two-gpus"}],
                             "containers": [{"name": "main", "image": "registry.example/app:1",
                                             "resources": {"claims": [{"name": "g"}]}}]}}}}

    refused = create(control_plane, job("too-wide", 3), "-n", managed)
    assert refused.returncode != 0
    assert f"Job {managed}/too-wide could never be admitted by LocalQueue 'gpu'" in refused.stderr
    assert f"gpus-{webhook.suffix}: its 3 pods ask for 6 together, the queue can hold at most 4" in refused.stderr
    fits = create(control_plane, job("fits", 2), "-n", managed)
    assert fits.returncode == 0, fits.stderr


def test_ca_bundle_is_the_ca_kept_in_the_secret(control_plane: ControlPlane, webhook: Webhook) -> None:
    secret = get(control_plane, "secret", "draq-webhook-ca", "-n", "draq-system")
    ca = secret["data"]["ca.crt"]
    for kind, name in (("mutatingwebhookconfiguration", "draq-mutating"),
                       ("validatingwebhookconfiguration", "draq-validating")):
        for hook in get(control_plane, kind, name)["webhooks"]:
            assert hook["clientConfig"]["caBundle"] == ca, hook["name"]
    served = ssl.get_server_certificate(("127.0.0.1", webhook.port))
    issued = x509.load_pem_x509_certificate(served.encode())
    issued.verify_directly_issued_by(x509.load_pem_x509_certificate(base64.b64decode(ca)))


def test_edited_ca_bundle_is_repaired(control_plane: ControlPlane, webhook: Webhook) -> None:
    control_plane.kubectl("patch", "mutatingwebhookconfiguration", "draq-mutating", "--type=json", "-p",
                          '[{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": "eA=="}]')
    ca = get(control_plane, "secret", "draq-webhook-ca", "-n", "draq-system")["data"]["ca.crt"]
    until("the caBundle to be repaired", lambda: get(
        control_plane, "mutatingwebhookconfiguration", "draq-mutating")["webhooks"][0]["clientConfig"]
        ["caBundle"] == ca, timeout=30)


def test_external_certificate_files_are_served_and_reloaded(
        control_plane: ControlPlane, webhook: Webhook, tmp_path: Path) -> None:
    """The cert-manager way: draq serves mounted files and picks up their renewal."""
    now = dt.datetime.now(dt.UTC)
    ca = new_ca("external-ca", now)
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    first = issue_serving(ca, ["127.0.0.1"], now)
    cert.write_bytes(first.cert_pem)
    key.write_bytes(first.key_pem)
    port = free_port()
    argv = [sys.executable, "-m", "admission.cli.main", "webhook", "--kubeconfig", str(control_plane.kubeconfig),
            "--host", "127.0.0.1", "--port", str(port), "--url", f"https://127.0.0.1:{port}",
            "--no-configurations", "--cert-file", str(cert), "--key-file", str(key),
            "--cert-reload-seconds", "0.5"]
    log = tmp_path / "external.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        def serial() -> int | None:
            try:
                pem = ssl.get_server_certificate(("127.0.0.1", port), timeout=2)
            except OSError:
                return None
            return x509.load_pem_x509_certificate(pem.encode()).serial_number

        until("the external certificate to be served", lambda: serial() == first.certificate.serial_number,
              timeout=60)
        second = issue_serving(ca, ["127.0.0.1"], now)
        key.write_bytes(second.key_pem)
        cert.write_bytes(second.cert_pem)
        until("the renewed certificate to be served", lambda: serial() == second.certificate.serial_number)
        assert process.poll() is None, log.read_text()
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture(params=["managed", "default-queue"])
def scoped(request: pytest.FixtureRequest, control_plane: ControlPlane, webhook: Webhook) -> Iterator[tuple[str, str]]:
    """A namespace of either managed scope (the webhook configurations differ) and its LocalQueue."""
    labels, queue = (({"draq.io/managed": "true"}, "gpu") if request.param == "managed"
                     else ({"draq.io/default-queue": "batch"}, "batch"))
    ns = new_namespace(control_plane, labels)
    _retry_apply(control_plane, local_queue(queue, ns, f"cq-{webhook.suffix}"))
    yield ns, queue
    control_plane.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def _create_gated(control_plane: ControlPlane, ns: str, name: str, queue: str) -> None:
    result = create(control_plane, pod(name, {"draq.io/queue": queue}), "-n", ns)
    assert result.returncode == 0, result.stderr
    assert gates_of(json.loads(result.stdout)) == [GATE]


def test_a_gated_pod_keeps_its_queue_label(control_plane: ControlPlane, scoped: tuple[str, str]) -> None:
    """Step one of the bypass: the queue label of a pod that waits cannot be removed or changed."""
    ns, queue = scoped
    _create_gated(control_plane, ns, "waiting", queue)
    for change, says in (("draq.io/queue-", "cannot be removed"), ("draq.io/queue=elsewhere", "cannot be changed")):
        refused = control_plane.kubectl("label", "pod", "waiting", "-n", ns, "--overwrite", change, check=False)
        assert refused.returncode != 0, change
        assert f"label draq.io/queue {says}" in refused.stderr and f"LocalQueue '{queue}'" in refused.stderr
    both = control_plane.kubectl("patch", "pod", "waiting", "-n", ns, "--type=json", "-p", json.dumps(
        [{"op": "remove", "path": "/metadata/labels/draq.io~1queue"},
         {"op": "remove", "path": "/spec/schedulingGates"}]), check=False)
    assert both.returncode != 0 and "only draq" in both.stderr
    current = get(control_plane, "pod", "waiting", "-n", ns)
    assert current["metadata"]["labels"]["draq.io/queue"] == queue and gates_of(current) == [GATE]


def test_the_gate_stays_on_a_pod_that_lost_its_queue_label(control_plane: ControlPlane,
                                                            scoped: tuple[str, str]) -> None:
    """Step two of the bypass: once the label is gone (here draq's own user removes it, as a pod left
    over from before the first rule would be), the gate still cannot be removed by anyone else."""
    ns, queue = scoped
    _create_gated(control_plane, ns, "leftover", queue)
    control_plane.kubectl("label", "pod", "leftover", "-n", ns, "draq.io/queue-", AS_DRAQ)
    assert "draq.io/queue" not in get(control_plane, "pod", "leftover", "-n", ns)["metadata"]["labels"]
    refused = control_plane.kubectl("patch", "pod", "leftover", "-n", ns, "--type=json",
                                    "-p", '[{"op": "remove", "path": "/spec/schedulingGates"}]', check=False)
    assert refused.returncode != 0
    assert f"only draq ({DRAQ_USER}) removes the gate {GATE}" in refused.stderr and "names no queue" in refused.stderr
    assert gates_of(get(control_plane, "pod", "leftover", "-n", ns)) == [GATE]


def test_a_pod_gated_by_hand_keeps_the_gate(control_plane: ControlPlane, managed: str) -> None:
    """A pod created with draq's gate and no queue label (no webhook sees its CREATE) keeps it too."""
    by_hand = pod("by-hand")
    by_hand["spec"]["schedulingGates"] = [{"name": GATE}]
    result = create(control_plane, by_hand, "-n", managed)
    assert result.returncode == 0, result.stderr
    refused = control_plane.kubectl("patch", "pod", "by-hand", "-n", managed, "--type=json",
                                    "-p", '[{"op": "remove", "path": "/spec/schedulingGates"}]', check=False)
    assert refused.returncode != 0 and "only draq" in refused.stderr
    control_plane.kubectl("patch", "pod", "by-hand", "-n", managed, "--type=json", AS_DRAQ,
                          "-p", '[{"op": "remove", "path": "/spec/schedulingGates"}]')
    assert gates_of(get(control_plane, "pod", "by-hand", "-n", managed)) == []


def _forged_review(uid: str, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
    """A Pod CREATE review as anyone who reaches the webhook's port can write one."""
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "operation": "CREATE",
        "namespace": namespace, "name": obj["metadata"].get("name", ""),
        "userInfo": {"username": "mallory", "groups": ["system:authenticated"]},
        "object": obj, "oldObject": None, "dryRun": False}}


def _post(webhook: Webhook, ca_pem: str, path: str, document: dict[str, Any]) -> dict[str, Any]:
    context = ssl.create_default_context(cadata=ca_pem)
    connection = http.client.HTTPSConnection("127.0.0.1", webhook.port, context=context, timeout=10)
    try:
        connection.request("POST", path, body=json.dumps(document), headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 200
        answer: dict[str, Any] = json.loads(response.read())
        return answer
    finally:
        connection.close()


def test_forged_reviews_change_nothing_draq_believes(control_plane: ControlPlane, webhook: Webhook) -> None:
    """Reviews posted straight to the webhook's port, with namespaces and names that are API paths
    (`team-a/configmaps/victim`), create nothing, cache nothing: a pod created afterwards in the real
    managed namespace `victim` is gated."""
    apply(control_plane, namespace("team-a", {}))
    apply(control_plane, {"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "victim", "namespace": "team-a"},
                          "data": {"note": "a forged namespace path would address this object"}})
    ca_pem = base64.b64decode(get(control_plane, "secret", "draq-webhook-ca", "-n", "draq-system")
                              ["data"]["ca.crt"]).decode()
    namespaces_before = {n["metadata"]["name"] for n in get(control_plane, "namespaces")["items"]}
    configmaps_before = {c["metadata"]["name"]: c["metadata"]["resourceVersion"]
                         for c in get(control_plane, "configmaps", "-n", "team-a")["items"]}
    hostile = "../../team-a/configmaps/victim"
    path_like = pod("x", {"draq.io/queue": "gpu"})
    in_victim = pod(hostile, {"draq.io/queue": hostile})
    in_victim["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": hostile,
                                                 "uid": str(uuid.uuid4()), "controller": True}]
    forged = [(ns, path_like) for ns in ("team-a/configmaps/victim", "team-a%2Fconfigmaps%2Fvictim",
                                         "victim/../team-a", "..", "victim?watch=true")]
    forged += [("victim", in_victim), ("team-a", in_victim)]
    try:
        for index, (ns, obj) in enumerate(forged):
            for path in ("/mutate", "/validate"):
                uid = f"forged-{index}-{path[1:]}"
                answer = _post(webhook, ca_pem, path, _forged_review(uid, ns, obj))["response"]
                assert answer["uid"] == uid, (ns, answer)
                assert "patch" not in answer, (ns, answer)  # nothing forged is ever gated or labelled
                if ns not in ("victim", "team-a"):
                    assert answer["allowed"] is False and answer["status"]["code"] == 400
                    assert "not a namespace name" in answer["status"]["message"]
        assert webhook.process.poll() is None and "Traceback" not in webhook.log.read_text(errors="replace")
        # no namespace appeared (one an earlier test deleted may finish terminating meanwhile)
        assert {n["metadata"]["name"] for n in get(control_plane, "namespaces")["items"]} <= namespaces_before
        assert {c["metadata"]["name"]: c["metadata"]["resourceVersion"]
                for c in get(control_plane, "configmaps", "-n", "team-a")["items"]} == configmaps_before

        apply(control_plane, namespace("victim", {"draq.io/managed": "true"}))
        wait_for_service_account(control_plane, "victim")
        _retry_apply(control_plane, local_queue("gpu", "victim", f"cq-{webhook.suffix}"))
        result = create(control_plane, pod("real", {"draq.io/queue": "gpu"}), "-n", "victim")
        assert result.returncode == 0, result.stderr
        created = json.loads(result.stdout)
        assert gates_of(created) == [GATE]
        assert created["metadata"]["labels"]["draq.io/pod-group"] == "real"
        refused = control_plane.kubectl("patch", "pod", "real", "-n", "victim", "--type=json",
                                        "-p", '[{"op": "remove", "path": "/spec/schedulingGates"}]', check=False)
        assert refused.returncode != 0 and "only draq" in refused.stderr
    finally:
        control_plane.kubectl("delete", "namespace", "victim", "team-a", "--wait=false", "--ignore-not-found",
                              check=False)


def test_with_the_webhook_stopped_only_managed_pods_are_refused(
        control_plane: ControlPlane, managed: str, webhook: Webhook) -> None:
    """Keep this test last in the module: it stops the webhook."""
    plain = new_namespace(control_plane, {})
    webhook.process.send_signal(signal.SIGINT)
    webhook.process.wait(15)
    time.sleep(0.5)
    try:
        name = f"sys-{webhook.suffix}"
        system = create(control_plane, pod(name, {"draq.io/queue": "gpu"}), "-n", "kube-system")
        assert system.returncode == 0, system.stderr
        control_plane.kubectl("delete", "pod", name, "-n", "kube-system", "--wait=false", check=False)
        unmanaged = create(control_plane, pod("still-fine", {"app": "web"}), "-n", plain)
        assert unmanaged.returncode == 0, unmanaged.stderr
        # A pod naming a queue where draq does not manage is refused while draq is away too: never run unmanaged.
        queued = create(control_plane, pod("names-a-queue", {"draq.io/queue": "gpu"}), "-n", plain)
        assert queued.returncode != 0
        assert "queue-labelled.unmanaged.draq.io" in queued.stderr and "failed calling webhook" in queued.stderr
        no_queue = create(control_plane, pod("no-queue"), "-n", managed)
        assert no_queue.returncode == 0, no_queue.stderr
        refused = create(control_plane, pod("needs-draq", {"draq.io/queue": "gpu"}), "-n", managed)
        assert refused.returncode != 0
        assert "gate-pods.managed.draq.io" in refused.stderr and "failed calling webhook" in refused.stderr
        with pytest.raises(ControlPlaneError):
            control_plane.kubectl("get", "pod", "needs-draq", "-n", managed)
    finally:
        control_plane.kubectl("delete", "namespace", plain, "--wait=false", check=False)
