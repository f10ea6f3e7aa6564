"""Metrics, probes and dashboards end to end: `draq run` (operator and webhooks, as its own
ServiceAccount) on the real control plane, a small exporter serving DCGM-shaped telemetry for the
simulated GPUs, and a real Prometheus (started here on 127.0.0.1, scraping both every second).

The workload: two ClusterQueues in one cohort, four gangs (one borrows from the cohort, one waits for
quota), a pod refused by the webhook, and a pod outside every queue holding a GPU (an accounting gap).
Then every query of every dashboard must return data, and a few must return the expected numbers.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from admission.core.labels import GATE, GROUP_LABEL, GROUP_MIN_LABEL, MANAGED_LABEL, QUEUE_LABEL
from admission.localcluster.controlplane import ControlPlane, free_port
from admission.localcluster.nodesim import NodeSimulator
from e2e.draq_process import DraqProcess
from e2e.waiting import until
from tests.support.dashboards import load_builder

REPO = Path(__file__).resolve().parents[1]
dashboards = load_builder()  # dashboards/build.py is a script, not a package

GPU_CLASS = "gpu.nvidia.com"
UTILISATION = (0, 3, 50, 90, 2, 75, 100, 40)  # percent, by GPU index
CONFIGURATIONS = ("mutatingwebhookconfiguration/draq-mutating", "validatingwebhookconfiguration/draq-validating")


# ----- a DCGM-shaped exporter -------------------------------------------------------------------------
@dataclass(frozen=True)
class Gpu:
    node: str
    index: int
    uuid: str
    model: str


def dcgm_text(gpus: list[Gpu]) -> str:
    """What DCGM exporter serves for these GPUs (the fields the dashboards read)."""
    lines = []
    for name, help_text, value in (
        ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", lambda g: UTILISATION[g.index % 8]),
        ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", lambda g: 800 * UTILISATION[g.index % 8]),
        ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", lambda g: 100 + 5 * UTILISATION[g.index % 8]),
    ):
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        for gpu in gpus:
            labels = (f'gpu="{gpu.index}",UUID="{gpu.uuid}",device="nvidia{gpu.index}",modelName="{gpu.model}",'
                      f'Hostname="{gpu.node}",DCGM_FI_DRIVER_VERSION="570.124.06"')
            lines.append(f"{name}{{{labels}}} {value(gpu)}")
    return "\n".join(lines) + "\n"


class DcgmExporter:
    def __init__(self, gpus: list[Gpu]) -> None:
        body = dcgm_text(gpus).encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def gpus_of(api: Any, nodes: list[str]) -> list[Gpu]:
    """The GPUs the simulated driver publishes on `nodes`, with the UUIDs from their ResourceSlices."""
    slices = client.CustomObjectsApi(api).list_cluster_custom_object("resource.k8s.io", "v1", "resourceslices")
    found = []
    for item in slices["items"]:
        spec = item["spec"]
        if spec.get("nodeName") not in nodes:
            continue
        for device in spec.get("devices") or []:
            attributes = device.get("attributes") or {}
            if "uuid" in attributes:
                found.append(Gpu(spec["nodeName"], attributes["index"]["int"], attributes["uuid"]["string"],
                                 attributes["productName"]["string"]))
    return found


# ----- Prometheus ----------------------------------------------------------------------------------------
class Prometheus:
    def __init__(self, work_dir: Path, targets: dict[str, int]) -> None:
        self.port = free_port()
        config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                  "scrape_configs": [{"job_name": job, "honor_labels": True,
                                      "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
                                     for job, port in targets.items()]}
        (work_dir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = work_dir / "prometheus.log"
        argv = [shutil.which("prometheus") or "prometheus", f"--config.file={work_dir / 'prometheus.yml'}",
                f"--storage.tsdb.path={work_dir / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=1h", "--log.level=warn"]
        with self.log.open("wb") as sink:
            self.process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, cwd=work_dir)
        until("Prometheus to be ready", lambda: self.process.poll() is None and self._ready(), timeout=30)

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=10) as answer:
            document = json.load(answer)
        assert document["status"] == "success", document
        result: list[dict[str, Any]] = document["data"]["result"]
        return result

    def value(self, expr: str) -> float | None:
        result = self.query(expr)
        return float(result[0]["value"][1]) if len(result) == 1 else None

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()


# ----- draq ----------------------------------------------------------------------------------------------
def apply(control_plane: ControlPlane, *objects: dict[str, Any]) -> None:
    control_plane.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in objects))


def service_account_kubeconfig(control_plane: ControlPlane, directory: Path) -> Path:
    """draq runs as its own ServiceAccount: its webhook lets only that identity remove the gate."""
    apply(control_plane,
          {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "draq-system"}},
          {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "draq", "namespace": "draq-system"}},
          {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
           "metadata": {"name": "draq-e2e-metrics"},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
           "subjects": [{"kind": "ServiceAccount", "name": "draq", "namespace": "draq-system"}]})
    token = control_plane.kubectl("create", "token", "draq", "-n", "draq-system", "--duration=1h").stdout.strip()
    config = yaml.safe_load(control_plane.kubeconfig.read_text())
    config["users"] = [{"name": config["users"][0]["name"], "user": {"token": token}}]
    path = directory / "draq.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def start_draq(kubeconfig: Path, log: Path, *extra: str) -> DraqProcess:
    webhook_port, metrics_port = free_port(), free_port()
    argv = [sys.executable, "-m", "admission.cli.main", "run", "--kubeconfig", str(kubeconfig),
            "--no-leader-election", "--debounce", "0.05", "--webhook-host", "127.0.0.1",
            "--webhook-port", str(webhook_port), "--webhook-url", f"https://127.0.0.1:{webhook_port}",
            "--metrics-host", "127.0.0.1", "--metrics-port", str(metrics_port), *extra]
    with log.open("wb") as sink:
        process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, cwd=REPO,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
    draq = DraqProcess(process, log, metrics_port)
    until("draq to be ready (/readyz)", lambda: process.poll() is None and draq.get("/readyz")[0] == 200,
          timeout=90)
    return draq


# ----- the workload --------------------------------------------------------------------------------------
@dataclass
class Names:
    unique: str

    def __getattr__(self, name: str) -> str:
        return f"{name.replace('_', '-')}-{self.unique}"


def queues(control_plane: ControlPlane, n: Names, namespace: str) -> None:
    """Two ClusterQueues of 8 GPUs in one cohort, a LocalQueue for each in `namespace`, and a Topology whose
    one level is the node (so that every node is a domain of the per-domain figures)."""
    apply(control_plane, {"apiVersion": "draq.io/v1alpha1", "kind": "Topology", "metadata": {"name": n.layout},
                          "spec": {"levels": [{"name": "node", "nodeLabel": "kubernetes.io/hostname"}]}})
    unit = {"apiVersion": "draq.io/v1alpha1", "kind": "QuotaUnit", "metadata": {"name": n.gpus},
            "spec": {"devices": {"deviceClassNames": [GPU_CLASS]}}}
    cluster_queues = [{"apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": name},
                       "spec": {"namespaceSelector": {}, "cohort": n.cohort,
                                "quotas": [{"unit": n.gpus, "nominal": 8}]}}
                      for name in (n.cq_a, n.cq_b)]
    locals_ = [{"apiVersion": "draq.io/v1alpha1", "kind": "LocalQueue",
                "metadata": {"name": lq, "namespace": namespace}, "spec": {"clusterQueue": cq}}
               for lq, cq in (("a", n.cq_a), ("b", n.cq_b))]
    apply(control_plane, unit)
    until("the QuotaUnit to be accepted", lambda: _applied(control_plane, *cluster_queues), timeout=20)
    until("the ClusterQueues to be accepted", lambda: _applied(control_plane, *locals_), timeout=20)


def _applied(control_plane: ControlPlane, *objects: dict[str, Any]) -> bool:
    """The webhook's cache sees a referent a moment after it is created: apply until accepted."""
    result = control_plane.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in objects),
                                   check=False)
    return result.returncode == 0


