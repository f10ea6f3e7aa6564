"""What 6,000 abandoned groups cost another tenant: one operator pass, flooded vs idle.

A namespace with 12 nodes of 4 GPUs and ClusterQueue `main`; the flood is `--groups` one-pod groups of 16 GPUs
each in LocalQueue `team/lq` (they never fit a node), each pod with the claim the resourceclaim controller made
for it, already evaluated and told why they wait. The tenant's groups are one-pod, one-GPU groups in LocalQueue
`team/tenant` of its own ClusterQueue; `--running` of them were admitted and bound before the flood (as on the
real cluster, where the tenant's earlier groups keep running). Timed, in CPU time, on an idle cluster (no
flood) and on the flooded one: a pass with nothing changed, the pass that admits one new tenant group
(reading, deciding, the writes to the in-memory API of the unit tests, and the metrics), and the pass after
it, which reads what that one wrote and the scheduler's binding (the tenant's record, its pod released and
bound, its claim allocated: the group moves to Running). As `draq run` does, the operator
watches the owner kinds of its default integrations (Jobs, ReplicaSets, Deployments, StatefulSets), so every
reading walks the members' owner chains. The operator runs on
an injected clock that moves only between passes, so the metrics' time budget never skips a computation: every
pass here pays for the figures and the gap report, the worst case of a real operator.

    PYTHONPATH=. .venv/bin/python bench/bench_flooded_pass.py [--groups 6000] [--runs 7] [--running 30] \
        [--decisions FILE]

`--decisions FILE` writes every timed pass's decisions (group, kind, reason, message), idle and flooded, as JSON
lines: two versions of the code compared on the same passes (`diff`) decide the same when the files are equal.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Callable
from typing import Any, TypeVar

from admission.core.cycle import CycleInput, CycleResult
from admission.operator import Operator
from tests.support import builders as b
from tests.support.clock import FakeClock
from tests.support.fake_api import FakeApi
from tests.unit.cycle.cycle_builders import NS, gang, gpu_claim, gpu_template, member
from tests.unit.operator.operator_world import bind_as_planned, cluster, started

TENANT_QUEUE = "tenant"
QUIET, ADMITTING, ECHO = "nothing changed", "one tenant group admitted", "the next (it is bound, Running)"
STAGES = ("read", "decide", "metrics", "rest")
T = TypeVar("T")


def tenant_cluster() -> FakeApi:
    """12 nodes of 4 GPUs, ClusterQueue `main` (the flood's) and `tenant` with its own LocalQueue."""
    api = cluster(nodes=12, gpus=100000)
    api.add(b.cluster_queue(TENANT_QUEUE, b.quota("gpus", 48)), b.local_queue(TENANT_QUEUE, TENANT_QUEUE, NS))
    return api


def add_tenant(api: FakeApi, name: str) -> None:
    api.add(gpu_template(f"{name}-gpus", 1), member(f"{name}-0", name, queue=TENANT_QUEUE, template=f"{name}-gpus"))


def add_abandoned(api: FakeApi, name: str) -> None:
    """One abandoned one-pod group of 16 GPUs, with the claim the resourceclaim controller made for its pod."""
    template, pod = gang(name, 1, 16)
    claim = f"{name}-0-gpu"
    pod["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim}]}
    api.add(template, pod, gpu_claim(claim, 16))


async def admitted_and_running(api: FakeApi, operator: Operator, clock: FakeClock, name: str) -> None:
    """A tenant group admitted, then bound as planned by the scheduler (its claim allocated) and seen Running."""
    add_tenant(api, name)
    await timed_pass(operator, clock)
    await bind_as_planned(api, f"{name}-0", name)
    await timed_pass(operator, clock)


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
            started_at = time.process_time()
            try:
                return await decide(cycle)
            finally:
                self._add("decide", time.process_time() - started_at)

        operator._decide = timed_decide  # type: ignore[method-assign]

    def _timed(self, stage: str, work: Callable[..., T]) -> Callable[..., T]:
        def timed(*args: Any) -> T:
            started_at = time.process_time()
            try:
                return work(*args)
            finally:
                self._add(stage, time.process_time() - started_at)
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
    started_at = time.process_time()
    await operator.reconcile()
    seconds = time.process_time() - started_at
    if stages is not None:
        stages.close(seconds, what)
    operator.heap.after_pass()
    clock.advance(1)
    return seconds


def recording(operator: Operator, record: list[list[tuple[str, str, str, str]]]) -> None:
    """Each of the operator's decisions from now on appended to `record`, one list per cycle."""
    decide = operator._decide

    async def recorded(cycle: CycleInput) -> CycleResult:
        result = await decide(cycle)
        record.append(sorted((d.group, type(d).__name__, str(getattr(d, "reason", "")), getattr(d, "message", ""))
                             for d in result.decisions))
        return result

    operator._decide = recorded  # type: ignore[method-assign]


async def measure(groups: int, runs: int, running: int,
                  record: list[list[tuple[str, str, str, str]]] | None = None) -> dict[str, list[float]]:
    api = tenant_cluster()
    clock = FakeClock()
    operator = await started(api, clock, owners=True)
    for i in range(running):
        await admitted_and_running(api, operator, clock, f"earlier-{i}")
    for i in range(groups):
        add_abandoned(api, f"f{i}")
    for _ in range(3):  # the flood is evaluated, told why it waits, and parked
        await timed_pass(operator, clock)
    quiet: list[float] = []
    admitting: list[float] = []
    stages = Stages(operator)
    if record is not None:
        recording(operator, record)
    echo: list[float] = []
    for run in range(runs):
        quiet.append(await timed_pass(operator, clock, stages, QUIET))
        add_tenant(api, f"tenant-{run}")
        admitting.append(await timed_pass(operator, clock, stages, ADMITTING))
        record = api.get_object("PodGroup", NS, f"tenant-{run}")
        assert record is not None and record["status"]["phase"] == "Admitted", "the tenant group was not admitted"
        await bind_as_planned(api, f"tenant-{run}-0", f"tenant-{run}")
        echo.append(await timed_pass(operator, clock, stages, ECHO))
        record = api.get_object("PodGroup", NS, f"tenant-{run}")
        assert record is not None and record["status"]["phase"] == "Running", "the tenant group is not running"
    await operator.cache.stop()
    return {QUIET: quiet, ADMITTING: admitting, ECHO: echo, **stages.seconds}


def describe(seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    return f"median {statistics.median(ms):7.1f} ms  (range {ms[0]:.1f}-{ms[-1]:.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=6000, help="abandoned groups in the flood")
    parser.add_argument("--runs", type=int, default=7, help="tenant groups admitted, one pass each")
    parser.add_argument("--running", type=int, default=30, help="tenant groups running before the flood")
    parser.add_argument("--decisions", help="write each timed pass's decisions to this file (JSON lines)")
    args = parser.parse_args()
    record: list[list[tuple[str, str, str, str]]] | None = [] if args.decisions else None
    idle = asyncio.run(measure(0, args.runs, args.running, record))
    flooded = asyncio.run(measure(args.groups, args.runs, args.running, record))
    if args.decisions and record is not None:
        with open(args.decisions, "w", encoding="utf-8") as out:
            out.writelines(json.dumps(decisions) + "\n" for decisions in record)
    print(f"pass of the operator (CPU time), idle cluster vs {args.groups} abandoned groups, {args.running} tenant "
          f"groups running, {args.runs} passes each")
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
