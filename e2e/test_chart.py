"""The Helm chart (charts/draq) with Helm built from the Go module proxy, on the real local control plane.

- `helm lint --strict` and `helm template` with the default values and with other sets (cert-manager with
  chart-owned webhook configurations and one replica; everything optional switched on);
- the rendered manifests validated offline: Kubernetes' own kinds against the 1.35 schemas
  (`kubernetes-validate`, strict), draq's kinds against the CRDs' schemas, and what the chart must say
  (probes, security context, the webhook configurations exactly as the code generates them, the RBAC of
  files/rbac);
- the rendered manifests sent to the API server (`kubectl apply --dry-run=server`; the cert-manager and
  Prometheus Operator kinds against stand-in CRDs, as their schemas are theirs to check), then installed
  for real with `helm install`;
- draq from source, as the chart's ServiceAccount with nothing but the chart's RBAC (a token kubeconfig)
  and with the chart's arguments: a Job gang is gated by the webhook, admitted, released and bound; a Job
  and a bare pod that cannot bind are evicted (Job suspended, pod deleted) — so the rights are enough,
  and draq's log shows no refused request;
- `helm upgrade` with changed values keeps the queues, the PodGroups and their charges, and draq started
  again with the upgraded arguments carries on with them.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from kubernetes import client

from admission.core.labels import DEFAULT_QUEUE_LABEL, GATE
from admission.localcluster import actionlint as actionlint_build
from admission.localcluster import helm as helm_build
from admission.localcluster import rbac
from admission.localcluster.controlplane import ControlPlane, free_port
from admission.localcluster.nodesim import NodeSimulator
from admission.webhook.configurations import WebhookTarget, configurations
from e2e.draq_process import DraqProcess
from e2e.test_operator import pod_group
from e2e.waiting import until

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "draq"
KUBERNETES = "1.35.0"
RELEASE = "draq-e2e"
GPU_CLASS = "gpu.nvidia.com"
HOLD = "example.com/hold"  # another controller's gate: draq releases its own, the pod still cannot bind
_TERMINATING = "because it is being terminated"  # the API server refusing writes into a namespace being deleted

VALUE_SETS: dict[str, list[str]] = {
    "default": [],
    "cert-manager": ["--set", "certificates.mode=cert-manager", "--set", "webhook.configurations=chart",
                     "--set", "replicaCount=1", "--set", "leaderElection.enabled=false",
                     "--set", "metrics.serviceMonitor.enabled=false"],
    "everything": ["--set", "metrics.serviceMonitor.enabled=true", "--set", "dashboards.enabled=true",
                   "--set", "networkPolicy.enabled=true", "--set", "networkPolicy.apiServerCIDRs={10.0.0.1/32}",
                   "--set", "queues.create=true", "--set", "operator.nativeGangs=off",
                   "--set", "certificates.mode=cert-manager",
                   "--set", "certificates.certManager.issuerRef.kind=ClusterIssuer",
                   "--set", "certificates.certManager.issuerRef.name=company-ca"],
}
FOREIGN_GROUPS = {"cert-manager.io", "monitoring.coreos.com"}


# ----- Helm ---------------------------------------------------------------------------------------------
@dataclass
class Helm:
    binary: Path
    home: Path

    def __call__(self, *args: str, kubeconfig: Path | None = None, check: bool = True,
                 timeout: float = 120) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "HELM_CACHE_HOME": str(self.home / "cache"),
               "HELM_CONFIG_HOME": str(self.home / "config"), "HELM_DATA_HOME": str(self.home / "data")}
        argv = [str(self.binary), *args, *(["--kubeconfig", str(kubeconfig)] if kubeconfig else [])]
        result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed ({result.returncode}):\n{result.stdout}{result.stderr}")
        return result

    def template(self, *values: str, namespace: str = "draq-system") -> list[dict[str, Any]]:
        rendered = self("template", RELEASE, str(CHART), "--namespace", namespace, "--include-crds",
                        "--kube-version", KUBERNETES, *values).stdout
        return [doc for doc in yaml.safe_load_all(rendered) if doc]


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(helm_build.build().binary, tmp_path_factory.mktemp("helm-home"))


@pytest.fixture(scope="module")
def renders(helm: Helm) -> dict[str, list[dict[str, Any]]]:
    return {name: helm.template(*values) for name, values in VALUE_SETS.items()}


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [found] = by_kind(docs, kind)
    return found


# ----- offline: lint, schemas, what the chart must say ------------------------------------------------
@pytest.mark.parametrize("name", VALUE_SETS)
def test_helm_lint_strict(helm: Helm, name: str) -> None:
    result = helm("lint", "--strict", str(CHART), "--namespace", "draq-system", *VALUE_SETS[name])
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


def test_lint_refuses_what_the_chart_cannot_do(helm: Helm) -> None:
    result = helm("template", str(CHART), "--set", "webhook.configurations=chart", check=False)
    assert result.returncode != 0 and "cert-manager" in result.stderr
    result = helm("template", str(CHART), "--set", "leaderElection.enabled=false", check=False)
    assert result.returncode != 0 and "leaderElection" in result.stderr
    result = helm("template", str(CHART), "--set", "webhook.clientAuth.mtls.enabled=true", check=False)
    assert result.returncode != 0 and "caSecret" in result.stderr
    result = helm("template", str(CHART), "--set", "webhook.clientAuth.token.enabled=true", check=False)
    assert result.returncode != 0 and "secretName" in result.stderr


def test_helm_package_makes_an_oci_pushable_chart(helm: Helm, tmp_path: Path) -> None:
    helm("package", str(CHART), "--version", "1.2.3", "--app-version", "1.2.3", "--destination", str(tmp_path))
    [archive] = tmp_path.glob("*.tgz")
    assert archive.name == "draq-1.2.3.tgz", "helm push names the OCI tag after the chart's version"
    shown = yaml.safe_load(helm("show", "chart", str(archive)).stdout)
    assert shown["apiVersion"] == "v2" and shown["version"] == shown["appVersion"] == "1.2.3"
    docs = [d for d in yaml.safe_load_all(helm("template", "x", str(archive), "--include-crds").stdout) if d]
    [container] = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "draq:1.2.3", "the image tag follows the packaged appVersion"
    assert len(by_kind(docs, "CustomResourceDefinition")) == len(list((REPO / "crds").glob("*.yaml")))
    assert "1 chart(s) linted, 0 chart(s) failed" in helm("lint", "--strict", str(archive)).stdout


def test_release_workflow_passes_actionlint() -> None:
    workflow = REPO / ".github" / "workflows" / "release.yml"
    binary = actionlint_build.build().binary
    result = subprocess.run([str(binary), "-no-color", str(workflow)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    jobs = yaml.safe_load(workflow.read_text())["jobs"]
    chart_steps = " ".join(str(step.get("run", "")) for step in jobs["chart"]["steps"])
    assert "helm package" in chart_steps and "helm push" in chart_steps and "oci://" in chart_steps
    assert any("docker/build-push-action" in str(step.get("uses")) for step in jobs["image"]["steps"])


def crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    schemas = {}
    for path in (CHART / "crds").glob("*.yaml"):
        crd = yaml.safe_load(path.read_text())
        for version in crd["spec"]["versions"]:
            key = (f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"])
            schemas[key] = version["schema"]["openAPIV3Schema"]
    return schemas


@pytest.mark.parametrize("name", VALUE_SETS)
def test_rendered_manifests_are_valid_offline(renders: dict[str, list[dict[str, Any]]], name: str) -> None:
    schemas = crd_schemas()
    checked = {"kubernetes": 0, "crd": 0, "foreign": 0}
    for doc in renders[name]:
        group = doc["apiVersion"].split("/")[0] if "/" in doc["apiVersion"] else ""
        if (doc["apiVersion"], doc["kind"]) in schemas:
            jsonschema.validate(doc, schemas[(doc["apiVersion"], doc["kind"])])
            checked["crd"] += 1
        elif group in FOREIGN_GROUPS:
            assert doc["metadata"]["name"] and doc["metadata"]["namespace"] and doc["spec"]
            checked["foreign"] += 1
        else:
            kubernetes_validate.validate(doc, KUBERNETES, strict=True)
            checked["kubernetes"] += 1
    assert checked["kubernetes"] >= 10
    if name == "everything":
        assert checked["crd"] == 3 and checked["foreign"] == 2  # queues; ServiceMonitor and Certificate


def test_default_deployment_is_hardened_probed_and_spread(renders: dict[str, list[dict[str, Any]]]) -> None:
    docs = renders["default"]
    deployment = one(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert deployment["spec"]["replicas"] == 2
    assert container["image"] == f"draq:{yaml.safe_load((CHART / 'Chart.yaml').read_text())['appVersion']}"
    assert container["args"][0] == "run" and "--draq-user=system:serviceaccount:draq-system:draq" in container["args"]
    assert "--no-leader-election" not in container["args"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert container["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["resources"]["requests"] and container["resources"]["limits"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] and not security["allowPrivilegeEscalation"]
    assert security["capabilities"] == {"drop": ["ALL"]} and security["runAsNonRoot"]
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["securityContext"]["runAsUser"] != 0
    assert {c["topologyKey"] for c in pod["topologySpreadConstraints"]} == {
        "kubernetes.io/hostname", "topology.kubernetes.io/zone"}
    assert one(docs, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    assert {s["metadata"]["name"] for s in by_kind(docs, "Service")} == {"draq-webhook", f"{RELEASE}-metrics"}
    # draq fills in the webhooks; the chart owns the (empty) objects so that helm uninstall removes them.
    for kind, name in (("MutatingWebhookConfiguration", "draq-mutating"),
                       ("ValidatingWebhookConfiguration", "draq-validating")):
        shell = one(docs, kind)
        assert shell["metadata"]["name"] == name and "webhooks" not in shell
    assert "--adopt-webhook-configurations" in container["args"]
    assert {c["metadata"]["name"] for c in by_kind(docs, "CustomResourceDefinition")} == {
        p.name.removesuffix(".yaml") for p in (REPO / "crds").glob("*.yaml")}


def test_the_charts_rbac_is_the_rule_files(renders: dict[str, list[dict[str, Any]]]) -> None:
    for name, rights in (("default", rbac.Rights()),
                         ("cert-manager", rbac.Rights(webhook_configurations=False, leader_election=False,
                                                      draq_ca=False)),
                         ("everything", rbac.Rights(native_gangs=False, draq_ca=False))):
        docs = renders[name]
        assert one(docs, "ClusterRole")["rules"] == rbac.rules(*rights.cluster_files()), name
        roles = by_kind(docs, "Role")
        assert [r["rules"] for r in roles] == ([rbac.rules(*rights.namespace_files())]
                                               if rights.namespace_files() else []), name


def normalised(webhooks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = copy.deepcopy(webhooks)
    for webhook in found:
        for expression in webhook["namespaceSelector"].get("matchExpressions", []):
            expression.get("values", []).sort()
    return found


def test_chart_owned_webhook_configurations_are_the_codes(renders: dict[str, list[dict[str, Any]]]) -> None:
    docs = renders["cert-manager"]
    user = "system:serviceaccount:draq-system:draq"
    wanted = configurations(WebhookTarget(service_namespace="draq-system", service_name="draq-webhook"), b"",
                            "draq-system", user)
    for configuration in wanted:
        rendered = one(docs, configuration["kind"])
        assert normalised(rendered["webhooks"]) == normalised(configuration["webhooks"])
        assert rendered["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
            f"draq-system/{RELEASE}-webhook")
    [container] = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert {"--no-webhook-configurations", "--no-leader-election", "--cert-file=/etc/draq/tls/tls.crt",
            "--ca-file=/etc/draq/tls/ca.crt"} <= set(container["args"])
    assert not by_kind(docs, "PodDisruptionBudget"), "no PodDisruptionBudget for a single replica"
    assert {c["metadata"]["name"] for c in by_kind(docs, "Certificate")} == {f"{RELEASE}-ca", f"{RELEASE}-webhook"}


def test_optional_objects(renders: dict[str, list[dict[str, Any]]]) -> None:
    docs = renders["everything"]
    monitor = one(docs, "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    policy = one(docs, "NetworkPolicy")["spec"]
    webhook_rule, metrics_rule = policy["ingress"]
    assert webhook_rule["from"] == [{"ipBlock": {"cidr": "10.0.0.1/32"}}]
    assert webhook_rule["ports"] == [{"port": "webhook", "protocol": "TCP"}]
    assert metrics_rule["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    dashboards = [c for c in by_kind(docs, "ConfigMap") if "-dashboard-" in c["metadata"]["name"]]
    assert len(dashboards) == len(list((REPO / "dashboards").glob("*.json")))
    for dashboard in dashboards:
        [(key, content)] = dashboard["data"].items()
        assert json.loads(content) == json.loads((REPO / "dashboards" / key).read_text())
        assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert sorted(d["kind"] for d in docs if d["apiVersion"] == "draq.io/v1alpha1") == [
        "ClusterQueue", "LocalQueue", "QuotaUnit"]
    [certificate] = by_kind(docs, "Certificate")
    assert certificate["spec"]["issuerRef"] == {"kind": "ClusterIssuer", "name": "company-ca"}


# ----- the API server: dry run, then install, run and upgrade -----------------------------------------
def stand_in_crd(group: str, kind: str, plural: str) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


STAND_INS = [stand_in_crd("cert-manager.io", "Certificate", "certificates"),
             stand_in_crd("cert-manager.io", "Issuer", "issuers"),
             stand_in_crd("monitoring.coreos.com", "ServiceMonitor", "servicemonitors")]


def kubectl_apply(plane: ControlPlane, docs: list[dict[str, Any]], *extra: str) -> str:
    result = plane.kubectl("apply", *extra, "-f", "-", input="\n---\n".join(json.dumps(d) for d in docs),
                           check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_every_set_is_accepted_by_the_api_server(control_plane: ControlPlane, helm: Helm) -> None:
    namespace = f"draq-dry-{uuid.uuid4().hex[:6]}"
    kubectl_apply(control_plane, STAND_INS)
    control_plane.kubectl("wait", "--for=condition=Established", *(f"crd/{c['metadata']['name']}" for c in STAND_INS),
                          "--timeout=60s")
    control_plane.kubectl("create", "namespace", namespace)
    try:
        for name, values in VALUE_SETS.items():
            docs = helm.template(*values, namespace=namespace)  # the example LocalQueue is in "default"
            crds = by_kind(docs, "CustomResourceDefinition")
            kubectl_apply(control_plane, crds)  # the draq kinds must exist for their objects to be checked
            control_plane.kubectl("wait", "--for=condition=Established", "crd/clusterqueues.draq.io", "--timeout=60s")
            out = kubectl_apply(control_plane, [d for d in docs if d not in crds], "--dry-run=server")
            assert "(server dry run)" in out and "deployment.apps/" in out, name
    finally:
        control_plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
        control_plane.kubectl("delete", "crd", *(c["metadata"]["name"] for c in STAND_INS), "--wait=false",
                              check=False)


class Draq(DraqProcess):
    """draq run from source as the chart's ServiceAccount."""

    def refused(self) -> list[str]:
        """draq's requests refused for want of rights. A write into a namespace being deleted (another
        test's, seen by this draq as it watches every namespace) is refused by the API server's namespace
        lifecycle check, not by RBAC, and does not count."""
        return [line for line in self.log.read_text(errors="replace").splitlines()
                if ("HTTP 403" in line or "forbidden" in line.lower()) and _TERMINATING not in line]