def gang(namespace: str, queue: str, group: str, node: str, size: int) -> list[dict[str, Any]]:
    """`size` pods on `node`, each with a claim of 4 GPUs; labelled for draq, gated by its webhook."""
    return [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"{group}-{i}", "namespace": namespace,
                          "labels": {QUEUE_LABEL: queue, GROUP_LABEL: group, GROUP_MIN_LABEL: str(size)}},
             "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                      "containers": [{"name": "main", "image": "registry.example/cuda:12",
                                      "resources": {"claims": [{"name": "gpus"}]}}],
                      "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "four-gpus"}]}}
            for i in range(size)]


def four_gpus(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "four-gpus", "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": 4}}]}}}}


def outside_pod(namespace: str, node: str) -> list[dict[str, Any]]:
    """A pod of a namespace draq does not manage, holding one GPU through its own claim."""
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "one-gpu", "namespace": namespace},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS}}]}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "outside", "namespace": namespace},
           "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                    "containers": [{"name": "main", "image": "registry.example/cuda:12",
                                    "resources": {"claims": [{"name": "gpu"}]}}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": "one-gpu"}]}}
    return [claim, pod]


def phase(api: Any, namespace: str, group: str) -> str | None:
    try:
        found = client.CustomObjectsApi(api).get_namespaced_custom_object("draq.io", "v1alpha1", namespace,
                                                                        "podgroups", group)
    except client.ApiException:
        return None
    return str((found.get("status") or {}).get("phase") or "")


