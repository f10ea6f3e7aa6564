"""At start the operator models the API server's own release, unless one was given, and says what it
does not model."""

from __future__ import annotations

import asyncio
import logging

import pytest

from admission.core.features import modelled_release
from admission.operator import Operator, OperatorSettings
from tests.support.fake_api import FakeApi


def _chosen(git_version: str | None, given: str | None = None) -> Operator:
    api = FakeApi()
    api.git_version = git_version
    operator = Operator(OperatorSettings(leader_election=False, kubernetes_version=given), api=api)
    asyncio.run(operator.choose_release())
    return operator


def test_the_servers_release_is_modelled() -> None:
    operator = _chosen("v1.37.2")
    assert operator.gates.version == "1.37" and operator.reader.gates.version == "1.37"


def test_a_given_release_wins_over_the_server(caplog: pytest.LogCaptureFixture) -> None:
    assert _chosen("v1.37.2", given="1.35").gates.version == "1.35"


def test_1_37_defaults_are_modelled_and_said_at_start(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        _chosen("v1.37.2")
    assert "allocation modelled as Kubernetes 1.37" in caplog.text
    assert "not modelled" not in caplog.text


@pytest.mark.parametrize(("server", "release", "said"), [
    ("1.33", "1.34", "older than the oldest release draq models (1.34)"),
    ("1.38", "1.37", "newer than the newest release draq models (1.37)"),
    (None, "1.35", "did not report its version")])
def test_a_release_draq_does_not_model_is_named(server: str | None, release: str, said: str) -> None:
    chosen, notes = modelled_release(server)
    assert chosen == release and said in notes[0]


def test_an_unknown_server_version_is_said_at_start(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert _chosen(None).gates.version == "1.35"
    assert "did not report its version" in caplog.text
