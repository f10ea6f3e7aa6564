"""The `draq run` options the chart passes: draq's user, the webhook Service, externally provided
certificates (cert-manager) and configurations kept by the chart."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from admission.cli import run as cli
from admission.core.errors import InvalidInput


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.configure(parser)
    return parser.parse_args(list(argv))


def test_defaults_follow_the_namespace() -> None:
    settings = cli.webhook_settings_from(parse("--namespace", "gpu-admission"))
    assert settings is not None
    assert settings.draq_user == "system:serviceaccount:gpu-admission:draq"
    assert settings.target.service_name == "draq-webhook" and settings.target.service_namespace == "gpu-admission"
    assert settings.cert_hosts == ("draq-webhook.gpu-admission.svc", "draq-webhook.gpu-admission.svc.cluster.local")
    assert settings.manage_configurations and settings.create_configurations and settings.cert_file is None


def test_the_chart_owns_the_configurations_draq_fills_in() -> None:
    settings = cli.webhook_settings_from(parse("--adopt-webhook-configurations"))
    assert settings is not None and settings.manage_configurations and not settings.create_configurations


def test_the_charts_arguments() -> None:
    settings = cli.webhook_settings_from(parse(
        "--namespace=draq", "--draq-user=system:serviceaccount:draq:admission", "--webhook-service=admission",
        "--cert-file=/etc/draq/tls/tls.crt", "--key-file=/etc/draq/tls/tls.key", "--ca-file=/etc/draq/tls/ca.crt",
        "--no-webhook-configurations"))
    assert settings is not None
    assert settings.draq_user == "system:serviceaccount:draq:admission"
    assert settings.target.service_name == "admission" and settings.cert_hosts[0] == "admission.draq.svc"
    assert settings.cert_file == Path("/etc/draq/tls/tls.crt") and settings.ca_file == Path("/etc/draq/tls/ca.crt")
    assert not settings.manage_configurations


@pytest.mark.parametrize("argv", [("--cert-file=/a",), ("--key-file=/b",), ("--ca-file=/c",)])
def test_certificate_files_come_as_a_pair(argv: tuple[str, ...]) -> None:
    with pytest.raises(InvalidInput):
        cli.webhook_settings_from(parse(*argv))