@dataclass
class Stack:
    draq: DraqProcess
    prometheus: Prometheus
    names: Names
    namespace: str


@pytest.fixture(scope="module")
def stack(control_plane: ControlPlane, api: Any, nodesim: NodeSimulator) -> Iterator[Stack]:
    control_plane.kubectl("apply", "-f", str(REPO / "crds"))
    control_plane.kubectl("wait", "--for=condition=Established", "crd/clusterqueues.draq.io",
                          "crd/localqueues.draq.io", "crd/podgroups.draq.io", "crd/quotaunits.draq.io",
                          "--timeout=60s")
    names = Names(uuid.uuid4().hex[:6])
    nodes = [names.m_a, names.m_b, names.m_c]
    for node in nodes:
        nodesim.add_node(node, "h100")
    work_dir = Path(tempfile.mkdtemp(prefix="draq-metrics-"))
    draq = prometheus = exporter = None
    namespace, outside = names.mt, names.mo
    try:
        draq = start_draq(service_account_kubeconfig(control_plane, work_dir), work_dir / "draq.log")
        exporter = DcgmExporter(until("the GPUs' slices", lambda: gpus_of(api, nodes) or None,
                                      accept=lambda g: len(g) == 24))
        prometheus = Prometheus(work_dir, {"draq": draq.metrics_port, "dcgm": exporter.port})
        apply(control_plane, {"apiVersion": "v1", "kind": "Namespace",
                              "metadata": {"name": namespace, "labels": {MANAGED_LABEL: "true"}}},
              {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": outside}})
        for ns in (namespace, outside):
            control_plane.wait_for_service_account(ns)
        queues(control_plane, names, namespace)
        # series of the new queues are scraped (at zero) before anything is admitted, so rates see the change
        until("Prometheus to scrape the new queues", lambda: prometheus.value(
            f'draq_admissions_total{{cluster_queue="{names.cq_a}"}}') == 0, timeout=30)
        run_workload(control_plane, api, names, namespace, outside)
        # rate() over the one denial needs two samples of its counter
        # The figures are made at most 5 s after a pass while changes keep coming (`OperatorMetrics`), so the
        # waiting group's figure can be scraped a pass after the admissions'.
        until("the borrowed GPUs, the gap, the denial and the group waiting for quota to be scraped", lambda: (
            prometheus.value(f'draq_cluster_queue_borrowed{{cluster_queue="{names.cq_b}"}}'),
            prometheus.value('draq_accounting_gaps{kind="OutsideQueues"}'),
            prometheus.value('sum(count_over_time(draq_webhook_denials_total[2m]))'),
            prometheus.value(f'draq_pending_pod_groups{{cluster_queue="{names.cq_a}", reason="QuotaExceeded"}}')),
            accept=lambda v: v[0] == 4 and (v[1] or 0) >= 1 and (v[2] or 0) >= 2 and v[3] == 1, timeout=60)
        yield Stack(draq, prometheus, names, namespace)
    finally:
        if prometheus is not None:
            prometheus.stop()
        if exporter is not None:
            exporter.stop()
        if draq is not None:
            draq.stop(signal.SIGINT)
            print(f"\ndraq log tail:\n{draq.log_tail()}")
        control_plane.kubectl("delete", *CONFIGURATIONS, "--ignore-not-found", check=False)
        control_plane.kubectl("delete", "namespace", namespace, outside, "--wait=false", "--ignore-not-found",
                              check=False)
        shutil.rmtree(work_dir, ignore_errors=True)


def run_workload(control_plane: ControlPlane, api: Any, n: Names, namespace: str, outside: str) -> None:
    """a1 (4 GPUs of cq-a) and b1 (8 of cq-b) fit; b2 (4 more of cq-b) borrows cq-a's unused 4; a2 then
    waits for quota; one pod is refused; one pod outside every queue holds a GPU."""
    apply(control_plane, four_gpus(namespace))
    apply(control_plane, *gang(namespace, "a", "a1", n.m_a, 1), *gang(namespace, "b", "b1", n.m_b, 2))
    until("a1 and b1 to run", lambda: [phase(api, namespace, g) for g in ("a1", "b1")],
          accept=lambda p: p == ["Running", "Running"], timeout=60)
    apply(control_plane, *gang(namespace, "b", "b2", n.m_a, 1))
    until("b2 to run on borrowed quota", lambda: phase(api, namespace, "b2"), accept=lambda p: p == "Running",
          timeout=60)
    apply(control_plane, *gang(namespace, "a", "a2", n.m_c, 1))
    until("a2 to wait for quota", lambda: phase(api, namespace, "a2"), accept=lambda p: p == "Pending",
          timeout=30)
    refused = control_plane.kubectl("apply", "-f", "-", check=False, input=json.dumps(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lost", "namespace": namespace,
                                                          "labels": {QUEUE_LABEL: "nope"}},
         "spec": {"containers": [{"name": "main", "image": "registry.example/app:1"}]}}))
    assert refused.returncode != 0 and "does not exist" in refused.stderr
    apply(control_plane, *outside_pod(outside, n.m_c))
    until("the pod outside the queues to run", lambda: client.CoreV1Api(api).read_namespaced_pod(
        "outside", outside).status.phase, accept=lambda p: p == "Running", timeout=60)
    gated = client.CoreV1Api(api).read_namespaced_pod("a2-0", namespace).spec.scheduling_gates or []
    assert GATE in [g.name for g in gated]


