"""`draq doctor`'s checks from plain data: a healthy cluster has no finding; each broken part gets one
finding naming the object and a fix command; the operator's required rights are the chart's."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from admission.core.doctor import (
    DRAQ_CRDS,
    REQUIRED_RIGHTS,
    Check,
    ClusterFacts,
    Right,
    ServiceHealth,
    diagnose,
    last_cycle_from_metrics,
    render_report,
)
from admission.localcluster import rbac

RENEWED = "2027-01-15T08:00:00.000000Z"
NOW = dt.datetime.fromisoformat(RENEWED).timestamp() + 5  # the Lease renewed 5 s ago


def crd(plural: str, served: bool = True, established: bool = True) -> dict[str, Any]:
    return {"spec": {"versions": [{"name": "v1alpha1", "served": served, "storage": True}]},
            "status": {"conditions": [{"type": "Established", "status": "True" if established else "False"}]}}


def configuration(service: tuple[str, str] | None = ("draq-system", "draq-webhook"),
                  url: str = "") -> dict[str, Any]:
    client: dict[str, Any] = ({"url": url} if url else
                              {"service": {"namespace": service[0], "name": service[1]}} if service else {})
    return {"webhooks": [{"name": "a.draq.io", "clientConfig": client}]}


def healthy(**changes: Any) -> ClusterFacts:
    facts: dict[str, Any] = dict(
        draq_namespace="draq-system", service_account="draq", now=NOW, server_version="v1.35.8",
        served=frozenset({"resource.k8s.io/v1/resourceslices"}),
        crds={f"{p}.draq.io": crd(p) for p in DRAQ_CRDS},
        webhook_configurations={"MutatingWebhookConfiguration/draq-mutating": configuration(),
                                "ValidatingWebhookConfiguration/draq-validating": configuration()},
        services={("draq-system", "draq-webhook"): ServiceHealth(True, 2)}, urls_reachable={},
        namespaces=[{"metadata": {"name": "research", "labels": {"draq.io/default-queue": "training",
                                                                 "kubernetes.io/metadata.name": "research"}}},
                    {"metadata": {"name": "plain", "labels": {}}}],
        local_queues=[{"metadata": {"name": "training", "namespace": "research"}, "spec": {"clusterQueue": "cq"}}],
        cluster_queues=[{"metadata": {"name": "cq"}, "spec": {"namespaceSelector": {},
                                                              "quotas": [{"unit": "gpus", "nominal": 8}]}}],
        quota_units=[{"metadata": {"name": "gpus"}, "status": {"matchingDevices": 16, "conditions": [
            {"type": "Ready", "status": "True"}]}}],
        missing_rights=[], lease={"spec": {"holderIdentity": "draq-0", "leaseDurationSeconds": 15,
                                           "renewTime": RENEWED}},
        last_cycle=NOW - 10)
    return ClusterFacts(**{**facts, **changes})


def findings(facts: ClusterFacts, check: str) -> list[tuple[str, str]]:
    [found] = [c for c in diagnose(facts).checks if c.name == check]
    return [(f.problem, f.fix) for f in found.findings]


def test_a_healthy_cluster_has_no_finding_and_exits_0() -> None:
    report = diagnose(healthy())
    assert report.findings == () and report.exit_code == 0
    text = render_report(report)
    assert text.endswith("no findings") and "FAIL" not in text
    assert "v1.35.8" in text and "native gang API not served" in text and "draq-0, renewed 5s ago" in text


def test_a_namespace_labelled_before_its_local_queue_gets_both_fixes() -> None:
    facts = healthy(local_queues=[])
    [(problem, fix)] = findings(facts, "namespaces")
    assert "namespace research has draq.io/default-queue=training, but LocalQueue research/training" in problem
    assert '"clusterQueue":"cq"' in fix and fix.startswith("echo '") and "| kubectl apply -f -" in fix
    assert "kubectl label namespace research draq.io/default-queue-" in fix
    assert diagnose(facts).exit_code == 1


def test_queues_naming_missing_objects() -> None:
    facts = healthy(cluster_queues=[{"metadata": {"name": "cq"}, "spec": {"namespaceSelector": {}, "quotas": [
        {"unit": "gpus", "nominal": 8}, {"unit": "memory", "nominal": "1Ti"}]}}],
        local_queues=[{"metadata": {"name": "training", "namespace": "research"}, "spec": {"clusterQueue": "cq"}},
                      {"metadata": {"name": "old", "namespace": "research"}, "spec": {"clusterQueue": "gone"}}])
    [(local, local_fix), (unit, unit_fix)] = findings(facts, "queues")
    assert "LocalQueue research/old points to ClusterQueue gone" in local
    assert "kubectl -n research patch localqueue old --type merge" in local_fix
    assert "ClusterQueue cq has a quota in QuotaUnit memory, which does not exist" in unit
    assert "kubectl patch clusterqueue cq --type json" in unit_fix and '"path":"/spec/quotas/1"' in unit_fix


def test_units_matching_no_device_or_not_ready() -> None:
    facts = healthy(quota_units=[
        {"metadata": {"name": "gpus"}, "status": {"matchingDevices": 0}},
        {"metadata": {"name": "odd"}, "status": {"conditions": [
            {"type": "Ready", "status": "False", "message": "selector fails on gpu-0"}]}}])
    [(none, none_fix), (odd, _)] = findings(facts, "units")
    assert "QuotaUnit gpus matches no device" in none and "kubectl edit quotaunit gpus" in none_fix
    assert "QuotaUnit odd is not Ready: selector fails on gpu-0" in odd


def test_missing_crds_versions_and_webhooks() -> None:
    crds = {f"{p}.draq.io": crd(p) for p in DRAQ_CRDS if p != "topologies"}
    crds["podgroups.draq.io"] = crd("podgroups", served=False)
    facts = healthy(crds=crds, webhook_configurations={
        "MutatingWebhookConfiguration/draq-mutating": None,
        "ValidatingWebhookConfiguration/draq-validating": {"webhooks": []}})
    problems = [p for p, _ in findings(facts, "CRDs")]
    assert problems == ["CRD podgroups.draq.io does not serve v1alpha1 (served: none)",
                        "CRD topologies.draq.io is not installed"]
    [(absent, absent_fix), (empty, _)] = findings(facts, "webhooks")
    assert "MutatingWebhookConfiguration draq-mutating does not exist" in absent and "helm" in absent_fix
    assert "ValidatingWebhookConfiguration draq-validating has no webhooks" in empty


def test_webhooks_pointing_at_nothing_ready() -> None:
    no_endpoints = healthy(services={("draq-system", "draq-webhook"): ServiceHealth(True, 0)})
    [(problem, fix)] = findings(no_endpoints, "webhooks")
    assert "Service draq-system/draq-webhook, which has no ready endpoint" in problem
    assert "kubectl -n draq-system get endpointslices -l kubernetes.io/service-name=draq-webhook" in fix
    url = "https://127.0.0.1:9443"
    away = healthy(webhook_configurations={k: configuration(url=url) for k in (
        "MutatingWebhookConfiguration/draq-mutating", "ValidatingWebhookConfiguration/draq-validating")},
        urls_reachable={url: False})
    [(problem, fix)] = findings(away, "webhooks")
    assert f"calls {url}, which does not answer" in problem and "kubectl delete mutatingwebhookconfiguration" in fix
    assert findings(dataclasses.replace(away, urls_reachable={url: True}), "webhooks") == []


def test_rights_leader_and_cycle() -> None:
    lacking = healthy(missing_rights=[Right("patch", "draq.io", "podgroups", "status")])
    [(problem, fix)] = findings(lacking, "RBAC")
    assert "system:serviceaccount:draq-system:draq may not patch podgroups/status.draq.io" in problem
    assert "kubectl auth can-i patch podgroups.draq.io --subresource=status" in fix
    assert findings(healthy(missing_rights=None), "RBAC") == []  # not allowed to ask: said, not a finding
    assert "skip RBAC: not checked" in render_report(diagnose(healthy(missing_rights=None)))
    base = healthy()
    expired = dataclasses.replace(base, now=base.now + 60, last_cycle=base.now + 55)
    [(problem, _)] = findings(expired, "leader")
    assert "held by draq-0 expired" in problem
    stale = dataclasses.replace(base, last_cycle=base.now - 600)
    [(problem, _)] = findings(stale, "leader")
    assert "the last admission cycle ended 600s ago" in problem
    no_lease = healthy(lease=None, last_cycle=None)
    [(problem, _)] = findings(no_lease, "leader")
    assert "Lease draq-system/draq-operator does not exist" in problem


def kubernetes_check(version: str, gang_api: str) -> Check:
    facts = healthy(server_version=version, served=frozenset({"resource.k8s.io/v1/resourceslices", gang_api}))
    [check] = [c for c in diagnose(facts).checks if c.name == "Kubernetes"]
    return check


def test_the_gang_api_draq_uses_or_a_newer_one_it_does_not() -> None:
    check = kubernetes_check("v1.35.8", "scheduling.k8s.io/v1alpha1/workloads")
    assert "native gang API served (groups are also native gangs)" in check.summary
    check = kubernetes_check("v1.37.2", "scheduling.k8s.io/v1beta1/workloads")
    assert "served at v1beta1 only, which draq does not use" in check.summary and check.ok


def test_kubernetes_too_old_or_without_dra() -> None:
    [(problem, _)] = findings(healthy(server_version="v1.33.2"), "Kubernetes")
    assert "older than 1.34" in problem
    [(problem, _)] = findings(healthy(served=frozenset()), "Kubernetes")
    assert "does not serve resource.k8s.io/v1" in problem


def test_last_cycle_from_metrics() -> None:
    page = "# HELP x\ndraq_cycle_last_completed_timestamp_seconds 1.7e+09\nother 1\n"
    assert last_cycle_from_metrics(page) == 1.7e9
    assert last_cycle_from_metrics("draq_cycle_last_completed_timestamp_seconds 0.0\n") is None
    assert last_cycle_from_metrics("") is None


def test_every_required_right_is_granted_by_the_charts_rule_files() -> None:
    granted = rbac.rules(*rbac.Rights().cluster_files()) + rbac.rules(*rbac.Rights().namespace_files())
    for right in REQUIRED_RIGHTS:
        resource = f"{right.resource}/{right.subresource}" if right.subresource else right.resource
        assert any(right.group in rule["apiGroups"] and resource in rule["resources"] and right.verb in rule["verbs"]
                   and (not rule.get("resourceNames") or right.name in rule["resourceNames"])
                   for rule in granted), right
