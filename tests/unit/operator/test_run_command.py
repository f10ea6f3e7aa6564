"""`draq run`'s leadership options and its clean stop: a signal cancels the operator, which gives the Lease
up before the process ends, so another replica takes over at once."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal

import pytest

from admission.cli import run as cli
from admission.core.errors import InvalidInput
from admission.core.leadership import ElectionTiming
from admission.operator import Operator, OperatorSettings
from tests.support.clock import FakeClock

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


@pytest.mark.parametrize(("argv", "option"), [
    (("--lease-seconds", "4", "--renew-deadline", "4"), "--renew-deadline"),
    (("--lease-seconds", "2.5"), "--lease-seconds"),
    (("--retry-period", "12"), "--retry-period"),
])
def test_timing_that_cannot_work_is_refused(argv: tuple[str, ...], option: str) -> None:
    with pytest.raises(InvalidInput, match=option):
        cli.settings_from(parse(*argv))


def test_a_signal_cancels_the_work_and_waits_for_its_clean_up() -> None:
    cleaned: list[str] = []

    async def work() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0)
            cleaned.append("released")

    async def go() -> None:
        waiting = asyncio.create_task(cli.until_signalled(work(), (signal.SIGUSR1,)))
        await asyncio.sleep(0.05)
        os.kill(os.getpid(), signal.SIGUSR1)
        await asyncio.wait_for(waiting, 5)

    asyncio.run(go())
    assert cleaned == ["released"]


def test_work_that_fails_is_not_hidden() -> None:
    async def work() -> None:
        raise RuntimeError("the cache could not start")

    with pytest.raises(RuntimeError, match="could not start"):
        asyncio.run(cli.until_signalled(work(), (signal.SIGUSR1,)))


def test_a_signalled_operator_gives_its_lease_up() -> None:
    async def go() -> None:
        api = cluster()
        settings = OperatorSettings(kubernetes_version="1.35", identity="draq-a", lease_seconds=5)
        operator = Operator(settings, api=api, clock=FakeClock())
        waiting = asyncio.create_task(cli.until_signalled(operator.run(), (signal.SIGUSR1,)))
        assert operator.elector is not None
        await asyncio.wait_for(operator.elector.leading.wait(), 5)
        found = api.get_object("Lease", "draq-system", "draq-operator")
        assert found is not None and found["spec"]["holderIdentity"] == "draq-a"
        os.kill(os.getpid(), signal.SIGUSR1)
        await asyncio.wait_for(waiting, 5)
        found = api.get_object("Lease", "draq-system", "draq-operator")
        assert found is not None and found["spec"]["holderIdentity"] == ""

    asyncio.run(go())
