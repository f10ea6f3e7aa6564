"""`draq doctor` on the real control plane: the chart installed and draq running as its ServiceAccount
pass every check; a namespace labelled before its LocalQueue exists and a ClusterQueue quoting a QuotaUnit
that does not exist are reported with commands that, run as printed, fix them; a cluster that cannot be
reached exits 2."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from admission.core.labels import DEFAULT_QUEUE_LABEL
from admission.localcluster.controlplane import ControlPlane
from admission.localcluster.nodesim import NodeSimulator
from e2e.test_chart import CHART, Helm, helm, service_account_kubeconfig, start_draq_of, values_file
from e2e.waiting import until

__all__ = ["helm"]  # the fixture, shared with test_chart
REPO = Path(__file__).resolve().parents[1]
# Checks about draq itself: they must pass whatever other tests of the session left behind.
DRAQ_CHECKS = ("Kubernetes", "CRDs", "webhooks", "RBAC", "leader")


def doctor(plane: ControlPlane, *args: str) -> tuple[int, dict[str, Any]]:
    result = subprocess.run([sys.executable, "-m", "admission.cli.main", "doctor", "-o", "json", *args],
                            capture_output=True, text=True, cwd=REPO, timeout=120,
                            env={**os.environ, "KUBECONFIG": str(plane.kubeconfig)})
    assert result.returncode in (0, 1), result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    assert result.returncode == (0 if report["ok"] else 1)
    return result.returncode, report


def findings(report: dict[str, Any], check: str) -> list[dict[str, str]]:
    [found] = [c for c in report["checks"] if c["name"] == check]
    return list(found["findings"])


def run_fix(plane: ControlPlane, fix: str) -> None:
    """Run the command a finding prints (its text up to the explanation in parentheses) with the built kubectl."""
    command = re.split(r"\s{3}\(", fix)[0].removeprefix("create ").strip()
    command = command.replace("kubectl ", f"{plane.kubectl_path} --kubeconfig {plane.kubeconfig} ")
    subprocess.run(["bash", "-c", command], check=True, capture_output=True, text=True, timeout=60)


def test_doctor_passes_a_healthy_setup_and_reports_a_broken_one_with_its_fixes(
        control_plane: ControlPlane, nodesim: NodeSimulator, helm: Helm, tmp_path: Path) -> None:
    unique = uuid.uuid4().hex[:6]
    namespace, work, broken = f"draq-doc-{unique}", f"doc-work-{unique}", f"doc-broken-{unique}"
    release = f"draq-doc-{unique}"
    nodesim.add_node(f"doc-{unique}", "h100")
    control_plane.kubectl("create", "namespace", work)
    control_plane.kubectl("label", "namespace", work, f"{DEFAULT_QUEUE_LABEL}=lq")
    values = values_file(tmp_path / "values.yaml", work, unique, nominal=8)
    helm("install", release, str(CHART), "-n", namespace, "--create-namespace", "-f", str(values),
         kubeconfig=control_plane.kubeconfig)
    draq = None
    try:
        kubeconfig = service_account_kubeconfig(control_plane, namespace, tmp_path / "draq.kubeconfig")
        draq = start_draq_of(control_plane, helm, release, namespace, kubeconfig, tmp_path / "draq.log")
        metrics = f"http://127.0.0.1:{draq.metrics_port}/metrics"
        until("a first admission cycle", lambda: draq.get("/metrics")[1] if draq else "",
              accept=lambda text: bool(re.search(r"^draq_cycle_last_completed_timestamp_seconds [1-9]", text, re.M)),
              timeout=60)

        code, report = doctor(control_plane, "-n", namespace, "--metrics-url", metrics)
        for check in DRAQ_CHECKS:
            assert findings(report, check) == [], (check, report)
        mine = [f for c in report["checks"] for f in c["findings"] if unique in f["problem"]]
        assert mine == [], mine
        leader = next(c for c in report["checks"] if c["name"] == "leader")
        assert "renewed" in leader["summary"] and "last cycle" in leader["summary"]
        assert code == 0 or all(unique not in f["problem"] for c in report["checks"] for f in c["findings"])

        # Broken: a namespace labelled before its LocalQueue exists; a ClusterQueue quoting a missing unit.
        control_plane.kubectl("create", "namespace", broken)
        control_plane.kubectl("label", "namespace", broken, f"{DEFAULT_QUEUE_LABEL}=training")
        queue = {"apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": f"doc-cq-{unique}"},
                 "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": broken}},
                          "quotas": [{"unit": f"gpus-{unique}", "nominal": 1},
                                     {"unit": f"absent-{unique}", "nominal": 1}]}}
        control_plane.kubectl("apply", "-f", "-", input=json.dumps(queue))
        code, report = doctor(control_plane, "-n", namespace, "--metrics-url", metrics)
        assert code == 1
        [labelled] = [f for f in findings(report, "namespaces") if broken in f["problem"]]
        assert f"LocalQueue {broken}/training does not exist" in labelled["problem"]
        assert f'"clusterQueue":"doc-cq-{unique}"' in labelled["fix"], "the one ClusterQueue serving it"
        assert f"kubectl label namespace {broken} {DEFAULT_QUEUE_LABEL}-" in labelled["fix"]
        [unit] = [f for f in findings(report, "queues") if f"doc-cq-{unique}" in f["problem"]]
        assert f"QuotaUnit absent-{unique}, which does not exist" in unit["problem"]
        assert "/spec/quotas/1" in unit["fix"]

        run_fix(control_plane, labelled["fix"])
        run_fix(control_plane, unit["fix"].split("or drop the quota: ")[1])
        _, report = doctor(control_plane, "-n", namespace, "--metrics-url", metrics)
        assert [f for c in report["checks"] for f in c["findings"] if unique in f["problem"]] == []
    finally:
        if draq is not None:
            draq.stop()
        helm("uninstall", release, "-n", namespace, kubeconfig=control_plane.kubeconfig, check=False)
        control_plane.kubectl("delete", "namespace", work, broken, namespace, "--wait=false", check=False)
        control_plane.kubectl("delete", f"clusterqueue/doc-cq-{unique}", f"clusterqueue/cq-{unique}",
                              f"quotaunit/gpus-{unique}", "--ignore-not-found", "--wait=false", check=False)


def test_doctor_exits_2_when_the_cluster_cannot_be_reached(control_plane: ControlPlane, tmp_path: Path) -> None:
    config = tmp_path / "nowhere.kubeconfig"
    config.write_text(control_plane.kubeconfig.read_text().replace(
        re.search(r"server: (\S+)", control_plane.kubeconfig.read_text()).group(1),  # type: ignore[union-attr]
        "https://127.0.0.1:1"))
    result = subprocess.run([sys.executable, "-m", "admission.cli.main", "doctor", "--kubeconfig", str(config)],
                            capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 2 and "cannot reach the API server" in result.stderr
