"""The operator carries parked groups from pass to pass (`core.cycle.parking`): a group waiting for devices is
not evaluated again while nothing changes, nor when another group's member is bound as planned, and is when
room is freed (a bound pod deleted, a claim allocated on fewer devices than planned), or when the safety
period ends; a new term starts with nothing parked."""

from __future__ import annotations

import asyncio

from admission.operator import Operator
from tests.support.clock import FakeClock
from tests.unit.cycle.cycle_builders import NS

from .operator_world import bind_as_planned, cluster, leading, record, settle, started, submit

WIDE = f"{NS}/wide"


def evaluated_at(operator: Operator) -> float | None:
    """When the waiting group `wide` was last evaluated (None: not parked)."""
    parked = operator._parking.parked.get(WIDE)
    return parked.since if parked is not None else None


def test_a_parked_group_is_evaluated_again_on_room_changes_and_after_the_safety_period() -> None:
    async def go() -> None:
        api, clock = cluster(nodes=2, gpus=16), FakeClock()
        submit(api, "wide", 1, 6)  # 6 GPUs on one pod, nodes of 4: waits for devices
        submit(api, "small", 1, 1)
        operator = await started(api, clock)
        await settle(operator)
        assert record(api, "small")["phase"] == "Admitted"
        await settle(operator)
        first = evaluated_at(operator)
        assert first is not None
        clock.advance(5)
        await settle(operator)
        assert evaluated_at(operator) == first  # nothing changed: not evaluated again
        await bind_as_planned(api, "small-0", "small")  # it takes the room it was promised: nothing freed
        clock.advance(5)
        await settle(operator)
        assert evaluated_at(operator) == first
        await api.delete(f"/api/v1/namespaces/{NS}/pods/small-0")  # a bound pod goes: its node room is free
        clock.advance(5)
        await settle(operator)
        assert evaluated_at(operator) == first + 15
        clock.advance(operator.settings.park_safety_seconds - 1)
        await settle(operator)
        assert evaluated_at(operator) == first + 15
        clock.advance(1)
        await settle(operator)
        assert evaluated_at(operator) == first + 15 + operator.settings.park_safety_seconds
        await operator.cache.stop()

    asyncio.run(go())


def test_a_promise_the_scheduler_did_not_take_unparks_the_waiting_groups() -> None:
    async def go() -> None:
        api, clock = cluster(nodes=2, gpus=16), FakeClock()
        submit(api, "wide", 1, 6)
        submit(api, "small", 1, 1)
        operator = await started(api, clock)
        await settle(operator)
        await settle(operator)
        first = evaluated_at(operator)
        assert first is not None
        await bind_as_planned(api, "small-0", "small", devices=0)  # its planned GPU was not allocated
        clock.advance(5)
        await settle(operator)
        assert evaluated_at(operator) == first + 5
        await operator.cache.stop()

    asyncio.run(go())


def test_a_new_term_starts_with_nothing_parked() -> None:
    async def go() -> None:
        api, clock = cluster(nodes=2, gpus=16), FakeClock()
        submit(api, "wide", 1, 6)
        operator = await leading(api, clock)
        await settle(operator)
        assert evaluated_at(operator) is not None
        assert await operator._begin_term()
        assert evaluated_at(operator) is None
        await operator.cache.stop()

    asyncio.run(go())
