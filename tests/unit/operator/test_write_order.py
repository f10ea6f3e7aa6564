"""A pass's writes: admissions take the write slots before the Waits of other groups, so a burst of new groups
that all wait (a flood of pods) does not hold up another tenant's release; and on a slow API server a pass
leaves the Waits it could not start within `WAIT_WRITE_SECONDS` to the next pass."""

from __future__ import annotations

import asyncio
from typing import Any

from admission.operator.loop import WAIT_WRITE_SECONDS, WRITE_CONCURRENCY
from tests.support import builders as b
from tests.support.clock import FakeClock
from tests.support.fake_api import FakeApi
from tests.unit.cycle.cycle_builders import NS, gang

from .operator_world import cluster, gates_of, started


def test_an_admission_is_written_and_released_before_a_burst_of_waits() -> None:
    async def go() -> None:
        api = cluster(nodes=1, gpus=64)
        flood = [f"junk-{i:02d}" for i in range(3 * WRITE_CONCURRENCY)]
        for name in flood:  # 16 GPUs each on nodes of 4: never admitted, each a new PodGroup and a Wait to write
            api.add(*gang(name, 1, 16, created="2026-01-01T00:00:00Z"))
        api.add(b.local_queue("other", "main", NS))  # another tenant's LocalQueue, same ClusterQueue
        api.add(*gang("newcomer", 1, 1, created="2026-01-01T00:00:05Z", queue="other"))  # after every flood group
        operator = await started(api)
        first = len(api.writes)
        await operator.reconcile()
        assert gates_of(api, "newcomer-0") == []
        released = max(i for i, w in enumerate(api.writes) if "/pods/newcomer-0" in w.path)
        waits = [i for i in range(first, len(api.writes)) if "/junk-" in api.writes[i].path]
        assert len(waits) >= len(flood)  # every flood group's status was written in the same pass
        assert sum(i < released for i in waits) < WRITE_CONCURRENCY, (released, waits[:20])
        await operator.cache.stop()

    asyncio.run(go())


class SlowApi(FakeApi):
    """Every write takes `seconds` of the clock."""

    def __init__(self, clock: FakeClock, seconds: float) -> None:
        super().__init__()
        self.clock = clock
        self.seconds = seconds

    def _record(self, method: str, path: str, body: Any) -> None:
        self.clock.advance(self.seconds)
        super()._record(method, path, body)


def test_a_slow_api_server_leaves_the_rest_of_the_waits_to_the_next_pass() -> None:
    async def go() -> None:
        clock = FakeClock()
        api = SlowApi(clock, 0.0)
        api.objects.update(cluster(nodes=1, gpus=64).objects)
        flood = [f"junk-{i:02d}" for i in range(40)]
        for name in flood:
            api.add(*gang(name, 1, 16, created="2026-01-01T00:00:00Z"))
        api.add(b.local_queue("other", "main", NS))
        api.add(*gang("newcomer", 1, 1, created="2026-01-01T00:00:05Z", queue="other"))
        operator = await started(api, clock)
        api.seconds = 0.25  # from now on: 8 writes make the budget
        await operator.reconcile()
        assert gates_of(api, "newcomer-0") == []  # the admission is never left over
        written = {name for name in flood if api.get_object("PodGroup", NS, name) is not None}
        assert 0 < len(written) < len(flood)
        assert operator.cache.changed.is_set()  # the next pass comes without another change
        passes = 1
        while len(written) < len(flood):
            await operator.reconcile()
            written = {name for name in flood if api.get_object("PodGroup", NS, name) is not None}
            passes += 1
        assert passes <= 1 + len(flood) * 5 * 0.25 / WAIT_WRITE_SECONDS
        await operator.cache.stop()

    asyncio.run(go())