# ----- the tests ---------------------------------------------------------------------------------------
def test_probes_say_live_and_ready_and_metrics_are_served(stack: Stack) -> None:
    assert stack.draq.get("/healthz") == (200, "ok\n")
    assert stack.draq.get("/readyz") == (200, "ok\n")
    status, text = stack.draq.get("/metrics")
    assert status == 200 and "draq_cycle_duration_seconds_bucket" in text and "process_cpu_seconds_total" in text
    assert "_created" not in text


def test_every_dashboard_query_returns_data(stack: Stack) -> None:
    empty = []
    count = 0
    for name, build in dashboards.DASHBOARDS.items():
        document = json.loads(dashboards.render(build()))
        for title, expr in dashboards.panel_queries(document):
            count += 1
            if not stack.prometheus.query(dashboards.concrete(expr, "2m")):
                empty.append(f"{name}: {title}: {dashboards.concrete(expr, '2m')}")
    assert count >= 30
    assert not empty, "queries without data:\n" + "\n".join(empty)


def test_queue_figures_and_the_gpu_join_have_the_workloads_numbers(stack: Stack) -> None:
    prometheus, n = stack.prometheus, stack.names

    def at(expr: str) -> dict[str, float]:
        return {r["metric"].get("cluster_queue", ""): float(r["value"][1]) for r in prometheus.query(expr)}

    assert at(f'draq_cluster_queue_usage{{cluster_queue=~"{n.cq_a}|{n.cq_b}"}}') == {n.cq_a: 4, n.cq_b: 12}
    assert at(f'draq_pending_pod_groups{{cluster_queue="{n.cq_a}", reason="QuotaExceeded"}}') == {n.cq_a: 1}
    assert at(f'draq_pod_groups{{cluster_queue="{n.cq_b}", phase="Running"}}') == {n.cq_b: 2}
    held = dashboards.concrete(f"count by (cluster_queue) ({dashboards.per_queue('DCGM_FI_DEV_GPU_UTIL')})")
    joined = at(held)
    assert joined[n.cq_a] == 4 and joined[n.cq_b] == 12  # every allocated GPU found its telemetry
    domains = {r["metric"]["domain"]: float(r["value"][1])
               for r in prometheus.query(f'draq_topology_domain_devices{{topology="{n.layout}"}}')}
    assert {n.m_a, n.m_b, n.m_c} <= set(domains) and all(count > 0 for count in domains.values())
    free = prometheus.value(f'sum(draq_topology_domain_free_devices{{topology="{n.layout}"}})')
    assert free is not None and free <= sum(domains.values()) - 16  # the 16 GPUs the queues hold are not free
    assert (prometheus.value('sum(draq_webhook_denials_total{webhook="validate", kind="Pod", '
                             'operation="CREATE"})') or 0) >= 1


