"""Waiting groups' status under another tenant's admissions: a message moved only by the rest of the cluster
is written again at most every `WAIT_DETAIL_SECONDS`; a new reason, or a change of the group itself, at once."""

from __future__ import annotations

import asyncio

from admission.operator.loop import WAIT_DETAIL_SECONDS
from tests.support.clock import FakeClock
from tests.support.fake_api import FakeApi
from tests.unit.cycle.cycle_builders import NS, gang, member

from .operator_world import cluster, record, settle, started, submit


def status_writes(api: FakeApi, group: str) -> int:
    return len(api.writes_to(f"/namespaces/{NS}/podgroups/{group}/status"))


def test_a_wait_moved_only_by_another_admission_is_rewritten_after_the_detail_interval() -> None:
    async def go() -> None:
        api, clock = cluster(nodes=2, gpus=16), FakeClock()
        submit(api, "hog", 1, 1)  # admitted: one node keeps 3 GPUs free
        operator = await started(api, clock)
        await settle(operator)
        submit(api, "wide", 2, 4)  # a whole node per pod: waits for devices (the empty cluster would hold it)
        await settle(operator)
        submit(api, "small-0", 1, 1)  # admitted: written again, as its PodGroup now exists (the group changed)
        await settle(operator)
        await settle(operator)
        written, writes = record(api, "wide")["message"], status_writes(api, "wide")
        assert "DevicesUnavailable" in str(record(api, "wide")["conditions"])
        submit(api, "small-1", 1, 4)  # admitted to the other node: the wait's best node and free count change
        await settle(operator)
        await settle(operator)
        assert record(api, "small-1")["phase"] == "Admitted"
        assert record(api, "wide")["message"] == written and status_writes(api, "wide") == writes
        decided = operator.reader.read()
        [wait] = [d for d in (await operator._decide(decided.cycle)).decisions if d.group == f"{NS}/wide"]
        assert wait.message != written  # what is deferred
        clock.advance(WAIT_DETAIL_SECONDS)
        await settle(operator)
        assert record(api, "wide")["message"] == wait.message and status_writes(api, "wide") == writes + 1
        await operator.cache.stop()

    asyncio.run(go())


def test_a_change_of_the_waiting_group_itself_is_written_at_once() -> None:
    async def go() -> None:
        api, clock = cluster(nodes=2, gpus=8), FakeClock()
        api.add(*gang("pair", 2, 6)[:2])  # one member of two so far: 6 GPUs on one pod, nodes of 4
        operator = await started(api, clock)
        await settle(operator)
        before = status_writes(api, "pair")
        api.add(member("pair-1", "pair", group_min=2, template="pair-gpus"))
        await settle(operator)
        assert status_writes(api, "pair") == before + 1
        assert record(api, "pair")["members"] == 2
        await operator.cache.stop()

    asyncio.run(go())
