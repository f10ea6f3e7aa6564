"""The loop's quiet time after a change: the debounce while passes follow each other (a burst is decided in
one pass), a moment when the operator was idle (a lone pod is answered at once)."""

from __future__ import annotations

import asyncio

from admission.operator.loop import IDLE_SETTLE_SECONDS
from tests.support.clock import FakeClock

from .operator_world import cluster, started


def test_an_idle_operator_waits_a_moment_and_a_busy_one_the_debounce() -> None:
    async def go() -> None:
        clock = FakeClock()
        operator = await started(cluster(), clock)
        debounce = operator.settings.debounce_seconds
        assert debounce > IDLE_SETTLE_SECONDS
        assert operator._quiet_seconds() == IDLE_SETTLE_SECONDS  # no pass yet
        operator._last_pass_end = clock.monotonic()
        clock.advance(debounce / 2)
        assert operator._quiet_seconds() == debounce  # a pass just ended: more events are likely coming
        clock.advance(debounce)
        assert operator._quiet_seconds() == IDLE_SETTLE_SECONDS
        await operator.cache.stop()

    asyncio.run(go())
