"""`draq run`'s leadership options and its process under kopf: the cleanup handler cancels the loop, which
gives the Lease up before the webhooks and the probe port stop, so another replica takes over at once; a
part that cannot start, or a loop that fails, ends the process with its error."""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass

import pytest

from admission.cli import run as cli
from admission.core.errors import DraqError, InvalidInput
from admission.core.leadership import ElectionTiming
from admission.operator import Operator, OperatorSettings
from admission.operator.runtime import KopfProcess, Lifecycle
from tests.support.clock import FakeClock
from tests.support.fake_api import FakeApi

from .operator_world import cluster


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.configure(parser)
    return parser.parse_args(argv)


def test_leadership_options_reach_the_operator() -> None:
    settings = cli.settings_from(parse("--identity", "draq-a", "--lease-seconds", "5", "--renew-deadline", "3.5",
                                       "--retry-period", "0.5", "--namespace", "ops"))
    assert (settings.identity, settings.lease_namespace) == ("draq-a", "ops")
    assert settings.election_timing() == ElectionTiming(5, 3.5, 0.5)
    defaults = cli.settings_from(parse())
    assert defaults.identity == "" and defaults.election_timing() == ElectionTiming(15, 10, 2)


def test_the_options_defaults_are_the_settings_defaults() -> None:
    """Each default is written once, in the settings dataclasses: `draq run` with no option is those."""
    from admission.operator.settings import DEFAULTS
    from admission.webhook.service import WebhookSettings

    assert cli.settings_from(parse()) == DEFAULTS
    webhook, defaults = cli.webhook_settings_from(parse()), WebhookSettings()
    assert webhook is not None
    assert (webhook.host, webhook.port, webhook.namespace, webhook.native_gangs, webhook.target) == (
        defaults.host, defaults.port, defaults.namespace, defaults.native_gangs, defaults.target)
    assert "(default 15.0)" in cli_help() and "(default 0.15)" in cli_help()


def test_the_park_safety_period_reaches_the_operator() -> None:
    assert cli.settings_from(parse("--park-safety", "90")).park_safety_seconds == 90.0
    assert cli.settings_from(parse()).park_safety_seconds == 60.0


def cli_help() -> str:
    parser = argparse.ArgumentParser()
    cli.configure(parser)
    return " ".join(parser.format_help().split())


@pytest.mark.parametrize(("argv", "option"), [
    (("--lease-seconds", "4", "--renew-deadline", "4"), "--renew-deadline"),
    (("--lease-seconds", "2.5"), "--lease-seconds"),
    (("--retry-period", "12"), "--retry-period"),
    (("--park-safety", "0"), "--park-safety"),
])
def test_timing_that_cannot_work_is_refused(argv: tuple[str, ...], option: str) -> None:
    with pytest.raises(InvalidInput, match=option):
        cli.settings_from(parse(*argv))


def test_feature_gates_reach_the_operators_model_of_the_release() -> None:
    settings = cli.settings_from(parse("--kubernetes-version", "1.37", "--feature-gates",
                                       "DRAWorkloadResourceClaims=true"))
    assert settings.feature_gates == {"DRAWorkloadResourceClaims": True}
    assert "DRAWorkloadResourceClaims" in Operator(settings, api=FakeApi()).reader.gates


@pytest.mark.parametrize("argv", [
    ("--feature-gates", "NoSuchGate=true"),
    ("--kubernetes-version", "1.35", "--feature-gates", "DRAWorkloadResourceClaims=true"),
    ("--feature-gates", "DRAWorkloadResourceClaims"),
])
def test_feature_gates_that_cannot_apply_are_refused(argv: tuple[str, ...]) -> None:
    with pytest.raises(InvalidInput, match="--feature-gates"):
        cli.settings_from(parse(*argv))


@dataclass
class Part:
    name: str
    said: list[str]
    fails: bool = False

    async def start(self) -> None:
        if self.fails:
            raise OSError(f"{self.name}: address already in use")
        self.said.append(f"start {self.name}")

    async def stop(self) -> None:
        self.said.append(f"stop {self.name}")


def leader(api: FakeApi) -> str:
    found = api.get_object("Lease", "draq-system", "draq-operator")
    assert found is not None
    return str(found["spec"]["holderIdentity"])


def test_the_cleanup_gives_the_lease_up_before_the_parts_stop() -> None:
    said: list[str] = []

    async def go() -> None:
        api = cluster()
        settings = OperatorSettings(kubernetes_version="1.35", identity="draq-a", lease_seconds=5)
        operator = Operator(settings, api=api, clock=FakeClock())
        lifecycle = Lifecycle(operator, [Part("probes", said), Part("webhooks", said)], asyncio.Event())
        await lifecycle.start()
        assert operator.elector is not None
        await asyncio.wait_for(operator.elector.leading.wait(), 5)
        assert leader(api) == "draq-a"
        await lifecycle.stop()
        said.append(f"holder after stop: {leader(api)!r}")
        assert lifecycle.failure is None and not lifecycle.stop_flag.is_set()

    asyncio.run(go())
    assert said == ["start probes", "start webhooks", "stop webhooks", "stop probes", "holder after stop: ''"]


def test_a_part_that_cannot_start_stops_the_process_with_its_error() -> None:
    said: list[str] = []

    async def go() -> Lifecycle:
        operator = Operator(OperatorSettings(leader_election=False), api=cluster(), clock=FakeClock())
        lifecycle = Lifecycle(operator, [Part("probes", said), Part("webhooks", said, fails=True)], asyncio.Event())
        await lifecycle.start()
        return lifecycle

    lifecycle = asyncio.run(go())
    assert said == ["start probes", "stop probes"]
    assert lifecycle.stop_flag.is_set() and isinstance(lifecycle.failure, OSError)
    assert "webhooks: address already in use" in str(lifecycle.failure)


def test_a_loop_that_fails_stops_the_process_with_its_error() -> None:
    async def go() -> Lifecycle:
        operator = Operator(OperatorSettings(leader_election=False), api=cluster(), clock=FakeClock())

        async def broken() -> None:
            raise DraqError("leader election stopped")

        operator.run = broken  # type: ignore[method-assign]
        lifecycle = Lifecycle(operator, [], asyncio.Event())
        await lifecycle.start()
        await asyncio.wait_for(lifecycle.stop_flag.wait(), 5)
        await lifecycle.stop()
        return lifecycle

    lifecycle = asyncio.run(go())
    assert isinstance(lifecycle.failure, DraqError) and "leader election stopped" in str(lifecycle.failure)


def test_readiness_waits_for_kopf() -> None:
    process = KopfProcess(Operator(OperatorSettings(leader_election=False), api=cluster(), clock=FakeClock()))
    assert process.unready() == "kopf has not finished starting"
    process.ready_flag.set()
    assert process.unready() == ""