def service_account_kubeconfig(plane: ControlPlane, namespace: str, path: Path) -> Path:
    token = plane.kubectl("create", "token", "draq", "-n", namespace, "--duration=1h").stdout.strip()
    config = yaml.safe_load(plane.kubeconfig.read_text())
    config["users"] = [{"name": "user", "user": {"token": token}}]
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def start_draq(plane: ControlPlane, helm: Helm, namespace: str, kubeconfig: Path, log: Path) -> Draq:
    return start_draq_of(plane, helm, RELEASE, namespace, kubeconfig, log)


def start_draq_of(plane: ControlPlane, helm: Helm, release: str, namespace: str, kubeconfig: Path,
                  log: Path) -> Draq:
    """draq run with the arguments of the installed Deployment, reachable on 127.0.0.1 instead of a Service."""
    manifest = helm("get", "manifest", release, "-n", namespace, kubeconfig=plane.kubeconfig).stdout
    deployment = one([d for d in yaml.safe_load_all(manifest) if d], "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    port, metrics_port = free_port(), free_port()
    argv = [sys.executable, "-m", "admission.cli.main", *container["args"],
            "--webhook-url", f"https://127.0.0.1:{port}", "--webhook-host", "127.0.0.1", "--webhook-port", str(port),
            "--metrics-host", "127.0.0.1", "--metrics-port", str(metrics_port)]
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PYTHONUNBUFFERED": "1", "POD_NAME": f"draq-{port}"}
    with log.open("ab") as sink:
        process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, cwd=REPO, env=env)
    draq = Draq(process, log, metrics_port)
    until("draq ready (/readyz)", lambda: process.poll() is None and draq.get("/readyz"),
          accept=lambda answer: answer is False or answer[0] == 200, timeout=90)
    assert process.poll() is None, log.read_text()[-3000:]
    return draq


