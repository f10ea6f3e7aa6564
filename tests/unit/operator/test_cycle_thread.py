"""The cycle's pure decisions run in a worker thread: while a slow cycle decides, other tasks of the event
loop (the webhooks, the probe port) keep being served; a pass cancelled meanwhile writes nothing, and the
next pass reads only once the abandoned thread has finished."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from admission.core.cycle import CycleInput, CycleResult
from admission.kube.client import KubeApiError
from admission.operator import loop, metrics
from admission.operator.leader import LeadershipLost
from tests.support.clock import FakeClock

from .operator_world import DEADLINE, cluster, gates_of, leading, started, submit

SLOW = 0.5
"""How long the slowed cycle computes (about what 1,000 pending groups take)."""
PROMPT = 0.1
"""The longest another task of the loop may wait while the cycle computes."""


def run(go: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(go())  # type: ignore[arg-type]


def busy(seconds: float) -> None:
    """Compute, holding the GIL as pure Python does, for `seconds`."""
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        sum(range(100))


async def ticks(stop: asyncio.Event) -> list[float]:
    """The wall-clock gaps between the wake-ups of a task that asks to run every 10 ms."""
    gaps, last = [], time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(0.01)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now
    return gaps


def slowed(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> threading.Event:
    """`module.name` made to compute for SLOW seconds before it answers; the event is set once it ran."""
    ran, real = threading.Event(), getattr(module, name)

    def slow(*args: Any) -> Any:
        ran.set()
        busy(SLOW)
        return real(*args)

    monkeypatch.setattr(module, name, slow)
    return ran


async def reconcile_while_ticking(api: Any) -> tuple[loop.Operator, float, float]:
    """One pass of a started operator, with another task of the loop ticking meanwhile: the operator,
    how long the pass took and the longest gap between the ticks."""
    operator = await started(api)
    stop = asyncio.Event()
    ticker = asyncio.create_task(ticks(stop))
    await asyncio.sleep(0.02)
    started_at = time.perf_counter()
    await operator.reconcile()
    took = time.perf_counter() - started_at
    stop.set()
    gaps = await ticker
    await operator.cache.stop()
    return operator, took, max(gaps)


def test_the_loop_serves_other_tasks_while_a_slow_cycle_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    deciding = slowed(monkeypatch, loop, "decide")

    async def go() -> None:
        api = cluster()
        submit(api, "train", 2, 4)
        _, took, stall = await reconcile_while_ticking(api)
        assert deciding.is_set() and took >= SLOW
        assert stall < PROMPT, f"the loop stalled for {stall:.3f} s"
        assert gates_of(api, "train-0") == [] and gates_of(api, "train-1") == []  # the pass went on as before

    run(go)


def test_a_pass_cancelled_while_deciding_writes_nothing_and_the_next_reads_after_its_thread(
        monkeypatch: pytest.MonkeyPatch) -> None:
    deciding, release, finished = threading.Event(), threading.Event(), threading.Event()
    calls: list[int] = []

    def held_cycle(cycle: CycleInput) -> CycleResult:
        calls.append(1)
        if len(calls) == 1:  # only the first cycle is held, until the test lets it go
            deciding.set()
            release.wait(10)
        try:
            return real_cycle(cycle)
        finally:
            finished.set()

    real_cycle = loop.decide
    monkeypatch.setattr(loop, "decide", held_cycle)

    async def go() -> None:
        api, clock = cluster(), FakeClock()
        submit(api, "train", 2, 4)
        operator = await leading(api, clock)
        assert operator.elector is not None
        first = asyncio.create_task(operator._pass_in_term())
        while not deciding.is_set():
            await asyncio.sleep(0.001)
        before = len(api.writes)
        api.fail = lambda method, path: KubeApiError(method, path, 503, "away") if "/leases/" in path else None
        clock.advance(DEADLINE)
        await operator.elector.step()  # the renewal fails past the deadline: the term ends
        with pytest.raises(LeadershipLost, match="ended during the cycle"):
            await asyncio.wait_for(first, 1)  # at once, although the thread still computes
        assert not finished.is_set()

        api.fail = lambda method, path: None
        await operator.elector.step()  # a new term of the same replica
        assert await operator._begin_term()
        reads: list[bool] = []
        read = operator.reader.read

        def spied() -> Any:
            reads.append(finished.is_set())
            return read()

        operator.reader.read = spied  # type: ignore[method-assign]
        second = asyncio.create_task(operator._pass_in_term())
        await asyncio.sleep(0.1)
        assert reads == []  # the new pass waits for the abandoned thread before it reads
        assert [w.path for w in api.writes[before:] if "/leases/" not in w.path] == []
        release.set()
        await asyncio.wait_for(second, 5)

        assert reads and all(reads)
        # The abandoned cycle's result was dropped; the new term's cycle admitted the group.
        assert len(calls) == 2
        [admission] = [w.body["status"] for w in api.writes_to("/podgroups/train/status")]
        assert admission["phase"] == "Admitted" and admission["epoch"]["leaseTransitions"] == 1
        assert gates_of(api, "train-0") == [] and gates_of(api, "train-1") == []
        await operator.cache.stop()

    try:
        run(go)
    finally:
        release.set()


def test_the_metrics_figures_are_computed_off_the_loop_too(monkeypatch: pytest.MonkeyPatch) -> None:
    computing = slowed(monkeypatch, metrics, "cluster_figures")

    async def go() -> None:
        api = cluster()
        submit(api, "train", 2, 4)
        operator, _, stall = await reconcile_while_ticking(api)
        assert computing.is_set()
        assert stall < PROMPT, f"the loop stalled for {stall:.3f} s"
        assert operator.metrics.figures is not None and operator.metrics.figures.queues

    run(go)
