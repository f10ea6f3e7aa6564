"""The publisher in adopt mode: fills in the configurations the Helm chart creates, never creates them,
and keeps the owner's labels and annotations."""

from __future__ import annotations

import asyncio

import pytest

from admission.webhook.configurations import WebhookTarget, configurations
from admission.webhook.publisher import ConfigurationPublisher, MissingConfiguration
from tests.support.fake_api import FakeApi

TARGET = WebhookTarget(service_namespace="draq-system", service_name="draq-webhook")
HELM = {"labels": {"app.kubernetes.io/managed-by": "Helm"},
        "annotations": {"meta.helm.sh/release-name": "draq", "meta.helm.sh/release-namespace": "draq-system"}}


def publisher(api: FakeApi) -> ConfigurationPublisher:
    return ConfigurationPublisher(api, lambda bundle: configurations(TARGET, bundle, "draq-system"), create=False)


def test_adopt_mode_fills_in_the_charts_empty_configurations_and_keeps_helms_metadata() -> None:
    api = FakeApi()
    for kind, name in (("MutatingWebhookConfiguration", "draq-mutating"),
                       ("ValidatingWebhookConfiguration", "draq-validating")):
        api.add({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                 "metadata": {"name": name, **HELM}})
    assert asyncio.run(publisher(api).apply(b"CA")) is True
    assert not [w for w in api.writes if w.method == "POST"], "nothing is created"
    for kind, name in (("MutatingWebhookConfiguration", "draq-mutating"),
                       ("ValidatingWebhookConfiguration", "draq-validating")):
        found = api.get_object(kind, "", name)
        assert found is not None and found["webhooks"], name
        assert found["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
        assert found["metadata"]["annotations"]["meta.helm.sh/release-name"] == "draq"


def test_adopt_mode_reports_a_missing_configuration_instead_of_creating_it() -> None:
    api = FakeApi()
    with pytest.raises(MissingConfiguration, match=r"draq-mutating does not exist .* helm upgrade"):
        asyncio.run(publisher(api).apply(b"CA"))
    assert api.writes == []