def values_file(path: Path, work: str, unique: str, nominal: int, **extra: Any) -> Path:
    values = {
        "queues": {"create": True,
                   "quotaUnits": [{"name": f"gpus-{unique}", "spec": {"devices": {"deviceClassNames": [GPU_CLASS]}}}],
                   "clusterQueues": [{"name": f"cq-{unique}", "spec": {
                       "namespaceSelector": {}, "quotas": [{"unit": f"gpus-{unique}", "nominal": nominal}],
                       "bindTimeoutSeconds": 20}}],
                   "localQueues": [{"name": "lq", "namespace": work, "spec": {"clusterQueue": f"cq-{unique}"}}]},
        **extra,
    }
    path.write_text(yaml.safe_dump(values))
    return path


def workloads(work: str) -> list[dict[str, Any]]:
    def template(name: str, gpus: int) -> dict[str, Any]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": name, "namespace": work},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": gpus}}]}}}}

    def pod_spec(claims: str, hold: bool) -> dict[str, Any]:
        return {"restartPolicy": "Never", "schedulingGates": [{"name": HOLD}] if hold else [],
                "containers": [{"name": "main", "image": "registry.example/cuda:12",
                                "resources": {"claims": [{"name": "gpus"}]}}],
                "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": claims}]}

    def job(name: str, claims: str, hold: bool) -> dict[str, Any]:
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": work},
                "spec": {"parallelism": 2, "completions": 2, "backoffLimit": 0,
                         "template": {"spec": pod_spec(claims, hold)}}}

    return [template("four", 4), template("two", 2), job("train", "four", False), job("held", "two", True),
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lonely", "namespace": work},
             "spec": pod_spec("two", True)}]


