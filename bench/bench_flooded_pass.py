"""What 6,000 abandoned groups cost another tenant: one operator pass, flooded vs idle.

A namespace with 4 nodes of 4 GPUs and ClusterQueue `main`; the flood is `--groups` one-pod groups of 16 GPUs
each in LocalQueue `team/lq` (they never fit a node), already evaluated and told why they wait. The tenant is a
one-pod, one-GPU group in LocalQueue `team/tenant` of its own ClusterQueue. Timed, on an idle cluster (no
flood) and on the flooded one: a pass with nothing changed, the pass that admits one new tenant group
(reading, deciding, the writes to the in-memory API of the unit tests, and the metrics), and the pass after
it, which reads what that one wrote (the tenant's record, its pod released). The operator runs on
an injected clock that moves only between passes, so the metrics' time budget never skips a computation: every
pass here pays for the figures and the gap report, the worst case of a real operator.

    PYTHONPATH=. .venv/bin/python bench/bench_flooded_pass.py [--groups 6000] [--runs 7]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any, TypeVar

from admission.core.cycle import CycleInput, CycleResult
from admission.operator import Operator
from tests.support import builders as b
from tests.support.clock import FakeClock
from tests.support.fake_api import FakeApi
from tests.unit.cycle.cycle_builders import NS, gpu_template, member
from tests.unit.operator.operator_world import cluster, started, submit

TENANT_QUEUE = "tenant"
QUIET, ADMITTING, ECHO = "nothing changed", "one tenant group admitted", "the next (its writes seen)"
STAGES = ("read", "decide", "metrics", "rest")
T = TypeVar("T")


def tenant_cluster() -> FakeApi:
    """4 nodes of 4 GPUs, ClusterQueue `main` (the flood's) and `tenant` with its own LocalQueue."""
    api = cluster(nodes=4, gpus=100000)
    api.add(b.cluster_queue(TENANT_QUEUE, b.quota("gpus", 16)), b.local_queue(TENANT_QUEUE, TENANT_QUEUE, NS))
    return api


def add_tenant(api: FakeApi, name: str) -> None:
    api.add(gpu_template(f"{name}-gpus", 1), member(f"{name}-0", name, queue=TENANT_QUEUE, template=f"{name}-gpus"))


class Stages:
    """Where a pass's time goes: reading the cache, deciding, the metrics, and the rest (the loop's own work
    and its writes)."""

    def __init__(self, operator: Operator) -> None:
        self.seconds: dict[str, list[float]] = {}
        self._pass: dict[str, float] = {}
        operator.reader.read = self._timed("read", operator.reader.read)  # type: ignore[method-assign]
        operator.metrics.cycle = self._timed("metrics", operator.metrics.cycle)  # type: ignore[method-assign]
        decide = operator._decide

        async def timed_decide(cycle: CycleInput) -> CycleResult:
            started_at = time.perf_counter()
            try:
                return await decide(cycle)
            finally:
                self._add("decide", time.perf_counter() - started_at)

        operator._decide = timed_decide  # type: ignore[method-assign]

    def _timed(self, stage: str, work: Callable[..., T]) -> Callable[..., T]:
        def timed(*args: Any) -> T:
            started_at = time.perf_counter()
            try:
                return work(*args)
            finally:
                self._add(stage, time.perf_counter() - started_at)
        return timed

    def _add(self, stage: str, seconds: float) -> None:
        self._pass[stage] = self._pass.get(stage, 0.0) + seconds

    def close(self, total: float, what: str) -> None:
        """The pass that took `total` seconds is one of `what`."""
        for stage in STAGES[:-1]:
            self.seconds.setdefault(f"{what} {stage}", []).append(self._pass.get(stage, 0.0))
        self.seconds.setdefault(f"{what} rest", []).append(total - sum(self._pass.values()))
        self._pass = {}


async def timed_pass(operator: Operator, clock: FakeClock, stages: Stages | None = None, what: str = "") -> float:
    """One pass after the watches delivered what came before, and the heap kept after it as the loop keeps it
    (`operator.heap`); the pass's seconds."""
    await asyncio.sleep(0.02)
    started_at = time.perf_counter()
    await operator.reconcile()
    seconds = time.perf_counter() - started_at
    if stages is not None:
        stages.close(seconds, what)
    operator.heap.after_pass()
    clock.advance(1)
    return seconds


async def measure(groups: int, runs: int) -> dict[str, list[float]]:
    api = tenant_cluster()
    for i in range(groups):
        submit(api, f"f{i}", 1, 16)
    clock = FakeClock()
    operator = await started(api, clock)
    for _ in range(3):  # the flood is evaluated, told why it waits, and parked
        await timed_pass(operator, clock)
    quiet: list[float] = []
    admitting: list[float] = []
    stages = Stages(operator)
    echo: list[float] = []
    for run in range(runs):
        quiet.append(await timed_pass(operator, clock, stages, QUIET))
        add_tenant(api, f"tenant-{run}")
        admitting.append(await timed_pass(operator, clock, stages, ADMITTING))
        echo.append(await timed_pass(operator, clock, stages, ECHO))
        record = api.get_object("PodGroup", NS, f"tenant-{run}")
        assert record is not None and record["status"]["phase"] == "Admitted", "the tenant group was not admitted"
    await operator.cache.stop()
    return {QUIET: quiet, ADMITTING: admitting, ECHO: echo, **stages.seconds}


def describe(seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    return f"median {statistics.median(ms):7.1f} ms  (range {ms[0]:.1f}-{ms[-1]:.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=6000, help="abandoned groups in the flood")
    parser.add_argument("--runs", type=int, default=7, help="tenant groups admitted, one pass each")
    args = parser.parse_args()
    idle = asyncio.run(measure(0, args.runs))
    flooded = asyncio.run(measure(args.groups, args.runs))
    print(f"pass of the operator, idle cluster vs {args.groups} abandoned groups, {args.runs} passes each")
    for what in (QUIET, ADMITTING, ECHO):
        print(f"{what}:")
        print(f"  idle     {describe(idle[what])}")
        print(f"  flooded  {describe(flooded[what])}")
        idle_ms, flooded_ms = statistics.median(idle[what]) * 1000, statistics.median(flooded[what]) * 1000
        print(f"  flooded / idle {flooded_ms / idle_ms:.2f}x; target 1.2 x idle + 10 ms = {1.2 * idle_ms + 10:.1f} ms")
        print("  flooded by stage: " + ", ".join(
            f"{stage} {statistics.median(flooded[f'{what} {stage}']) * 1000:.1f}" for stage in STAGES)
              + " (ms, medians)")



if __name__ == "__main__":
    main()
