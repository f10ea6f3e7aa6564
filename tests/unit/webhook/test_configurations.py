"""The generated webhook configurations and the `draq webhook` command line."""

from __future__ import annotations

import argparse
import base64
from typing import Any

import pytest
import yaml

from admission.cli import webhook as cli
from admission.core.errors import InvalidInput
from admission.webhook.configurations import WebhookTarget, configurations

from .match_conditions import selects, sent

TARGET = WebhookTarget(url="https://127.0.0.1:9443")


def webhooks(draq_namespace: str = "draq-system") -> list[dict[str, Any]]:
    return [w for c in configurations(TARGET, b"CA", draq_namespace) for w in c["webhooks"]]


def namespace_labels(name: str, **labels: str) -> dict[str, str]:
    return {"kubernetes.io/metadata.name": name, **labels}


def called_for(webhook: dict[str, Any], ns_labels: dict[str, str], pod_labels: dict[str, str]) -> bool:
    """A pod CREATE: selectors and match conditions."""
    return sent(webhook, ns_labels, "CREATE", {"metadata": {"labels": pod_labels}})


def pod_webhooks(kind: str) -> list[dict[str, Any]]:
    return [w for w in webhooks() if "pods" in w["rules"][0]["resources"] and w["name"].startswith(kind)]


@pytest.mark.parametrize("kind", ["gate-pods", "pods."])
def test_exactly_one_pod_webhook_per_managed_pod_and_none_elsewhere(kind: str) -> None:
    cases = [
        (namespace_labels("team", **{"draq.io/managed": "true"}), {"draq.io/queue": "q"}, 1),
        (namespace_labels("team", **{"draq.io/managed": "true"}), {}, 0),
        (namespace_labels("team", **{"draq.io/default-queue": "q"}), {}, 1),
        (namespace_labels("team", **{"draq.io/managed": "true", "draq.io/default-queue": "q"}), {}, 1),
        (namespace_labels("team", **{"draq.io/managed": "false"}), {"draq.io/queue": "q"}, 0),
        (namespace_labels("plain"), {"draq.io/queue": "q"}, 0),
        (namespace_labels("kube-system", **{"draq.io/default-queue": "q"}), {"draq.io/queue": "q"}, 0),
        (namespace_labels("draq-system", **{"draq.io/managed": "true"}), {"draq.io/queue": "q"}, 0),
    ]
    for ns_labels, pod_labels, expected in cases:
        calls = sum(called_for(w, ns_labels, pod_labels) for w in pod_webhooks(kind))
        assert calls == expected, (ns_labels, pod_labels)


def test_failure_policies_timeouts_and_side_effects() -> None:
    for webhook in webhooks():
        assert webhook["sideEffects"] == "None" and webhook["timeoutSeconds"] <= 5
        assert webhook["admissionReviewVersions"] == ["v1"]
        fails_closed = webhook["rules"][0]["resources"] in (["pods"], ["podgroups/status"])  # pods; the fence
        assert webhook["failurePolicy"] == ("Fail" if fails_closed else "Ignore"), webhook["name"]


def test_draq_itself_is_exempt_from_validation() -> None:
    for webhook in webhooks():
        if webhook["name"].startswith(("pods.", "queues.")):
            expressions = [c["expression"] for c in webhook["matchConditions"]]
            assert "request.userInfo.username != 'system:serviceaccount:draq-system:draq'" in expressions


def test_ca_bundle_and_client_config() -> None:
    for webhook in webhooks():
        assert base64.b64decode(webhook["clientConfig"]["caBundle"]) == b"CA"
        assert webhook["clientConfig"]["url"] in ("https://127.0.0.1:9443/mutate",
                                                  "https://127.0.0.1:9443/validate")
    service = WebhookTarget(service_namespace="draq", service_name="hook").client_config("/validate", b"")
    assert service == {"service": {"namespace": "draq", "name": "hook", "port": 443, "path": "/validate"}}


def test_webhook_names_are_unique_and_qualified() -> None:
    names = [w["name"] for w in webhooks()]
    assert len(names) == len(set(names)) and all(n.count(".") >= 2 for n in names)


