"""A pass's writes: admissions take the write slots before the Waits of other groups, so a burst of new groups
that all wait (a flood of pods) does not hold up another tenant's release."""

from __future__ import annotations

import asyncio

from admission.operator.loop import WRITE_CONCURRENCY
from tests.support import builders as b
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
