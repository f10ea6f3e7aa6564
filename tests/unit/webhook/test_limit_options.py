"""The options of `draq webhook` and `draq run` that bound the webhook's clients and authenticate them."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from admission.cli import run, webhook
from admission.core.errors import InvalidInput


def parse(module: object, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    module.configure(parser)  # type: ignore[attr-defined]
    return parser.parse_args(list(argv))


def test_both_commands_take_the_limits_and_the_client_credentials() -> None:
    argv = ("--max-connections=300", "--idle-timeout=5", "--handshake-timeout=2", "--body-timeout=4",
            "--max-body-bytes=4194304", "--body-budget-bytes=33554432", "--body-wait=0.5",
            "--max-json-values=100000", "--client-ca-file=/etc/draq/client-ca/ca.crt",
            "--client-token-file=/etc/draq/client-token/tokens")
    from_webhook = webhook.settings_from(parse(webhook, *argv))
    from_run = run.webhook_settings_from(parse(run, *argv))
    assert from_run is not None
    for settings in (from_webhook, from_run):
        assert settings.connections.max_connections == 300 and settings.connections.idle_seconds == 5
        assert settings.connections.handshake_seconds == 2
        assert settings.bodies.max_body_bytes == 4194304 and settings.bodies.budget_bytes == 33554432
        assert settings.bodies.wait_seconds == 0.5 and settings.bodies.body_seconds == 4
        assert settings.bodies.max_values == 100000
        assert settings.client_ca_file == Path("/etc/draq/client-ca/ca.crt")
        assert settings.client_token_file == Path("/etc/draq/client-token/tokens")


def test_defaults_leave_client_authentication_off() -> None:
    settings = webhook.settings_from(parse(webhook))
    assert settings.client_ca_file is None and settings.client_token_file is None
    assert settings.connections.max_connections == 1000 and settings.bodies.max_body_bytes == 7 * 1024 * 1024


@pytest.mark.parametrize(("argv", "named"), [
    (("--max-connections=0",), "--max-connections"),
    (("--idle-timeout=0",), "--idle-timeout"),
    (("--body-wait=-1",), "--body-wait"),
    (("--body-budget-bytes=1048576",), "--body-budget-bytes"),
])
def test_bad_limits_are_named(argv: tuple[str, ...], named: str) -> None:
    with pytest.raises(InvalidInput, match=named):
        webhook.settings_from(parse(webhook, *argv))