def phase(group: dict[str, Any] | None) -> str | None:
    return ((group or {}).get("status") or {}).get("phase")


def can_i(api: Any, namespace: str, verb: str, resource: str, where: str = "", name: str = "") -> bool:
    """The API server's answer (a SubjectAccessReview) for draq's ServiceAccount in `namespace`:
    `resource` is `group/resource[/subresource]` (`/resource` for the core group)."""
    group, plural, *sub = resource.split("/")
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
        "user": f"system:serviceaccount:{namespace}:draq",
        "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
        "resourceAttributes": {"verb": verb, "group": group, "resource": plural, "subresource": "".join(sub),
                               "namespace": where, "name": name}}}
    return bool(client.AuthorizationV1Api(api).create_subject_access_review(review).status.allowed)


@pytest.fixture
def installed(control_plane: ControlPlane, helm: Helm, nodesim: NodeSimulator,
              tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """The chart installed with Helm in a fresh namespace, a managed namespace for workloads and two
    simulated 8-GPU nodes; everything removed afterwards (the queues are kept by Helm on purpose)."""
    unique = uuid.uuid4().hex[:6]
    namespace, work = f"draq-chart-{unique}", f"chart-work-{unique}"
    for node in ("a", "b"):
        nodesim.add_node(f"chart-{unique}-{node}", "h100")
    control_plane.kubectl("create", "namespace", work)
    control_plane.kubectl("label", "namespace", work, f"{DEFAULT_QUEUE_LABEL}=lq")
    control_plane.wait_for_service_account(work)
    values = values_file(tmp_path / "values.yaml", work, unique, nominal=16)
    helm("install", RELEASE, str(CHART), "-n", namespace, "--create-namespace", "-f", str(values),
         kubeconfig=control_plane.kubeconfig)
    try:
        yield namespace, work, unique
    finally:
        # Leave no webhook configuration with failurePolicy Fail behind for the rest of the session.
        control_plane.kubectl("delete", "mutatingwebhookconfiguration/draq-mutating",
                              "validatingwebhookconfiguration/draq-validating", "--ignore-not-found", check=False)
        helm("uninstall", RELEASE, "-n", namespace, kubeconfig=control_plane.kubeconfig, check=False)
        control_plane.kubectl("delete", "namespace", work, namespace, "--wait=false", check=False)
        control_plane.kubectl("delete", f"clusterqueue/cq-{unique}", f"quotaunit/gpus-{unique}",
                              "--ignore-not-found", "--wait=false", check=False)


def test_installed_chart_runs_draq_with_only_its_rights_and_survives_an_upgrade(
        control_plane: ControlPlane, api: Any, helm: Helm, installed: tuple[str, str, str], tmp_path: Path) -> None:
    namespace, work, unique = installed
    manifest = helm("get", "manifest", RELEASE, "-n", namespace, kubeconfig=control_plane.kubeconfig).stdout
    for doc in (d for d in yaml.safe_load_all(manifest) if d):
        where = ["-n", doc["metadata"]["namespace"]] if doc["metadata"].get("namespace") else []
        found = control_plane.kubectl("get", f"{doc['kind']}/{doc['metadata']['name']}", *where, check=False)
        assert found.returncode == 0, f"{doc['kind']} {doc['metadata']['name']} was not installed: {found.stderr}"

    # The rights as the API server sees them: what the code needs, and not more.
    for wanted in (("delete", "/pods", work), ("patch", "batch/jobs", work),
                   ("create", "scheduling.k8s.io/workloads", work), ("patch", "draq.io/podgroups/status", work),
                   ("update", "coordination.k8s.io/leases", namespace, "draq-operator"),
                   ("get", "/secrets", namespace, "draq-webhook-ca"),
                   ("update", "admissionregistration.k8s.io/validatingwebhookconfigurations", "", "draq-validating")):
        assert can_i(api, namespace, *wanted), wanted
    for unwanted in (("get", "/secrets", namespace, "other"), ("list", "/secrets", namespace),
                     ("get", "/secrets", work, "draq-webhook-ca"),
                     ("update", "coordination.k8s.io/leases", work, "draq-operator"),
                     ("create", "/pods", work), ("update", "draq.io/podgroups", work), ("delete", "/nodes"),
                     ("create", "rbac.authorization.k8s.io/clusterrolebindings"),
                     ("update", "admissionregistration.k8s.io/mutatingwebhookconfigurations", "", "other"),
                     ("delete", "admissionregistration.k8s.io/mutatingwebhookconfigurations", "", "draq-mutating"),
                     ("*", "*/*")):
        assert not can_i(api, namespace, *unwanted), unwanted

    kubeconfig = service_account_kubeconfig(control_plane, namespace, tmp_path / "draq.kubeconfig")
    log = tmp_path / "draq.log"
    draq = start_draq(control_plane, helm, namespace, kubeconfig, log)
    try:
        assert draq.get("/healthz")[0] == 200 and "draq" in draq.get("/metrics")[1]
        until("draq's webhook configurations", lambda: control_plane.kubectl(
            "get", "validatingwebhookconfiguration/draq-validating", check=False).returncode == 0, timeout=30)
        kubectl_apply(control_plane, workloads(work))
        core = client.CoreV1Api(api)

        train = until("the Job gang train Running", lambda: pod_group(api, work, "train"),
                      accept=lambda g: phase(g) == "Running", timeout=90)
        assert train["status"]["charge"] == [{"unit": f"gpus-{unique}", "amount": "8"}]
        members = [p for p in core.list_namespaced_pod(work, label_selector="job-name=train").items]
        assert len(members) == 2 and all(p.spec.node_name for p in members)
        assert all(GATE not in [g.name for g in p.spec.scheduling_gates or []] for p in members)
        until("an Admitted event", lambda: [e for e in core.list_namespaced_event(work).items
                                            if e.involved_object.name == "train" and e.reason == "Admitted"])

        held = until("the Job held evicted for not binding in time", lambda: pod_group(api, work, "held"),
                     accept=lambda g: bool((g.get("status") or {}).get("suspended")), timeout=90)
        assert held["status"]["suspended"] == [{"kind": "Job", "name": "held"}]
        # The record is written before the Job is suspended, so the suspension may still be on its way.
        until("the Job held suspended", lambda: client.BatchV1Api(api).read_namespaced_job("held", work),
              accept=lambda j: j.spec.suspend is True, timeout=15)
        until("the bare pod lonely deleted by its eviction", lambda: [
            p for p in core.list_namespaced_pod(work).items if p.metadata.name == "lonely"] == [], timeout=90)
        lonely = pod_group(api, work, "lonely")
        assert lonely is not None and lonely["status"]["evictions"] >= 1
        assert draq.refused() == [], "a request of draq's was refused:\n" + "\n".join(draq.refused()[:10])
        # Only train charges the queue from here on (held would be requeued after its backoff).
        control_plane.kubectl("delete", "job/held", "-n", work, "--cascade=background")
    finally:
        draq.stop()
    assert draq.process.returncode == 0, log.read_text()[-3000:]

    # helm upgrade with changed values: queues, groups and charges stay.
    objects = client.CustomObjectsApi(api)
    queue_before = objects.get_cluster_custom_object("draq.io", "v1alpha1", "clusterqueues", f"cq-{unique}")
    local_before = objects.get_namespaced_custom_object("draq.io", "v1alpha1", work, "localqueues", "lq")
    train_before = pod_group(api, work, "train")
    account_before = client.CoreV1Api(api).read_namespaced_service_account("draq", namespace)
    values = values_file(tmp_path / "upgrade.yaml", work, unique, nominal=24, replicaCount=1,
                         operator={"bindTimeoutSeconds": 120, "verbose": True},
                         resources={"requests": {"cpu": "200m", "memory": "512Mi"},
                                    "limits": {"cpu": "2", "memory": "2Gi"}})
    helm("upgrade", RELEASE, str(CHART), "-n", namespace, "-f", str(values), kubeconfig=control_plane.kubeconfig)
    history = helm("history", RELEASE, "-n", namespace, kubeconfig=control_plane.kubeconfig).stdout.strip()
    assert len(history.splitlines()) == 3 and "deployed" in history.splitlines()[-1]

    deployment = client.AppsV1Api(api).read_namespaced_deployment(RELEASE, namespace)
    assert deployment.spec.replicas == 1 and "--bind-timeout=120" in deployment.spec.template.spec.containers[0].args
    queue_after = objects.get_cluster_custom_object("draq.io", "v1alpha1", "clusterqueues", f"cq-{unique}")
    assert queue_after["metadata"]["uid"] == queue_before["metadata"]["uid"]
    assert queue_after["spec"]["quotas"] == [{"unit": f"gpus-{unique}", "nominal": 24}]
    assert queue_after["status"] == queue_before["status"], "Helm leaves draq's status alone"
    local_after = objects.get_namespaced_custom_object("draq.io", "v1alpha1", work, "localqueues", "lq")
    assert local_after["metadata"]["uid"] == local_before["metadata"]["uid"] and local_after["status"]
    assert pod_group(api, work, "train") == train_before
    assert client.CoreV1Api(api).read_namespaced_service_account("draq", namespace).metadata.uid == (
        account_before.metadata.uid), "the ServiceAccount (and so its tokens) survives the upgrade"

    # draq restarted with the upgraded arguments carries on: the same admission, usage against the new quota.
    draq = start_draq(control_plane, helm, namespace, kubeconfig, log)
    try:
        row = until("the ClusterQueue usage against the upgraded quota", lambda: control_plane.kubectl(
            "get", "clusterqueues", f"cq-{unique}", "--no-headers").stdout,
            accept=lambda r: f"gpus-{unique} 8/24" in r, timeout=60)
        assert f"gpus-{unique} 8/24" in row
        train_after = pod_group(api, work, "train")
        assert train_after is not None and train_before is not None and phase(train_after) == "Running"
        assert train_after["status"]["charge"] == train_before["status"]["charge"]
        assert train_after["status"]["admittedAt"] == train_before["status"]["admittedAt"]
        assert draq.refused() == []
    finally:
        draq.stop()


def webhooks_of(plane: ControlPlane, kind: str, name: str) -> list[dict[str, Any]] | None:
    """The webhooks of a configuration; None when it does not exist."""
    found = plane.kubectl("get", f"{kind}/{name}", "-o", "json", check=False)
    return json.loads(found.stdout).get("webhooks") or [] if found.returncode == 0 else None


def test_queues_created_by_an_upgrade_while_draq_runs_and_uninstall_leaves_no_webhook(
        control_plane: ControlPlane, api: Any, helm: Helm, tmp_path: Path) -> None:
    unique = uuid.uuid4().hex[:6]
    namespace, work = f"draq-life-{unique}", f"life-work-{unique}"
    release = f"draq-life-{unique}"
    control_plane.kubectl("create", "namespace", work)
    control_plane.kubectl("label", "namespace", work, f"{DEFAULT_QUEUE_LABEL}=lq")
    helm("install", release, str(CHART), "-n", namespace, "--create-namespace", "--set", "fullnameOverride=draq-life",
         kubeconfig=control_plane.kubeconfig)
    draq: Draq | None = None
    try:
        kubeconfig = service_account_kubeconfig(control_plane, namespace, tmp_path / "draq.kubeconfig")
        draq = start_draq_of(control_plane, helm, release, namespace, kubeconfig, tmp_path / "draq.log")
        for kind, name in (("mutatingwebhookconfiguration", "draq-mutating"),
                           ("validatingwebhookconfiguration", "draq-validating")):
            filled = until(f"draq filling in {name}", lambda k=kind, n=name: webhooks_of(control_plane, k, n),
                           accept=bool, timeout=30)
            assert filled and all(w["clientConfig"]["url"].startswith("https://127.0.0.1:") for w in filled)

        # One upgrade creates QuotaUnit, ClusterQueue and LocalQueue while draq's webhooks answer (Helm
        # creates the ClusterQueue before the QuotaUnit it names: kinds it does not know go alphabetically).
        values = values_file(tmp_path / "queues.yaml", work, unique, nominal=8)
        upgraded = helm("upgrade", release, str(CHART), "-n", namespace, "-f", str(values), "--set",
                        "fullnameOverride=draq-life", kubeconfig=control_plane.kubeconfig)
        assert f"QuotaUnit 'gpus-{unique}' does not exist yet" in upgraded.stderr
        status = helm("status", release, "-n", namespace, kubeconfig=control_plane.kubeconfig).stdout
        assert "STATUS: deployed" in status
        row = until("the new ClusterQueue served with its unit", lambda: control_plane.kubectl(
            "get", "clusterqueues", f"cq-{unique}", "--no-headers").stdout,
            accept=lambda r: f"gpus-{unique} 0/8" in r, timeout=60)
        assert f"gpus-{unique} 0/8" in row
        for kind, name in (("mutatingwebhookconfiguration", "draq-mutating"),
                           ("validatingwebhookconfiguration", "draq-validating")):
            assert webhooks_of(control_plane, kind, name), f"the upgrade left {name} as draq filled it in"

        # Uninstalling (draq still running) removes the configurations: pods are no longer sent to draq.
        helm("uninstall", release, "-n", namespace, kubeconfig=control_plane.kubeconfig)
        for kind, name in (("mutatingwebhookconfiguration", "draq-mutating"),
                           ("validatingwebhookconfiguration", "draq-validating")):
            assert webhooks_of(control_plane, kind, name) is None, f"{name} left after helm uninstall"
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain", "namespace": work},
               "spec": {"containers": [{"name": "main", "image": "registry.example/nginx:1"}]}}
        kubectl_apply(control_plane, [pod])
        created = client.CoreV1Api(api).read_namespaced_pod("plain", work)
        assert not created.spec.scheduling_gates, "no webhook gated a pod after uninstall"
    finally:
        if draq is not None:
            draq.stop()
        control_plane.kubectl("delete", "mutatingwebhookconfiguration/draq-mutating",
                              "validatingwebhookconfiguration/draq-validating", "--ignore-not-found", check=False)
        helm("uninstall", release, "-n", namespace, kubeconfig=control_plane.kubeconfig, check=False)
        control_plane.kubectl("delete", "namespace", work, namespace, "--wait=false", check=False)
        control_plane.kubectl("delete", f"clusterqueue/cq-{unique}", f"quotaunit/gpus-{unique}",
                              "--ignore-not-found", "--wait=false", check=False)