def gap_report(control_plane: ControlPlane, *args: str) -> dict[str, Any]:
    """`draq gaps -o json` over the whole cluster (the metrics are cluster-wide too)."""
    result = subprocess.run([sys.executable, "-m", "admission.cli.main", "gaps", "--kubeconfig",
                             str(control_plane.kubeconfig), "-o", "json", *args],
                            capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_native_quota_gaps_reach_the_metrics(control_plane: ControlPlane, stack: Stack) -> None:
    """Last in this file. In the workload's namespace, a claim for 2 GPUs that no pod uses, then a
    ResourceQuota of 6 GPUs of the class: its two ClusterQueues give the namespace 8 each (NativeQuotaLimit
    2 + 2 in the test's unit), and the quota counts every claim from its creation while the namespace holds
    16 (NativeQuotaCounts: the spare claim's 2, and the gated a2's 4 if its claim exists). The operator's
    metrics show both, as `draq gaps` reports them over the same cluster."""
    prometheus, n = stack.prometheus, stack.names
    resource = f"{GPU_CLASS}.deviceclass.resource.k8s.io/devices"
    apply(control_plane, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                          "metadata": {"name": "spare", "namespace": stack.namespace},
                          "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                              "deviceClassName": GPU_CLASS, "count": 2}}]}}})
    apply(control_plane, {"apiVersion": "v1", "kind": "ResourceQuota",
                          "metadata": {"name": "gpus", "namespace": stack.namespace},
                          "spec": {"hard": {resource: "6"}}})
    used = int(until("the quota controller to count the namespace's claims", lambda: json.loads(
        control_plane.kubectl("get", "resourcequota", "gpus", "-n", stack.namespace, "-o", "json").stdout).get(
        "status", {}).get("used", {}).get(resource), accept=lambda u: int(u) >= 18, timeout=60))
    assert used in (18, 22)  # held 16 (a1 4, b1 8, b2 4), the spare claim 2, a2's claim 4 once it exists

    limit = f'draq_accounting_gap_size{{kind="NativeQuotaLimit", measure="{n.gpus}"}}'
    until("the NativeQuotaLimit gap to be scraped", lambda: prometheus.value(limit), accept=lambda v: v == 4,
          timeout=90)
    assert (prometheus.value('draq_accounting_gaps{kind="NativeQuotaLimit"}') or 0) >= 2

    ours = gap_report(control_plane, "--kind", "NativeQuotaCounts", "--namespace", stack.namespace)
    assert [(g["measure"], g["size"]) for g in ours["gaps"]] == [(resource, str(used - 16))]
    counts = f'draq_accounting_gap_size{{kind="NativeQuotaCounts", measure="{resource}"}}'

    def metric_and_report() -> tuple[float | None, float]:
        report = gap_report(control_plane, "--kind", "NativeQuotaCounts")
        return prometheus.value(counts), sum(abs(float(g["size"])) for g in report["gaps"]
                                             if g["measure"] == resource)

    until("the NativeQuotaCounts metric to be what draq gaps reports", metric_and_report,
          accept=lambda v: v[0] is not None and v[0] == v[1] and v[0] >= used - 16, timeout=90)
