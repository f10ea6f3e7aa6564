"""The chart's NetworkPolicy and client authentication, rendered by Helm (`helm template`; skipped where
Helm is not built: `make helm`)."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
import yaml

from admission.localcluster import helm as helm_build
from tests.unit.chart.support import CHART

HELM = helm_build.paths_for().binary
pytestmark = pytest.mark.skipif(not HELM.exists(), reason="Helm is not built (make helm)")


def render(*sets: str) -> list[dict[str, Any]]:
    argv = [str(HELM), "template", "r", str(CHART), "--namespace", "draq"]
    for value in sets:
        argv += ["--set", value]
    result = subprocess.run(argv, capture_output=True, text=True, check=True)
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def refusal(*sets: str) -> str:
    argv = [str(HELM), "template", "r", str(CHART), "--namespace", "draq"]
    for value in sets:
        argv += ["--set", value]
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert result.returncode != 0, result.stdout[:500]
    return result.stderr


def one(documents: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [doc for doc in documents if doc["kind"] == kind]
    assert len(found) == 1, [doc["kind"] for doc in documents]
    return found[0]


def rules_by_port(policy: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {rule["ports"][0]["port"]: rule for rule in policy["spec"]["ingress"]}


def test_the_policy_is_on_by_default_with_the_webhook_port_open_and_metrics_to_prometheus() -> None:
    policy = one(render(), "NetworkPolicy")
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == "draq"
    rules = rules_by_port(policy)
    assert set(rules) == {"webhook", "metrics"}
    assert "from" not in rules["webhook"]  # the API server's address is not known to the chart
    assert rules["metrics"]["from"] == [{"namespaceSelector": {}, "podSelector": {
        "matchLabels": {"app.kubernetes.io/name": "prometheus"}}}]


def test_api_server_cidrs_scope_the_webhook_port() -> None:
    rules = rules_by_port(one(render("networkPolicy.apiServerCIDRs={10.0.0.1/32,10.0.0.2/32}"), "NetworkPolicy"))
    assert rules["webhook"]["from"] == [{"ipBlock": {"cidr": "10.0.0.1/32"}}, {"ipBlock": {"cidr": "10.0.0.2/32"}}]


def test_an_empty_metrics_from_closes_the_metrics_port_and_disabled_renders_none() -> None:
    rules = rules_by_port(one(render("networkPolicy.metricsFrom=null"), "NetworkPolicy"))
    assert set(rules) == {"webhook"}
    assert not [doc for doc in render("networkPolicy.enabled=false") if doc["kind"] == "NetworkPolicy"]


def container(documents: list[dict[str, Any]]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = one(documents, "Deployment")["spec"]["template"]["spec"]["containers"]
    return containers[0]


def test_the_limits_are_passed_to_draq_run() -> None:
    args = container(render("webhook.limits.maxConnections=300"))["args"]
    assert "--max-connections=300" in args and "--max-body-bytes=7340032" in args
    assert "--body-budget-bytes=67108864" in args and "--idle-timeout=15" in args
    assert not [arg for arg in args if arg.startswith("--client-")]


def test_client_authentication_mounts_the_ca_and_the_tokens() -> None:
    documents = render("webhook.clientAuth.mtls.enabled=true", "webhook.clientAuth.mtls.caConfigMap=apiserver-ca",
                       "webhook.clientAuth.token.enabled=true", "webhook.clientAuth.token.secretName=tokens")
    draq = container(documents)
    assert "--client-ca-file=/etc/draq/client-ca/ca.crt" in draq["args"]
    assert "--client-token-file=/etc/draq/client-token/tokens" in draq["args"]
    mounts = {mount["name"]: mount["mountPath"] for mount in draq["volumeMounts"]}
    assert mounts["client-ca"] == "/etc/draq/client-ca" and mounts["client-token"] == "/etc/draq/client-token"
    volumes = {volume["name"]: volume for volume in one(documents, "Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert volumes["client-ca"]["configMap"] == {"name": "apiserver-ca"}
    assert volumes["client-token"]["secret"] == {"secretName": "tokens"}


def test_client_authentication_without_its_source_is_refused() -> None:
    assert "caSecret" in refusal("webhook.clientAuth.mtls.enabled=true")
    assert "caSecret" in refusal("webhook.clientAuth.mtls.enabled=true", "webhook.clientAuth.mtls.caSecret=a",
                                 "webhook.clientAuth.mtls.caConfigMap=b")
    assert "secretName" in refusal("webhook.clientAuth.token.enabled=true")