def test_own_namespace_is_configurable() -> None:
    for webhook in webhooks("ops"):
        assert not selects(webhook, "namespaceSelector", namespace_labels(
            "ops", **{"draq.io/default-queue": "q", "draq.io/managed": "true"}))


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.configure(parser)
    return parser.parse_args(argv)


def test_print_configurations_gives_plain_yaml_manifests(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.run(parse("--print-configurations", "--url", "https://10.0.0.5:8443")) == 0
    out = capsys.readouterr().out
    documents = list(yaml.safe_load_all(out))
    assert [d["kind"] for d in documents] == ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
    assert "&id" not in out and "*id" not in out


def test_service_mode_certificate_names_the_service() -> None:
    settings = cli.settings_from(parse("--namespace", "ops", "--service", "hook"))
    assert settings.cert_hosts == ("hook.ops.svc", "hook.ops.svc.cluster.local")
    assert settings.target.service_namespace == "ops"


@pytest.mark.parametrize(
    ("argv", "field"),
    [(("--url", "http://x"), "--url"), (("--cert-file", "a.crt"), "--cert-file/--key-file"),
     (("--port", "70000"), "--port"), (("--cert-host", "bad..name"), "--cert-host")],
)
def test_bad_options_name_the_option(argv: tuple[str, ...], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        cli.settings_from(parse(*argv))
    assert caught.value.field == field


def test_the_options_defaults_are_the_settings_defaults() -> None:
    parser = argparse.ArgumentParser()
    cli.configure(parser)
    settings, defaults = cli.settings_from(parser.parse_args([])), cli.DEFAULTS
    for name in ("host", "port", "namespace", "draq_user", "target", "resync_seconds", "cert_reload_seconds",
                 "manage_configurations"):
        assert getattr(settings, name) == getattr(defaults, name), name


@pytest.mark.parametrize(("spec", "expected"), [
    ({"containers": [{"name": "c"}]}, False),
    ({"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "hugepages-2Mi": "2Mi"}}}]}, False),
    ({"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}, True),
    ({"containers": [{"name": "c"}], "initContainers": [{"name": "i", "resources": {"requests": {"x.io/fpga": "1"}}}]},
     True),
    ({"containers": [{"name": "c", "resources": {"requests": {"deviceclass.resource.kubernetes.io/gpu": "1"}}}]},
     True),
    ({"containers": [{"name": "c"}], "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}]}, True),
])
def test_unlabelled_pods_of_opt_in_namespaces_are_validated_when_they_use_devices(spec: dict[str, Any],
                                                                                   expected: bool) -> None:
    [managed] = [w for w in pod_webhooks("pods.") if w["name"] == "pods.managed.draq.io"]
    ns = namespace_labels("team", **{"draq.io/managed": "true"})
    assert sent(managed, ns, "CREATE", {"metadata": {"labels": {}}, "spec": spec}) is expected
    [gate] = [w for w in pod_webhooks("gate-pods") if w["name"] == "gate-pods.managed.draq.io"]
    assert not sent(gate, ns, "CREATE", {"metadata": {"labels": {}}, "spec": spec})  # never gated without a queue


def test_the_policy_options_reach_the_settings_and_bad_ones_are_named() -> None:
    settings = cli.settings_from(parse("--device-policy", "allow", "--exempt-owner-kind", "DaemonSet",
                                       "--exempt-owner-kind", "DaemonSet", "--max-pending-groups", "0"))
    assert (settings.device_policy, settings.exempt_owner_kinds, settings.max_pending_groups) == (
        "allow", ("DaemonSet",), 0)
    defaults = cli.settings_from(parse())
    assert (defaults.device_policy, defaults.exempt_owner_kinds, defaults.max_pending_groups) == (
        "require-queue", (), 1000)
    with pytest.raises(InvalidInput, match="--exempt-owner-kind: Deployment cannot be verified"):
        cli.settings_from(parse("--exempt-owner-kind", "Deployment"))
    with pytest.raises(InvalidInput, match="--max-pending-groups: -1"):
        cli.settings_from(parse("--max-pending-groups", "-1"))
