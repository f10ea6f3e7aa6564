"""The metrics and probe port options of `draq run` and `draq webhook`: a default port, 0 for none, and a
port that is no TCP port refused naming the option."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pytest

from admission.cli import run, webhook
from admission.core.errors import InvalidInput


def parser_of(configure: Callable[[argparse.ArgumentParser], None]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    configure(parser)
    return parser


def test_draq_run_serves_metrics_on_8080_unless_told_otherwise() -> None:
    parser = parser_of(run.configure)
    assert run.metrics_address_from(parser.parse_args([])) == ("0.0.0.0", 8080)
    assert run.metrics_address_from(parser.parse_args(["--metrics-host", "127.0.0.1", "--metrics-port", "9090"])) \
        == ("127.0.0.1", 9090)
    assert run.metrics_address_from(parser.parse_args(["--metrics-port", "0"])) is None


@pytest.mark.parametrize(("command", "check"), [
    (run, lambda module, args: module.metrics_address_from(args)),
    (webhook, lambda module, args: module.settings_from(args)),
])
def test_a_port_that_is_no_tcp_port_is_refused(command: object, check: Callable[[object, object], object]) -> None:
    args = parser_of(command.configure).parse_args(["--metrics-port", "70000"])  # type: ignore[attr-defined]
    with pytest.raises(InvalidInput) as caught:
        check(command, args)
    assert caught.value.field == "--metrics-port"