def test_configurations_draq_created_before_the_chart_owned_them_are_adopted_once_marked(
        control_plane: ControlPlane, helm: Helm) -> None:
    """docs/install.md, "4. Upgrades": configurations an earlier chart's draq created are not Helm's; Helm
    refuses them until they carry the release's marks, then takes them over (and removes them on uninstall)."""
    unique = uuid.uuid4().hex[:6]
    namespace, release = f"draq-adopt-{unique}", f"draq-adopt-{unique}"
    names = ("mutatingwebhookconfiguration/draq-mutating", "validatingwebhookconfiguration/draq-validating")
    kubectl_apply(control_plane, [{"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                                   "metadata": {"name": name}} for kind, name in (
        ("MutatingWebhookConfiguration", "draq-mutating"), ("ValidatingWebhookConfiguration", "draq-validating"))])
    try:
        refused = helm("install", release, str(CHART), "-n", namespace, "--create-namespace",
                       kubeconfig=control_plane.kubeconfig, check=False)
        assert refused.returncode != 0 and "draq-mutating" in refused.stderr
        helm("uninstall", release, "-n", namespace, kubeconfig=control_plane.kubeconfig, check=False)
        for name in names:  # the commands of docs/install.md
            control_plane.kubectl("label", name, "app.kubernetes.io/managed-by=Helm", "--overwrite")
            control_plane.kubectl("annotate", name, f"meta.helm.sh/release-name={release}",
                                  f"meta.helm.sh/release-namespace={namespace}", "--overwrite")
        helm("install", release, str(CHART), "-n", namespace, "--create-namespace",
             kubeconfig=control_plane.kubeconfig)
        helm("uninstall", release, "-n", namespace, kubeconfig=control_plane.kubeconfig)
        for name in names:
            assert control_plane.kubectl("get", name, check=False).returncode != 0, f"{name} left after uninstall"
    finally:
        control_plane.kubectl("delete", *names, "--ignore-not-found", check=False)
        helm("uninstall", release, "-n", namespace, kubeconfig=control_plane.kubeconfig, check=False)
        control_plane.kubectl("delete", "namespace", namespace, "--wait=false", "--ignore-not-found", check=False)
