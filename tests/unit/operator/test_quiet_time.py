"""The loop's quiet time after a change: while passes follow each other, as long as the last pass took, from a
moment up to the debounce (a burst of long passes is gathered); a moment when the operator was idle (a lone pod is
answered at once)."""

from __future__ import annotations

import asyncio

from admission.operator.loop import IDLE_SETTLE_SECONDS
from tests.support.clock import FakeClock

from .operator_world import cluster, started


def test_an_idle_operator_waits_a_moment_and_a_busy_one_as_long_as_its_last_pass() -> None:
    async def go() -> None:
        clock = FakeClock()
        operator = await started(cluster(), clock)
        debounce = operator.settings.debounce_seconds
        assert debounce > IDLE_SETTLE_SECONDS
        assert operator._quiet_seconds() == IDLE_SETTLE_SECONDS  # no pass yet
        operator._last_pass_end, operator._last_pass_seconds = clock.monotonic(), 10 * debounce
        clock.advance(debounce / 2)
        assert operator._quiet_seconds() == debounce  # a long pass just ended: a burst goes on
        operator._last_pass_seconds = debounce / 3
        assert operator._quiet_seconds() == debounce / 3  # as long as the last pass took
        operator._last_pass_seconds = IDLE_SETTLE_SECONDS / 10
        assert operator._quiet_seconds() == IDLE_SETTLE_SECONDS  # a quick pass: a moment
        clock.advance(debounce)
        operator._last_pass_seconds = 10 * debounce
        assert operator._quiet_seconds() == IDLE_SETTLE_SECONDS  # the last pass ended a debounce ago: idle
        await operator.cache.stop()

    asyncio.run(go())
